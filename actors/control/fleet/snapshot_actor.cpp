#include "actors/control/fleet/snapshot_actor.hpp"

#include <caf/all.hpp>

#include "actors/control/fleet/fleet_actor.hpp"
#include "runtime/logging.hpp"

namespace vigil {

namespace {

// Journal retention after each snapshot stored (prune_journal); a failure
// is logged and the next snapshot tries again.
void apply_retention(snapshot_actor_type* self, journal_store& store,
                     const fleet_snapshot& snapshot, wall_time before) {
  auto& st = self->state;
  auto& stats = *st.stats;
  auto deleted = prune_journal(store, snapshot, st.taker->previous(), before,
                               snapshot_prune_rows, st.prune_from);
  if (!deleted) {
    ++stats.failures;
    store.close();
    component_logger("snapshot")
      ->warn("journal retention: old rows not deleted: {}", deleted.error().to_string());
    return;
  }
  stats.rows_pruned += *deleted;
  if (*deleted > 0)
    component_logger("snapshot")
      ->info("journal retention: {} rows recorded before {} deleted (no stored "
             "snapshot needs them)",
             *deleted, format_rfc3339(before));
}

} // namespace

caf::behavior snapshot_actor(snapshot_actor_type* self,
                             std::shared_ptr<journal_store> store,
                             snapshot_builder builder, caf::actor fleet,
                             std::shared_ptr<const clock> time, caf::timespan interval,
                             std::chrono::hours retention,
                             std::shared_ptr<snapshot_stats> stats) {
  self->state.taker = std::make_unique<snapshot_taker>(std::move(builder));
  self->state.stats = std::move(stats);
  self->delayed_send(self, interval, snapshot_tick_atom::value);
  return {
    [=](snapshot_tick_atom) {
      self->request(fleet, caf::infinite, snapshot_turn_atom::value)
        .then(
          [=](bool turn) {
            self->delayed_send(self, interval, snapshot_tick_atom::value);
            if (!turn)
              return;
            auto& st = self->state;
            auto snapshot = st.taker->take(*store, time->wall_now());
            if (!snapshot) {
              ++st.stats->failures;
              store->close(); // reconnect next time
              component_logger("snapshot")
                ->warn("fleet snapshot not taken: {}", snapshot.error().to_string());
              return;
            }
            ++st.stats->taken;
            st.stats->rows_kept = snapshot->rows.size();
            component_logger("snapshot")
              ->info("fleet snapshot taken: {} rows still matter, up to journal position "
                     "({}, {})",
                     snapshot->rows.size(), snapshot->position.txid,
                     snapshot->position.seq);
            if (retention.count() > 0)
              apply_retention(self, *store, *snapshot, time->wall_now() - retention);
          },
          [=](const caf::error&) {
            // The fleet is gone (shutting down) or busy: next interval.
            self->delayed_send(self, interval, snapshot_tick_atom::value);
          });
    },
  };
}

} // namespace vigil
