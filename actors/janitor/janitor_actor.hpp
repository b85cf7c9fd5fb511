// The janitor (issue #8 item 4): the GPUReset and RebootNode controllers. It
// lists the CRs every poll interval (level-based: everything it needs is in
// the CR's status and the cluster) and takes each unfinished one a step
// further, one at a time, oldest first. A node with a CR past Pending is
// locked: another CR of that node waits until it ends (seed 000 §4.3, "serial
// node-level operations in Janitor").
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/janitor/janitor_resource.hpp"
#include "runtime/clock.hpp"

namespace vigil {

/// seed 001 "Metrics", one family per CR kind: requests, completions by
/// status, active requests, duration histogram, failures by reason. Atomics
/// written by the janitor, read by /metrics; nothing decides on them.
struct maintenance_metrics {
  static constexpr std::array<double, 8> duration_buckets{30,  60,   120,  300,
                                                          600, 1200, 1800, 3600};
  std::atomic<std::uint64_t> requests{0};  ///< CRs taken up (left Pending)
  std::atomic<std::uint64_t> succeeded{0}; ///< completed, status="succeeded"
  std::atomic<std::uint64_t> failed{0};    ///< completed, status="failed"
  std::atomic<std::int64_t> active{0};     ///< unfinished CRs at the last listing
  std::atomic<std::uint64_t> duration_ms_sum{0};
  std::array<std::atomic<std::uint64_t>, duration_buckets.size() + 1> duration_counts{};
  /// By reason, in the order of `reasons` (the last slot counts any other).
  std::vector<std::string> reasons;
  std::unique_ptr<std::atomic<std::uint64_t>[]> failures;

  explicit maintenance_metrics(std::vector<std::string> known_reasons);
  void observe_duration(double seconds);
  void count_failure(const std::string& reason);
};

struct janitor_metrics {
  maintenance_metrics gpu_reset;
  maintenance_metrics reboot;
  janitor_metrics();
};

/// Prometheus text of both families (gpu_reset_*, reboot_node_*).
std::string render_janitor_metrics(const janitor_metrics& metrics);

struct janitor_settings {
  janitor::gpu_reset_options gpu_reset;
  janitor::reboot_options reboot;
  caf::timespan poll = std::chrono::seconds{5}; ///< how often the CRs are listed
  std::shared_ptr<janitor_metrics> metrics = std::make_shared<janitor_metrics>();
  /// Beside leader election: idle until (leader_atom, true).
  bool await_leadership = false;
};

/// One unfinished CR of the current pass.
struct janitor_work {
  std::string kind; ///< "GPUReset" or "RebootNode"
  std::string json; ///< the CR as listed
};

struct janitor_state {
  janitor_settings settings;
  caf::actor gateway;
  std::shared_ptr<const clock> time;
  bool passing = false; ///< a pass is running
  bool standby = false; ///< another replica leads: no passes
  std::vector<janitor_work> work;
  std::size_t next = 0;
  std::uint64_t passes = 0;
  static inline const char* name = "janitor";
};

using janitor_actor = caf::stateful_actor<janitor_state>;

/// (jtick_atom) its own timer: one pass. (leader_atom, bool): lead or stand
/// by. (summary_atom) → JSON.
caf::behavior janitor_controllers(janitor_actor* self, janitor_settings settings,
                                  caf::actor gateway, std::shared_ptr<const clock> time);

} // namespace vigil
