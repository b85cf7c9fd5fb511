// The node actor: one per Kubernetes node, and the only place where work on
// that node is decided (ARCHITECTURE.md §2 "the node actor is the lock"). It
// tracks the node's active unhealthy events (entity level, seed 000 §2.2),
// observes the Node through the fleet's watch and converges cordon, taints,
// conditions and annotation with quarantine rules, asking the breaker before
// any new cordon. One reconcile at a time: its requests are in flight while
// newer triggers only mark it to run again. Its children: a gpu actor per GPU
// and a nic_port actor per NIC port it has heard of (their correlation
// histories), a drain actor while draining.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include <caf/actor.hpp>
#include <caf/replies_to.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/control/breaker/breaker_actor.hpp"
#include "actors/control/drain/drain_actor.hpp"
#include "actors/control/node/node_resource.hpp"
#include "actors/control/remediation/remediation_machine.hpp"
#include "actors/control/remediation/validation_job.hpp"
#include "actors/control/rules/correlation_rules.hpp"
#include "actors/control/rules/drain_plan.hpp"
#include "actors/control/rules/label_selector.hpp"
#include "actors/control/rules/quarantine_rules.hpp"
#include "actors/gateway/kube_gateway_messages.hpp"
#include "actors/journal/journal_messages.hpp"
#include "actors/protocol/control_messages.hpp"
#include "actors/supervisor/message_stats.hpp"
#include "messages/agent_gpu_facts.hpp"
#include "messages/gpu_allocations.hpp"
#include "runtime/clock.hpp"

namespace vigil {

/// Fleet-wide counters for /metrics: every node actor adds to them, the fleet
/// reports them. Monotonic atomics, not node state: nothing decides on them.
struct control_counters {
  std::atomic<std::uint64_t> cordons{0};
  std::atomic<std::uint64_t> uncordons{0};
  std::atomic<std::uint64_t> quarantines_held{0}; ///< refused by the breaker
  std::atomic<std::uint64_t> drains_started{0};
  std::atomic<std::uint64_t> drains_started_partial{0}; ///< only pods on one GPU
  std::atomic<std::uint64_t> drains_succeeded{0};
  std::atomic<std::uint64_t> drains_cancelled{0};
  std::atomic<std::uint64_t> drains_skipped{0}; ///< nothing to evict, or dry run
  std::atomic<std::uint64_t> drains_held{0};    ///< refused by the breaker
  std::atomic<std::uint64_t> evictions{0};
  std::atomic<std::uint64_t> pod_deletions{0}; ///< DeleteAfterTimeout, past its timeout
  std::atomic<std::uint64_t> rule_firings{0};  ///< correlation escalations
  std::atomic<std::uint64_t> rule_firings_repeated_xid{0}; ///< of those, by rule
  std::atomic<std::uint64_t> rule_firings_nic_flap{0};
  std::atomic<std::uint64_t> rule_firings_nic_drop{0};
  std::atomic<std::uint64_t> fabric_incidents{0};       ///< opened or grown
  std::atomic<std::uint64_t> remediations_started{0};   ///< CRs created
  std::atomic<std::uint64_t> remediations_succeeded{0}; ///< CRs that succeeded
  std::atomic<std::uint64_t> remediations_failed{0};    ///< CRs that failed
  std::atomic<std::uint64_t> remediations_skipped{0};   ///< same group or covered
  std::atomic<std::uint64_t> remediations_manual{0};    ///< left to an operator
  std::atomic<std::uint64_t> escalations{0};            ///< moved up the ladder
  std::atomic<std::uint64_t> validations_passed{0};     ///< fixes proven by their Job
  std::atomic<std::uint64_t> validations_failed{0};     ///< fixes their Job disproved
  /// The deepest node-actor mailbox seen when an event arrived, since the last
  /// scrape of /metrics (the fleet's summary takes and resets it).
  std::atomic<std::uint64_t> node_mailbox_high{0};
};

/// Config `remediation.*`: the maintenance CRs and their escalation ladder.
struct remediation_settings {
  bool enabled = true;  ///< false: quarantine and drain only, never a CR
  bool dry_run = false; ///< plan and journal remediations; create no CR (per stage)
  control::escalation_policy escalation;
  control::remediation_options options;
  caf::timespan poll = std::chrono::seconds{10}; ///< how often the CR in flight is read
  /// A CR not finished within this counts as failed and escalates (a
  /// TerminateNode nobody executes, a janitor that is down).
  std::chrono::seconds cr_timeout{2 * 3600};
  /// The same for a TerminateNode: a replacement takes hours.
  std::chrono::seconds terminate_timeout{24 * 3600};
  /// The breaker's pool label (breaker.pool_label): a node's pool for the
  /// per-pool budget of concurrent remediations (seed 003 "Blast Radius Control").
  std::string pool_label = "topology.kubernetes.io/rack";
  /// Proof of recovery before the node returns (remediation.validation.*).
  control::validation_policy validation;
  control::validation_job_options validation_jobs;
};

/// What every node actor reads from configuration; shared and immutable
/// (but for the counters it points to).
struct node_settings {
  control::quarantine_policy quarantine;
  /// control.gpu_node_label: the Nodes it selects count as GPU nodes for the
  /// breaker's percentage (default nvidia.com/gpu.present=true).
  control::label_selector gpu_nodes =
    *control::label_selector::parse("nvidia.com/gpu.present=true");
  std::string events_namespace = "default"; ///< where Kubernetes Events go
  bool dry_run = false; ///< decide and journal, never write to the API server
  caf::timespan retry_initial = std::chrono::seconds{1};
  caf::timespan retry_max = std::chrono::seconds{60};
  /// The drains this node actor starts (drain.dry_run: plan and journal only).
  std::shared_ptr<const drain_settings> drain = std::make_shared<drain_settings>();
  std::shared_ptr<control_counters> counters = std::make_shared<control_counters>();
  control::correlation_config correlation; ///< correlation.* thresholds
  /// control.agent_silence_seconds: a GPU node whose agent sent no heartbeat
  /// or event for this long gets the VigilAgentReporting=False condition and
  /// an Event (never a remediation). 0 (this default): not watched.
  std::chrono::seconds agent_silence{0};
  /// control.not_ready_after, control.node_problem_conditions: what the Node's
  /// own conditions raise (NodeNotReady → a reboot; node-problem-detector's).
  control::node_condition_settings conditions;
  remediation_settings remediation;
  /// control.shards: the fleet is split into this many shards by node name
  /// (control::shard_of); with more than one, a replica acts only on the
  /// nodes of the shards the shard elector gives it. 1: one leader for all.
  std::uint32_t shards = 1;
  /// breaker.window: how far back the quarantines the breaker counts reach
  /// (a fleet snapshot keeps them, fleet_snapshot.hpp).
  std::chrono::seconds breaker_window = std::chrono::minutes(5);
};

struct node_stats {
  std::uint64_t events = 0;     ///< routed events applied
  std::uint64_t ignored = 0;    ///< routed events no rule acted on
  std::uint64_t reconciles = 0; ///< decisions made
  std::uint64_t patches = 0;    ///< PATCH requests that succeeded
  std::uint64_t conflicts = 0;  ///< 409: the Node changed; re-read
  std::uint64_t failures = 0;   ///< other failed requests (retried)
  std::uint64_t cordons = 0;
  std::uint64_t uncordons = 0;
  std::uint64_t held = 0; ///< new quarantines refused by the breaker
  std::uint64_t drains_started = 0;
  std::uint64_t drains_succeeded = 0;
  std::uint64_t drains_cancelled = 0;
  std::uint64_t drains_skipped = 0; ///< nothing to evict, or dry run
  std::uint64_t drains_held = 0;    ///< refused by the breaker
  std::uint64_t evictions = 0;      ///< evictions the API server accepted
  std::uint64_t rule_firings = 0;   ///< events escalated by a correlation rule
  std::uint64_t remediations_started = 0;
  std::uint64_t remediations_succeeded = 0;
  std::uint64_t remediations_failed = 0;
};

struct node_state {
  std::string node_name;
  std::shared_ptr<const node_settings> settings;
  kube_gateway_handle gateway;
  journal_handle journal;
  breaker_handle breaker;
  std::shared_ptr<const clock> time;
  control::active_events active;
  /// Correlation: repeats are dropped here; each GPU's and NIC port's
  /// history lives in its own actor, spawned on the first event that names
  /// it and linked to this one (a crash of either restarts the node from
  /// the journal). One live event is correlated at a time; events routed
  /// meanwhile wait in `events_waiting`, so they are taken in order.
  control::event_deduplicator dedup;
  std::map<std::string, caf::actor> gpus;  ///< gpu actors by UUID
  std::map<std::string, caf::actor> ports; ///< nic_port actors by "device/port"
  bool correlating = false;                ///< a live event awaits its entity's answer
  /// Routed while it does, in order. A list: empty, it allocates nothing (an
  /// empty deque holds 512 bytes, per node) and, emptied, it keeps nothing.
  std::list<health_event> events_waiting;
  std::optional<control::observed_node> node; ///< unset until read or watched
  bool busy = false;                          ///< a reconcile's requests are in flight
  /// Its journaled history is being read or replayed: it must not act on
  /// the Node before (a quarantine it does not know of yet would be undone).
  bool awaiting_history = false;
  bool again = false;                ///< a trigger arrived while busy
  bool retry_armed = false;          ///< a retry timer is pending
  caf::timespan backoff{};           ///< next retry delay after a failure
  std::uint64_t decisions = 0;       ///< numbers the Kubernetes Events
  caf::actor drain;                  ///< the running drain, if any
  std::string drain_key;             ///< its control::drain_key
  bool drain_cancelling = false;     ///< it was told to stop
  bool drain_permit_pending = false; ///< the breaker is being asked
  /// A Kubernetes Event for every decision, once per episode: the drain the
  /// breaker holds (by key), and the last fabric incident that covered this
  /// node. (A quarantine the breaker holds is a decision of its own, with
  /// its QuarantineHeld Event.)
  std::string drain_hold_posted;
  std::optional<wall_time> fabric_event_posted;
  /// NIC ports down inside a fabric incident: a condition and a
  /// PreferNoSchedule taint until they are up, never a cordon or drain.
  control::fabric_ports fabric;
  /// seed 000 §3.1: what this quarantine already drained; reset on release.
  control::drain_history drain_history = control::drain_history::none;
  std::string drained_key; ///< key of the last drain that completed
  /// Ids of the condition events raised and not yet seen in the active set
  /// (their journal append is in flight), so a repeated watch event does not
  /// raise them twice; and the NotReady recheck timer armed, if any.
  std::set<std::string> conditions_raised;
  std::optional<wall_time> condition_check_at;
  /// Since when the node's agent has been silent; unset while it reports.
  std::optional<wall_time> agent_silent_since;
  /// The agent's latest PodResources report: which pod holds which GPU, for
  /// partial drains (seed 000 §3.1). Not journaled: the agent sends it again
  /// every minute and whenever it changes.
  std::optional<gpu_allocations> allocations;
  /// What the agent's heartbeat says of the GPUs (NVSwitches, model): with
  /// the Node's labels, what may be reset alone (seed 001 "Scope of Support").
  std::optional<agent_gpu_facts> agent_gpus;
  /// Why the last remediation went to a person (seed 000 §4); cleared when
  /// an automatic step follows or the records are cleared. For the console.
  std::string handed_to_operator;
  /// The node's remediations (seed 000 §4); set when the actor starts.
  std::optional<control::remediation_machine> remediation;
  node_stats stats;
  static inline const char* name = "node";
};

/// The node actor's protocol, which the compiler checks at every send:
/// (route_atom, health_event, seq); (observe_atom, shared_json Node);
/// (replay_atom, vector<health_event>, vector<replay_mark>); (history_atom):
/// a replay is coming, no reconcile until it is in;
/// (summary_atom) → JSON; (tile_atom) → its fleet tile's fields as JSON;
/// (children_atom) → a JSON row per gpu, nic_port and drain actor;
/// (drained_atom, key, outcome, evictions, deletions) from its drain actor;
/// (fabric_atom): drop NIC port-down records, a fabric incident covers them;
/// (nicdrop_atom, health_event) from a nic_port actor: its port dropped;
/// (allocations_atom, report) and (gpu_facts_atom, facts) from the agent's
/// reports; (agent_quiet_atom, silent, since) from the fleet's liveness
/// check; (attempts_atom, attempts) from the rebuild.
/// Every event first passes the correlation rules, which may escalate its
/// recommended action (journaled as a "correlation" row).
/// Once the quarantine is in place the node actor runs the drain its active
/// events want (seed 000 §3.1) as a linked drain actor, one at a time: a
/// different drain supersedes (cancels) the running one, a release cancels it.
using node_handle = caf::typed_actor<
  caf::reacts_to<route_atom, health_event, std::int64_t>,
  caf::reacts_to<replay_atom, std::vector<health_event>, std::vector<replay_mark>>,
  caf::reacts_to<history_atom>, caf::reacts_to<nicdrop_atom, health_event>,
  caf::reacts_to<fabric_atom>, caf::reacts_to<observe_atom, shared_json>,
  caf::reacts_to<allocations_atom, gpu_allocations>,
  caf::reacts_to<gpu_facts_atom, agent_gpu_facts>,
  caf::reacts_to<agent_quiet_atom, bool, std::int64_t>,
  caf::replies_to<summary_atom>::with<std::string>,
  caf::replies_to<tile_atom>::with<std::string>,
  caf::replies_to<children_atom>::with<std::vector<std::string>>,
  caf::reacts_to<attempts_atom, std::vector<remediation_attempt>>,
  caf::reacts_to<slot_check_atom>,
  caf::reacts_to<drained_atom, std::string, std::string, std::uint64_t, std::uint64_t>>;

/// The node's protocol and its own timers: the next condition check, a
/// reconcile retry, and the remediation machine's start, poll and
/// verification timers.
using node_timers = node_handle::extend<
  caf::reacts_to<condition_check_atom>, caf::reacts_to<reconcile_atom>,
  caf::reacts_to<remediation_start_atom>, caf::reacts_to<remediation_poll_atom>,
  caf::reacts_to<remediation_verify_atom>>;

/// Measured (message_stats): the console's actors page shows what it handles.
using node_actor = caf::stateful_actor<node_state, observed<node_timers::base>>;

node_timers::behavior_type node(node_actor* self, std::string name,
                                std::shared_ptr<const node_settings> settings,
                                kube_gateway_handle gateway, journal_handle journal,
                                breaker_handle breaker,
                                std::shared_ptr<const clock> time);

/// A Kubernetes Event about the node (its decisions, drains, remediations),
/// fire and forget: a failure is logged. Callers check their dry-run switch.
void post_node_event(node_actor* self, const std::string& reason,
                     const std::string& message, bool warning);

/// Journal row kind of a quarantine decision.
constexpr const char* quarantine_row = "quarantine";
/// Journal row kind of a correlation rule's firing.
constexpr const char* correlation_row = "correlation";
/// Journal row kind of the pods holding a failing GPU when its fault arrived.
constexpr const char* gpu_holders_row = "gpu_holders";
/// Journal row kind of a fabric-wide NIC incident (fleet-wide: node "").
constexpr const char* fabric_row = "fabric_incident";

} // namespace vigil
