// The fleet actor: spawns and supervises one node actor per Kubernetes node
// (from the Node watch and on demand when an event names a node), routes
// journaled events to them, and rebuilds their state from the journal at
// startup and when one crashes (ARCHITECTURE.md §3 "supervision").
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <caf/actor.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/control/fleet/agent_liveness.hpp"
#include "actors/control/node/node_actor.hpp"
#include "actors/control/rules/correlation_rules.hpp"
#include "actors/gateway/kube_gateway_messages.hpp"
#include "actors/journal/journal_messages.hpp"
#include "actors/protocol/control_messages.hpp"
#include "actors/supervisor/message_stats.hpp"
#include "messages/health_event.hpp"
#include "runtime/journal/journal_store.hpp"

namespace vigil {

struct fleet_stats {
  std::uint64_t routed = 0;   ///< events handed to node actors
  std::uint64_t spawned = 0;  ///< node actors started
  std::uint64_t restarts = 0; ///< node actors restarted after a crash
  std::uint64_t rows_replayed = 0;
  std::uint64_t undecodable_rows = 0; ///< journal rows that no longer decode
  std::uint64_t watch_events = 0;
  std::uint64_t dropped_standby = 0; ///< routed while standing by (journaled only)
  /// (shards_atom) messages that changed the shards owned.
  std::uint64_t shard_changes = 0;
  std::uint64_t tailed = 0; ///< events routed from the journal's tail
  /// The last whole rebuild's fleet snapshot (0: none used) and its rows.
  std::int64_t snapshot_id = 0;
  std::uint64_t snapshot_rows = 0;
};

/// A node actor the fleet restarted after crashes (the console's actors page).
struct node_crashes {
  std::uint64_t restarts = 0;
  std::string last_reason; ///< the exit reason of the latest crash
};

struct fleet_state {
  std::shared_ptr<const node_settings> settings;
  kube_gateway_handle gateway;
  journal_handle journal;
  breaker_handle breaker;
  std::shared_ptr<const clock> time;
  std::unordered_map<std::string, node_handle> nodes;
  std::map<caf::actor_addr, std::string> names; ///< for down messages
  /// Node actors restarted after a crash: how often, and the last reason.
  std::map<std::string, node_crashes> crashes;
  std::set<std::string> gpu_nodes;
  /// The Nodes the list in progress has shown so far (it comes in pages):
  /// at its last page, GPU nodes it did not show are gone.
  std::set<std::string> listing;
  /// Events routed while the startup rebuild runs; those at or below the
  /// rebuilt seq are already in it.
  std::vector<std::pair<health_event, std::int64_t>> held;
  std::int64_t rebuilt_seq = 0;
  /// Restarted node actors whose journal replay is being read, with the
  /// events routed to them meanwhile (delivered after the replay, in order).
  std::map<std::string, std::vector<std::pair<health_event, std::int64_t>>> replaying;
  bool rebuilt = false; ///< the journal has been folded in
  /// The shards a later gain's rebuild is reading (empty: a whole rebuild).
  std::set<std::uint32_t> rebuilding;
  bool listed = false; ///< the Node list has been seen
  bool stopping = false;
  bool watch_nodes = true; ///< watch Nodes while leading
  bool standby = false;    ///< another replica leads: no node actors, no watch
  /// With settings->shards > 1: the shards whose nodes this replica acts on
  /// (from the shard elector); standby while empty.
  std::set<std::uint32_t> owned;
  /// Shards gained while a rebuild was reading the journal: rebuilt next.
  std::set<std::uint32_t> pending_gain;
  /// Sharded, events reach the fleet by following the journal (any replica
  /// may have journaled them): rows up to here were taken; one read at a
  /// time; a read of an earlier generation (before leadership was lost) is
  /// ignored.
  journal_position tail_at;
  bool tail_in_flight = false;
  std::uint64_t tail_generation = 0;
  std::uint64_t watch_id = 0;
  /// Cross-node correlation (seed 002 §1.4): NIC ports down on many nodes at
  /// once are one incident.
  control::fabric_correlator fabric;
  /// Link-down reports on hold (correlation.fabric_hold), and the events of
  /// their nodes waiting behind them.
  control::fabric_hold on_hold;
  /// Whose agent stopped reporting (node_settings::agent_silence).
  control::agent_liveness liveness{std::chrono::seconds{0}};
  bool liveness_armed = false;
  fleet_stats stats;
  static inline const char* name = "fleet";
};

using fleet_actor = caf::stateful_actor<fleet_state, observed<caf::event_based_actor>>;

/// (snapshot_turn_atom) → bool: whether this replica takes the fleet's
/// rebuild snapshots now (the leader; sharded, the owner of shard 0).
using snapshot_turn_atom = caf::atom_constant<caf::atom("snapturn")>;

/// Rows read per journal request during rebuilds.
constexpr std::size_t fleet_rebuild_page = 10000;
/// Sharded: how often the fleet reads the journal's tail when it is dry,
/// and the most rows per read.
constexpr caf::timespan fleet_tail_interval = std::chrono::milliseconds{100};
constexpr std::size_t fleet_tail_page = 2000;

/// (route_atom, health_event, seq); kube_watch_event from the Node watch;
/// (summary_atom) → JSON with the counts and readiness;
/// (summary_atom, node) → that node actor's summary;
/// (node_summaries_atom) and (tile_atom) → every node actor's summary or tile;
/// (children_atom, node) → the rows of the actors that node supervises.
/// With settings->shards > 1, (shards_atom, shards) from the shard elector
/// replaces (leader_atom, bool): the fleet acts only on the nodes of the
/// shards it owns; a shard gained is rebuilt from the journal, a shard lost
/// stops its node actors.
/// `watch_nodes` false: no Node watch (tests feed observe messages directly).
/// `await_leadership`: start as a standby and act only between
/// (leader_atom, true) and (leader_atom, false); becoming leader rebuilds the
/// whole state from the journal, losing it stops every node actor.
caf::behavior fleet(fleet_actor* self, std::shared_ptr<const node_settings> settings,
                    kube_gateway_handle gateway, journal_handle journal,
                    breaker_handle breaker, std::shared_ptr<const clock> time,
                    bool watch_nodes, bool await_leadership);

/// Groups journal rows for a rebuild: each node's events oldest first, and
/// the fleet-wide breaker rows. Undecodable event rows are counted, reported
/// by seq, and skipped.
struct rebuild_batch {
  std::map<std::string, std::vector<health_event>> events;
  /// Completed drains and fabric incidents among each node's events.
  std::map<std::string, std::vector<replay_mark>> marks;
  /// CRs created, by node.
  std::map<std::string, std::vector<remediation_attempt>> attempts;
  /// The breaker's rows: trips, resets and the cordons it counted.
  std::vector<journal_record> breaker_rows;
  /// NIC port-downs with the time they were journaled: the fabric window's
  /// history.
  std::vector<std::pair<wall_time, std::string>> port_downs;
  std::vector<std::int64_t> undecodable;
  std::int64_t last_seq = 0;
};
void fold_rows(rebuild_batch& into, const std::vector<journal_record>& rows);

/// Whether this replica acts on `node` now: leading (one shard), or owning
/// the node's shard.
bool owns(const fleet_state& st, const std::string& node);

} // namespace vigil
