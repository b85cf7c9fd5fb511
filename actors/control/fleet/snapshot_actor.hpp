// The actor that takes the fleet's rebuild snapshots (issue 22): every
// interval, on the replica whose turn it is (the fleet says: the leader, or
// sharded the owner of shard 0), it reads the journal's tail on a connection
// of its own and stores a snapshot (fleet_snapshot.hpp). It blocks on the
// database, so it runs detached. With journal.retention_days it then
// deletes the rows older than that which the snapshot does not name.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>

#include <caf/fwd.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/control/fleet/fleet_snapshot.hpp"
#include "runtime/clock.hpp"
#include "runtime/journal/journal_store.hpp"

namespace vigil {

/// Journal rows looked at for retention after one snapshot, at most (a
/// large backlog is worked off over several snapshots).
constexpr std::size_t snapshot_prune_rows = 1'000'000;

/// (snapshot_tick_atom): time for the next snapshot.
using snapshot_tick_atom = caf::atom_constant<caf::atom("snaptick")>;

/// The snapshot actor's figures, read by /metrics while it blocks on the
/// database (snapshot_metric_families).
struct snapshot_stats {
  std::atomic<std::uint64_t> taken{0};
  std::atomic<std::uint64_t> failures{0};    ///< snapshots or retention rounds failed
  std::atomic<std::uint64_t> rows_kept{0};   ///< rows the newest snapshot names
  std::atomic<std::uint64_t> rows_pruned{0}; ///< journal rows deleted by retention
};

struct snapshot_actor_state {
  std::unique_ptr<snapshot_taker> taker;
  std::shared_ptr<snapshot_stats> stats;
  /// Where the next retention scan goes on (prune_journal).
  std::int64_t prune_from = 0;
  static inline const char* name = "snapshot_taker";
};

using snapshot_actor_type = caf::stateful_actor<snapshot_actor_state>;

caf::behavior snapshot_actor(snapshot_actor_type* self,
                             std::shared_ptr<journal_store> store,
                             snapshot_builder builder, caf::actor fleet,
                             std::shared_ptr<const clock> time, caf::timespan interval,
                             std::chrono::hours retention,
                             std::shared_ptr<snapshot_stats> stats);

} // namespace vigil
