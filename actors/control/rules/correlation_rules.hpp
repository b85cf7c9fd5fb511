// Correlation rules over time windows (seed 002 §6, ARCHITECTURE.md §3): event
// dedup, repeated XIDs per GPU, NIC flap and drop per port, repeated
// remediation per node, fabric-wide NIC incidents. Time is passed in.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "actors/control/rules/quarantine_rules.hpp"
#include "messages/health_event.hpp"
#include "messages/wall_time.hpp"

namespace vigil::control {

/// Every threshold of the correlation rules, with its default.
struct correlation_config {
  /// Same node, agent, check, health, entities and codes: one event per window.
  /// Default 3 min.
  std::chrono::seconds dedup_window = std::chrono::minutes(3);

  /// Fatal XIDs on one GPU: this many bursts within xid_window escalate to
  /// CONTACT_SUPPORT. Default 5 in 24 h.
  std::size_t xid_repeat_threshold = 5;
  std::chrono::seconds xid_window = std::chrono::hours(24);
  /// XIDs within this time of a burst's first one count once. Default 3 min.
  std::chrono::seconds xid_burst = std::chrono::minutes(3);
  /// An escalated GPU stays escalated this long after the last trigger. Default 3 h.
  std::chrono::seconds xid_sticky = std::chrono::hours(3);

  /// seed 002 §6.3: this many link_downed events on one port within
  /// nic_flap_window mean a flapping port (REPLACE_VM). Default 3 in 10 min.
  std::size_t nic_flap_threshold = 3;
  std::chrono::seconds nic_flap_window = std::chrono::minutes(10);
  /// seed 002 §6.2: DOWN this long with no link_downed delta is a dropped port.
  /// Default 4 min.
  std::chrono::seconds nic_drop_after = std::chrono::minutes(4);
  recommended_action nic_drop_action = recommended_action::replace_vm;

  /// Remediations of one node: this many within the window escalate to
  /// CONTACT_SUPPORT. Default 5 in 7 days.
  std::size_t remediation_repeat_threshold = 5;
  std::chrono::seconds remediation_window = std::chrono::hours(24 * 7);

  /// NIC ports going down on at least this many distinct nodes within
  /// fabric_window are one fabric incident. Defaults 3 nodes, 5 min.
  std::size_t fabric_min_nodes = 3;
  std::chrono::seconds fabric_window = std::chrono::minutes(5);
  /// A link-down report (port down or link_downed rise) is held this long
  /// before it reaches its node, so an incident that is still forming can
  /// claim it. 0 here (tests act at once); the configuration's default is 30 s.
  std::chrono::seconds fabric_hold{0};
};

/// Drops repeats of an event within dedup_window of the first one admitted.
class event_deduplicator {
public:
  explicit event_deduplicator(correlation_config config = {});

  /// True when the event is new (or its previous copy is older than the window).
  bool admit(const health_event& event, wall_time now);
  std::size_t tracked() const { return last_.size(); }

  /// node|agent|check|healthy|sorted entities|sorted codes.
  static std::string key_of(const health_event& event);

private:
  void prune(wall_time now);

  correlation_config config_;
  std::map<std::string, wall_time> last_;
  std::deque<std::pair<wall_time, std::string>> order_;
};

/// Fatal XID history of one GPU (the gpu actor's state).
class gpu_xid_history {
public:
  explicit gpu_xid_history(correlation_config config = {});

  /// One fatal XID at `now`: CONTACT_SUPPORT when the GPU is (now) escalated.
  std::optional<recommended_action> on_fatal_xid(wall_time now);
  bool escalated(wall_time now) const { return sticky_until_ && now < *sticky_until_; }
  /// Bursts counted within the window ending at the last XID.
  std::size_t bursts() const { return bursts_.size(); }

private:
  correlation_config config_;
  /// First XID of each burst, oldest first. A vector, not a deque: one per
  /// gpu actor, and an empty deque already holds a 512-byte block.
  std::vector<wall_time> bursts_;
  std::optional<wall_time> sticky_until_;
};

/// What a NIC port rule concluded.
struct nic_verdict {
  enum class kind { flapping, dropped };
  kind what = kind::flapping;
  recommended_action action = recommended_action::replace_vm;
  std::string message;
};

/// State and link_downed history of one NIC port (the nic_port actor's state).
class nic_port_history {
public:
  explicit nic_port_history(correlation_config config = {});

  /// The port's link_downed counter rose by `delta` (each counts as one
  /// event), as `check` reported at `now` (its generatedTimestamp; "" when the
  /// report had none). The state and degradation checks' reports of one DOWN
  /// at the same instant count once.
  std::optional<nic_verdict> on_link_downed(std::uint64_t delta, wall_time now,
                                            const std::string& check = {});
  /// The port was seen DOWN (`up` false) or back up.
  void on_state(bool up, wall_time now);
  /// Timer check for the drop rule; reports a drop once per DOWN period.
  std::optional<nic_verdict> evaluate(wall_time now);
  /// When evaluate() should next run for the drop rule; nullopt when not down.
  std::optional<wall_time> next_check() const;
  /// A drop was reported for the current DOWN period.
  bool drop_reported() const { return drop_reported_; }
  /// Since when the port is DOWN; nullopt while it is up (or never seen).
  std::optional<wall_time> down_since() const { return down_since_; }
  /// link_downed rises counted by the flap rule (its window, seed 002 §6.3).
  std::size_t link_downs() const { return link_downs_.size(); }
  /// The current DOWN period is explained elsewhere (a fabric incident): the
  /// drop rule stays quiet until the port has been up again.
  void explain_down() { drop_reported_ = down_since_.has_value() || drop_reported_; }

private:
  correlation_config config_;
  std::vector<wall_time> link_downs_;       ///< oldest first (a vector: see bursts_)
  std::optional<wall_time> last_report_at_; ///< the latest link_downed report
  std::uint64_t last_report_delta_ = 0;     ///< and the most it reported
  std::string last_report_check_;           ///< its check; "" once paired
  std::optional<wall_time> down_since_;
  bool delta_while_down_ = false;
  bool drop_reported_ = false;
};

/// What the agent last said of a NIC port, for the console's node page: the
/// state events' fields (seed 002 §5) and the link_downed rises vigil saw.
struct nic_port_report {
  std::string state;             ///< "ACTIVE", "DOWN", …; "" until a state event came
  std::string phys_state;        ///< "LinkUp", "Polling", …
  std::string link_layer;        ///< "InfiniBand" or "Ethernet"
  std::string role;              ///< compute, storage or management (seed 002 §4)
  std::uint64_t link_downed = 0; ///< rises of the counter seen since the actor began
  std::optional<wall_time> at;   ///< the latest event about the port
};

/// Folds an event about the port into `report`: the metadata it carries
/// replaces what was known, the rest is kept.
void note_port_report(nic_port_report& report, const health_event& e, wall_time at);

/// Remediations of one node (the node actor's state).
class remediation_history {
public:
  explicit remediation_history(correlation_config config = {});

  /// Records a remediation at `now`; CONTACT_SUPPORT when this makes the node
  /// reach the threshold within the window.
  std::optional<recommended_action> on_remediation(wall_time now);
  /// Would the next remediation escalate? The node asks before starting one.
  bool exhausted(wall_time now);
  std::size_t count(wall_time now);

private:
  void prune(wall_time now);

  correlation_config config_;
  std::deque<wall_time> times_;
};

/// A fabric-wide NIC incident: ports down on many nodes at once.
struct fabric_incident {
  wall_time opened{};
  std::set<std::string> nodes;
};

/// Cross-node rule (the analyzer's state): NIC ports going down on at least
/// fabric_min_nodes nodes within fabric_window are one incident; its nodes are
/// not quarantined for it.
class fabric_correlator {
public:
  explicit fabric_correlator(correlation_config config = {});

  /// A NIC port of `node` went down. Returns the incident when this event
  /// opens one or adds a node to the open one.
  std::optional<fabric_incident> on_port_down(const std::string& node, wall_time now);
  /// True when a NIC-down event of `node` at `now` belongs to an open incident
  /// and must not quarantine the node.
  bool suppresses(const std::string& node, wall_time now);
  std::optional<fabric_incident> open_incident(wall_time now);

private:
  void prune(wall_time now);

  correlation_config config_;
  std::deque<std::pair<wall_time, std::string>> downs_;
  std::optional<fabric_incident> incident_;
  wall_time last_down_{};
};

/// What the per-node rules made of one event.
struct correlation_outcome {
  bool repeat = false; ///< a copy within dedup_window: counted once already
  /// The action the event must carry instead of its own; nullopt: unchanged.
  std::optional<recommended_action> escalate;
  std::string rule;    ///< "repeated-xid" or "nic-flap" when a rule fired
  std::string message; ///< why, for logs, the journal and the node's condition
  /// Events the rules derive: a flapping port's NICPortFlapping record, a
  /// dropped port coming back up: its healthy twin.
  std::vector<health_event> derived;
  /// Verdicts that fell due before this event and come before it: a drop
  /// whose deadline the event's time is past (rule "nic-drop"), when no timer
  /// reported it first (a replay, or a busy mailbox).
  std::vector<health_event> due;
};

/// What a node's active set takes from one event and the rules' outcome, in
/// order: the verdicts that fell due before it, the event (with the escalated
/// action, and why in its message, when the rules escalated it), then what the
/// rules derived. The node actor, the snapshot builder and the simulation
/// apply exactly this.
std::vector<health_event> events_in_order(const health_event& event,
                                          correlation_outcome outcome);

/// Whose history an event (past dedup) goes to: the gpu actor of its GPU, the
/// nic_port actor of its port, or nobody's (ARCHITECTURE.md §3).
struct correlation_subject {
  enum class kind { none, gpu, nic_port };
  kind what = kind::none;
  std::string key; ///< the GPU UUID, or "device/port"
};
correlation_subject subject_of(const health_event& event);

/// The gpu actor's rule over one event of its GPU at event time `at`:
/// repeated fatal XIDs escalate to CONTACT_SUPPORT.
correlation_outcome observe_gpu(gpu_xid_history& history, const std::string& uuid,
                                const health_event& event, wall_time at);

/// The nic_port actor's rules over one event of its port (`port` is
/// "device/port") at event time `at`: a drop that fell due before `at` (in
/// `due`), the flap rule's verdict, and the drop rule's bookkeeping (a
/// dropped port coming back up derives its healthy twin).
correlation_outcome observe_port(nic_port_history& history, const std::string& port,
                                 const health_event& event, wall_time at);

/// seed 002 §6.2 for one port: the derived NICPortDropped event when the port
/// has been DOWN for nic_drop_after with no recovery attempt (once per DOWN
/// period); nullopt otherwise. The drop happened at its deadline (down since +
/// nic_drop_after), so that is its time and its id's, however late `now` is:
/// a timer that fires late, an event that comes after the deadline, and a
/// replay of the journal all make the same event (its firing is journaled
/// once, and the Node's condition is not patched again at a restart).
std::optional<health_event> due_drop(nic_port_history& history, const std::string& node,
                                     const std::string& port, wall_time now);

/// The per-node rules over one node's events, in event time (generatedTimestamp,
/// else arrival), so that replaying the journal rebuilds the same verdicts:
/// repeated fatal XIDs on one GPU escalate to CONTACT_SUPPORT; link_downed
/// events of one NIC port (a port-state DOWN counts one, a counter event its
/// delta) past nic_flap_threshold in nic_flap_window escalate to REPLACE_VM.
/// Repeats within dedup_window are not counted twice.
class node_correlator {
public:
  explicit node_correlator(correlation_config config = {});
  correlation_outcome observe(const health_event& event, wall_time now);

  /// seed 002 §6.2: when the drop rule must next be evaluated; nullopt: no
  /// port is down without recovery attempts.
  std::optional<wall_time> next_drop_check() const;
  /// The ports of `node` DOWN for nic_drop_after with no link_downed delta,
  /// each as a derived unhealthy event (check NICPortDropped, action
  /// nic_drop_action); reported once per DOWN period.
  std::vector<health_event> due_drops(const std::string& node, wall_time now);
  /// A fabric incident covers this node's down ports: no drop for them.
  void explain_port_downs();

private:
  correlation_config config_;
  event_deduplicator dedup_;
  std::map<std::string, gpu_xid_history> gpus_;   ///< by GPU UUID
  std::map<std::string, nic_port_history> ports_; ///< by "device/port"
};

/// The fleet's hold on link-down reports (correlation.fabric_hold): such a
/// report waits its hold before it reaches its node, so that a fabric
/// incident still forming can claim it; the node's later events wait behind
/// it, so the node sees its events in order.
class fabric_hold {
public:
  struct held {
    health_event event;
    std::int64_t seq = 0;
    wall_time due{};
  };

  explicit fabric_hold(std::chrono::nanoseconds hold = {}) : hold_(hold) {}

  /// Takes the event when it must wait: a link-down report to hold
  /// (`link_down`) or any event of a node with events on hold. False: deliver
  /// it now.
  bool take(health_event& event, std::int64_t seq, bool link_down, wall_time now);
  /// The node's events that may go now, in order: those due, and whatever
  /// waited behind them and is not itself held.
  std::vector<held> release(const std::string& node, wall_time now);
  /// When the node's next held event is due; nullopt when none is held.
  std::optional<wall_time> next_due(const std::string& node) const;
  /// Forgets the node's held events (its actor restarts from the journal,
  /// which has them); returns how many.
  std::size_t drop(const std::string& node);
  void clear() { nodes_.clear(); }
  std::size_t size() const;

private:
  std::chrono::nanoseconds hold_;
  std::map<std::string, std::deque<held>> nodes_;
};

/// A NIC port-state event reporting a port down (the fabric rule's input).
bool is_nic_port_down(const health_event& event);
/// A port down or a rise of its link_downed counter (seed 002 §6.3): what a
/// fabric incident explains and keeps from quarantining a node.
bool reports_link_down(const health_event& event);

/// A record a fabric incident explains (seed 002 §6.3): a port down, the
/// link_downed rise reported with it, or the drop and flap rules' verdicts.
bool explained_by_fabric(const active_record& record);

/// The NIC ports ("device/port") of one node that are down inside a fabric
/// incident. The node is not quarantined for them, but it keeps a condition
/// and a PreferNoSchedule taint until each of them is up again.
class fabric_ports {
public:
  /// An incident covers the node: the ports of `covered` (the records it
  /// explains, about to be dropped) that a port-state check reported down are
  /// down because of the fabric.
  void incident(const std::vector<active_record>& covered);
  /// One event of the node: a port-state down the fleet marked as the
  /// fabric's (store-and-analyse while an incident lasts) adds its port, the
  /// port's healthy state event removes it. Only port-state downs count: a
  /// link_downed rise or a flap verdict has no "up" that would end it.
  /// True when the set changed.
  bool observe(const health_event& event);

  const std::set<std::string>& ports() const { return ports_; }

private:
  std::set<std::string> ports_;
};

/// The check name of the events the drop rule derives.
inline constexpr const char* nic_port_dropped_check = "NICPortDropped";
/// The check name of the events the flap rule derives.
inline constexpr const char* nic_port_flapping_check = "NICPortFlapping";

} // namespace vigil::control
