// One actor-system bootstrap for every subcommand: build the system, start
// the root supervisor and the subcommand's components, wait for SIGTERM or
// for the components to finish, stop everything in order.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <caf/fwd.hpp>

#include "messages/expected.hpp"
#include "runtime/config.hpp"
#include "runtime/kube/kube_client.hpp"

namespace vigil {

struct process_context {
  caf::actor_system& system;
  const vigil_config& config;
  const caf::actor& root; ///< hand components to it with (adopt_atom, name, actor)
};

using component_starter = std::function<status(process_context&)>;

/// Blocks SIGINT and SIGTERM in the calling thread, and so in every thread it
/// creates afterwards. run_process does it first thing; a command that starts
/// threads before run_process (an API client's I/O thread) calls it before
/// those, or a signal may land in such a thread and kill the process instead
/// of reaching the orderly shutdown.
void block_handled_signals();

/// How many times an idle CAF worker sleeps 50 µs and looks for work again
/// before it blocks until a job is queued for it (CAF's own default: 500).
inline constexpr std::size_t idle_polls_before_blocking = 10;

/// The CPUs a cgroup CPU limit allows, rounded up: `cpu_max` is cgroup v2's
/// cpu.max ("200000 100000" = 2 CPUs, "150000 100000" = 2, "max 100000" =
/// no limit), or cgroup v1's cfs_quota_us and cfs_period_us joined by a space
/// (a quota of -1 = no limit). nullopt when there is no limit or the text is
/// not such a line.
std::optional<unsigned> cpus_of_cgroup_limit(std::string_view cpu_max);

/// The CPUs this process may run on: its CPU affinity (a pod's exclusive
/// cores under the static CPU manager, taskset), lowered to its cgroup's CPU
/// limit (a pod's limits.cpu) where one is set; at least 1. What "one worker
/// per core" means: the machine's core count would give a pod limited to 2
/// CPUs on a 128-core node 128 workers.
unsigned usable_cpus();

/// The CAF scheduler settings: `runtime`'s worker threads (usable_cpus()
/// when 0), and idle workers that block soon.
void apply_scheduler_settings(const runtime_config& runtime,
                              caf::actor_system_config& cfg);

/// What a shutdown may take after the supervisor's grace period (or after the
/// root supervisor is down, when a component's failure began it): the
/// components it cancelled to end. Past exit_deadline the process exits
/// without waiting, well inside the kubelet's 30 s terminationGracePeriod
/// for the default 10 s grace.
inline constexpr std::chrono::seconds exit_margin{10};

/// When a shutdown that began at `began` with `grace` must be over.
constexpr std::chrono::steady_clock::time_point
exit_deadline(std::chrono::steady_clock::time_point began,
              std::chrono::milliseconds grace) {
  return began + grace + exit_margin;
}

/// Runs until the root supervisor exits. The first SIGINT/SIGTERM starts an
/// orderly shutdown (runtime.shutdown_grace_ms); a second one exits at once,
/// and so does a shutdown still not over at exit_deadline.
/// Returns the process exit code: 0 after a clean stop, 1 when a component
/// failed to start or died.
int run_process(const vigil_config& config, const component_starter& start);

/// The API server client of `vigil control` and `vigil janitor`, and where its
/// connection came from (for the startup log line).
struct api_server {
  std::shared_ptr<kube::kube_client> client;
  /// The Leases' own client (its own connection, I/O thread and QPS
  /// limiter): a leader's renewals never wait behind the node actors'
  /// requests in the main client's limiter (controller-runtime gives leader
  /// election a client of its own for the same reason).
  std::shared_ptr<kube::kube_client> coordination;
  /// The in-process janitor's own client (null when not asked for): its
  /// resets and reboots, already under way, never wait behind the node
  /// actors' drains in the main client's limiter, as a janitor Deployment
  /// of its own would not.
  std::shared_ptr<kube::kube_client> janitor;
  std::string source;
};

/// A client's QPS + burst limiter (config `kube_api_qps`, `kube_api_burst`).
struct api_client_limits {
  double qps = 50; ///< 0: off
  double burst = 100;
};

/// The janitor's limits (`janitor.kube_api_qps`, `kube_api_burst`), in
/// `vigil control` and in `vigil janitor` alike.
inline api_client_limits janitor_api_limits(const janitor_section& janitor) {
  return {double(janitor.kube_api_qps), double(janitor.kube_api_burst)};
}

/// The Leases' client limits for `shards` shards renewed every
/// `retry_period`. Each retry period the leader elector reads and writes its
/// Lease, and the shard elector lists the Leases, renews its member Lease
/// and writes one Lease per shard it holds; one replica may hold every shard
/// (the others down). The rate is twice that, so that a look's writes are
/// out well inside the retry period, and the burst covers them all at once,
/// so that the releases at exit leave within exit_wait. Never under 20 qps
/// and a burst of 40 (what a single Lease needs, many times over).
api_client_limits lease_api_limits(std::uint32_t shards,
                                   std::chrono::seconds retry_period);

/// Connects from `kubeconfig` (or the in-cluster ServiceAccount): the main
/// client with `limits`, the Leases' client with `lease` limits and, with
/// `janitor` limits, the janitor's. Blocks the handled signals first: the
/// clients' I/O threads must not receive them.
expected<api_server> connect_api_server(const std::string& kubeconfig,
                                        const api_client_limits& limits,
                                        const api_client_limits& lease,
                                        std::optional<api_client_limits> janitor = {});

/// $POD_NAME (the Deployment sets it from the downward API), else the host name.
std::string replica_identity();

} // namespace vigil
