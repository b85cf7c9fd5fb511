// Quarantine decisions of the node actor as pure code: which events quarantine a
// node (rules), which are still active (entity-level), and the cordon, taints,
// conditions and annotation the node should have, diffed against what it has.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "messages/health_event.hpp"
#include "messages/wall_time.hpp"

namespace vigil::control {

enum class taint_effect { no_schedule, prefer_no_schedule, no_execute };

/// "NoSchedule", "PreferNoSchedule", "NoExecute": Kubernetes' spelling.
std::string_view to_string(taint_effect effect);
std::optional<taint_effect> parse_taint_effect(std::string_view text);

struct taint {
  std::string key;
  std::string value;
  taint_effect effect = taint_effect::no_schedule;

  friend bool operator==(const taint& a, const taint& b) {
    return a.key == b.key && a.value == b.value && a.effect == b.effect;
  }
  friend bool operator<(const taint& a, const taint& b);
};

/// What a rule matches. Every field is a filter; an empty list or an unset
/// optional matches anything. Lists match when the event has any listed value.
struct rule_match {
  std::vector<std::string> agents;
  std::vector<std::string> component_classes;
  std::vector<std::string> check_names;
  std::optional<bool> is_fatal;
  std::vector<std::string> error_codes;    ///< any code of the event
  std::vector<recommended_action> actions; ///< the event's recommendedAction
  std::vector<std::string> entity_types;   ///< any entity of the event
};

/// One quarantine rule: the first rule (in order) that matches an unhealthy
/// event decides what that event does to the node.
struct quarantine_rule {
  std::string name; ///< unique; recorded with each active event
  rule_match match;
  bool cordon = true;
  std::vector<taint> taints;
  /// Node condition to set false; empty: the check family's default
  /// (quarantine_policy::condition_types).
  std::string condition_type;
};

/// Everything the quarantine logic reads from configuration (YAML-free).
struct quarantine_policy {
  std::vector<quarantine_rule> rules;
  /// A node labelled `opt_out_label=true` is never cordoned or tainted by vigil
  /// (what vigil already applied there is released, level-based); its
  /// conditions and annotation are still kept current.
  std::string opt_out_label = "vigil.dev/quarantine-opt-out";
  /// One condition per check family (componentClass); a class not listed
  /// gets "<componentClass>Healthy".
  std::map<std::string, std::string> condition_types = {{"GPU", "GPUHealthy"},
                                                        {"NIC", "NICHealthy"}};
  /// Entity types that only address another entity of the same event (a GPU's
  /// PCI address): cleared together with the entity they were reported with.
  std::vector<std::string> alias_entity_types = {"PCI"};
};

/// The rule used for an event whose quarantineOverrides.force is set and which
/// no rule matches: cordon only.
inline constexpr const char* forced_rule_name = "forced";

/// Returns the first rule matching the unhealthy event, or nullptr.
const quarantine_rule* match_rule(const health_event& event,
                                  const std::vector<quarantine_rule>& rules);

/// One active unhealthy (agent, check, entity) of a node; an event naming no
/// entity is tracked as one record with an empty subject.
struct active_record {
  std::string agent;
  std::string component_class;
  std::string check_name;
  entity subject;
  std::vector<entity> reported_with; ///< the other entities of the raising event
  std::vector<std::string> error_codes;
  std::string message;
  recommended_action action = recommended_action::none;
  std::string rule; ///< name of the quarantine rule that matched
  std::string event_id;
  std::optional<wall_time> generated;
  std::optional<stage_override> drain_overrides; ///< the raising event's
  std::string custom_action = {}; ///< its customRecommendedAction (action CUSTOM)
};

/// The GPU a record is about: its GPU_UUID subject, else a GPU_UUID reported
/// with it; "" when none.
std::string gpu_uuid_of(const active_record& record);

/// What one event did to the active set.
struct apply_outcome {
  bool changed = false; ///< records were added, replaced or removed
  std::string rule;     ///< unhealthy event: the rule that matched
  std::string ignored;  ///< why the event was not tracked; empty when it was
};

/// Entity-level tracking of one node's active unhealthy events, one record per
/// (agent, check, entity, error code), with the matching of fleet_view
/// (healthy_event_clears, seed 000 §2.2): a healthy event clears the entities
/// it names for the same agent and check, or all of that check's entities when
/// it names none; when it names error codes, only records with one of them.
class active_events {
public:
  /// Applies one event of this node. Unhealthy events are tracked only when a
  /// rule matches (or quarantineOverrides.force) and the event may act
  /// (processingStrategy executeRemediation, no quarantineOverrides.skip).
  apply_outcome apply(const health_event& event, const quarantine_policy& policy);

  /// Removes every record that `pred` selects (e.g. a fabric incident's ports);
  /// returns how many.
  template <class Predicate>
  std::size_t remove_if(Predicate pred) {
    std::size_t removed = 0;
    for (auto i = records_.begin(); i != records_.end();)
      if (pred(i->second)) {
        i = records_.erase(i);
        ++removed;
      } else {
        ++i;
      }
    return removed;
  }

  std::vector<active_record> records() const;
  bool empty() const { return records_.empty(); }
  std::size_t size() const { return records_.size(); }

private:
  void add(const health_event& event, const std::string& rule);
  bool clear(const health_event& event, const quarantine_policy& policy);

  // "agent|check|entityType|entityValue|errorCode" → record (fleet_view's key)
  std::map<std::string, active_record> records_;
};

/// A node condition as vigil manages it (status True = healthy).
struct node_condition {
  std::string type;
  bool healthy = true;
  std::string reason;
  std::string message;

  friend bool operator==(const node_condition& a, const node_condition& b) {
    return a.type == b.type && a.healthy == b.healthy && a.reason == b.reason
           && a.message == b.message;
  }
};

/// The node as last observed from the API server, with vigil's ownership
/// marks (annotations vigil writes next to every cordon and taint it applies).
struct node_observation {
  bool unschedulable = false;
  bool cordon_owned = false;       ///< vigil cordoned it (ownership mark present)
  std::vector<taint> taints;       ///< every taint on the node
  std::vector<taint> owned_taints; ///< the taints vigil recorded as its own
  /// The node's labels; a node actor keeps only those it reads (observe_node's
  /// filter).
  std::map<std::string, std::string> labels;
  /// Conditions of the types vigil manages, as they are on the node.
  std::map<std::string, node_condition> conditions;
  std::string annotation; ///< current quarantine annotation; "" when absent
};

/// Desired state of one node, diffed against its observation: the patch
/// intents. Applying them and the `*_after` ownership marks converges the node.
struct quarantine_decision {
  bool quarantined = false;     ///< some active event wants the node quarantined
  bool opted_out = false;       ///< the opt-out label suppressed cordon and taints
  bool held_by_breaker = false; ///< a new cordon or taint was refused (breaker)
  bool cordon = false;          ///< set unschedulable (a new cordon by vigil)
  bool uncordon = false;        ///< clear unschedulable (vigil's own cordon only)
  std::vector<taint> add_taints;
  std::vector<taint> remove_taints; ///< only taints vigil owns
  std::vector<node_condition> set_conditions;
  std::optional<std::string> annotation; ///< new content; "" removes it
  bool cordon_owned_after = false;
  std::vector<taint> owned_taints_after;

  /// Nothing to patch on the node (ownership marks unchanged too).
  bool no_change(const node_observation& observed) const;
};

/// What besides its active records bears on a node's quarantine.
struct quarantine_context {
  /// False while the circuit breaker refuses new cordons; releasing is always
  /// allowed, and so is a PreferNoSchedule taint (it takes no capacity away).
  bool new_quarantine_allowed = true;
  /// A maintenance CR or its validation is not over (seed 001 step 5, seed
  /// 003): vigil's cordon stays, whatever the records say.
  bool remediation_holds = false;
  /// The node's agent has not reported since then: the agent condition says
  /// so (and says it reports again once it does); no cordon, no taint: a
  /// silent agent is not a broken GPU.
  std::optional<wall_time> agent_silent_since;
  /// NIC ports ("device/port") down inside a fabric incident: the fabric is
  /// not the node's fault, so no cordon, drain or remediation, but new pods
  /// had better go elsewhere until the ports are up: a condition and a
  /// PreferNoSchedule taint (seed 002's fabric correlation).
  std::set<std::string> fabric_ports;
};

/// Level-based quarantine: the desired cordon, taints, conditions and
/// annotation for `active` in `context`, diffed against `observed`. vigil
/// never removes a cordon or taint it does not own.
quarantine_decision decide_quarantine(const node_observation& observed,
                                      const active_events& active,
                                      const quarantine_policy& policy,
                                      const quarantine_context& context = {});

/// Whether applying `d` takes capacity away (a new cordon, or a new taint
/// other than PreferNoSchedule): what the circuit breaker must admit first.
bool starts_quarantine(const quarantine_decision& d);

/// The node condition about a fabric incident's ports on the node, and the
/// soft taint that steers new pods away meanwhile.
inline constexpr const char* fabric_condition_type = "VigilFabricHealthy";
inline constexpr const char* fabric_taint_key = "vigil.dev/fabric-incident";

/// The node condition about vigil's own agent on the node.
inline constexpr const char* agent_condition_type = "VigilAgentReporting";

/// The quarantine annotation: a JSON array of the active records (agent,
/// componentClass, checkName, entityType, entityValue, errorCodes,
/// recommendedAction, rule), in a stable order; "" when none.
std::string encode_quarantine_annotation(const std::vector<active_record>& records);

} // namespace vigil::control
