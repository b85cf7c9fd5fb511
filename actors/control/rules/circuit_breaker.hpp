// Fleet circuit breaker math: stops new cordons, drains and remediations when
// too many GPU nodes were cordoned recently, and caps concurrent remediations
// per pool. Time is passed in, so tests and replays are deterministic.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>

#include "messages/wall_time.hpp"

namespace vigil::control {

struct breaker_config {
  /// Trip when a cordon would make more than this percentage of the GPU nodes
  /// newly cordoned within `window` (never on a window's first cordon).
  /// Default here 50 %; config/vigil.yaml's, for production, 10 %.
  double max_cordoned_percent = 50.0;
  /// Trip when a cordon would make more than this many nodes newly cordoned
  /// within `window`. Default: unlimited.
  std::optional<std::size_t> max_cordoned_nodes;
  /// The sliding window for both limits. Default 5 minutes.
  std::chrono::seconds window = std::chrono::minutes(5);
  /// Node label whose value names a node's pool (e.g. its rack); a node without
  /// it is in pool "". Default "topology.kubernetes.io/rack".
  std::string pool_label = "topology.kubernetes.io/rack";
  /// Remediations in flight per pool. Default 0: unlimited.
  std::size_t max_concurrent_per_pool = 0;
  /// Sharded (issue 22): the pools' slots and the cordon window are held in
  /// the journal's database (journal_store::claim_slot, claim_cordon), so
  /// the budgets hold across replicas, a trip on one stops them all, and a
  /// slot stays with its node through a shard's handover.
  bool in_journal = false;
};

/// Why `count` nodes newly cordoned within the window, out of `gpu_nodes` GPU
/// nodes, pass one of `config`'s limits; none when they do not. The first
/// cordon of a window never trips it: one faulty node is always quarantined,
/// however small the cluster (1 of 8 nodes is 12.5 %).
std::optional<std::string> cordon_limit_exceeded(const breaker_config& config,
                                                 std::size_t count,
                                                 std::size_t gpu_nodes);

/// Why the breaker said no; `none` when it said yes.
enum class breaker_refusal { none, tripped, trips_now, pool_budget };

std::string_view to_string(breaker_refusal refusal);

class circuit_breaker {
public:
  explicit circuit_breaker(breaker_config config = {});

  /// Asks to cordon `node` now, out of `gpu_nodes` GPU nodes in the fleet.
  /// Granted cordons are counted. A cordon that would push the count over a
  /// limit is refused and trips the breaker (it trips at its threshold, not
  /// after the fleet went over). A node counted in the window counts once.
  breaker_refusal admit_cordon(const std::string& node, std::size_t gpu_nodes,
                               wall_time now);

  /// A drain may start unless tripped.
  breaker_refusal admit_drain() const;

  /// A remediation of `node` in `pool` may start unless tripped or the pool
  /// already has its budget in flight; a granted one is counted until
  /// finish_remediation. Admitting a node already in flight is granted again.
  breaker_refusal admit_remediation(const std::string& node, const std::string& pool);
  void finish_remediation(const std::string& node);
  /// A remediation found running (its CR created before a restart or a
  /// handover) holds its slot whatever the budget: it runs either way.
  void occupy(const std::string& node, const std::string& pool);

  /// Sticky: only reset() closes it again (an operator's explicit action);
  /// reset also forgets the cordons counted so far, and a cordon restored
  /// later with a time at or before `at` is not counted (another replica's,
  /// committed after the reset row).
  bool tripped() const { return tripped_at_.has_value(); }
  std::optional<wall_time> tripped_at() const { return tripped_at_; }
  std::string trip_reason() const { return trip_reason_; }
  void reset(wall_time at = {});
  /// Re-opens the breaker as the journal recorded it (state survives restarts).
  void restore_trip(wall_time at, std::string reason);
  /// Counts a cordon the journal recorded, so the window survives restarts
  /// too; sharded, every replica's cordons as the journal's tail brings them,
  /// so the window is the fleet's. A node already counted counts once; a
  /// row older than the newest counted (another replica's clock) takes its
  /// place in time order.
  void restore_cordon(wall_time at, const std::string& node);

  /// Nodes cordoned within the window ending at `now`.
  std::size_t cordons_in_window(wall_time now);
  /// How much of its tighter limit the window has used, out of `gpu_nodes`
  /// GPU nodes: 0 with no cordon in the window, 1 at the limit itself (the next
  /// new cordon trips it), above 1 never while untripped. For /metrics
  /// (vigil_breaker_utilisation).
  double utilisation(std::size_t gpu_nodes, wall_time now);
  std::size_t in_flight(const std::string& pool) const;
  const breaker_config& config() const { return config_; }

private:
  void prune(wall_time now);

  breaker_config config_;
  std::deque<std::pair<wall_time, std::string>> cordons_; ///< oldest first
  /// The nodes of cordons_, each once: a cordon asks whether its node is
  /// counted, which a scan of the window made quadratic in a mass event.
  std::unordered_set<std::string> counted_;
  std::map<std::string, std::string> in_flight_; ///< node → pool
  std::optional<wall_time> tripped_at_;
  wall_time reset_at_{};
  std::string trip_reason_;
};

/// The per-pool budget (0: unlimited): a node holding one of the pool's
/// slots keeps it; another takes one while fewer than `budget` other nodes
/// hold one. The in-memory breaker and the journal's slots both apply it.
inline bool pool_admits(std::size_t others, bool holds, std::size_t budget) {
  return holds || budget == 0 || others < budget;
}

/// The pool of a node: the value of `label` in `labels`, "" when absent.
std::string pool_of(const std::map<std::string, std::string>& labels,
                    const std::string& label);

} // namespace vigil::control
