#include "runtime/bootstrap.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <pthread.h>
#include <sched.h>
#include <sstream>
#include <thread>
#include <unistd.h>

#include <caf/all.hpp>

#include "actors/supervisor/supervisor.hpp"
#include "runtime/kube/kube_config.hpp"
#include "runtime/logging.hpp"

namespace vigil {

namespace {

// SIGUSR1 and SIGUSR2 are ours: the main thread sends SIGUSR1 to end the
// signal thread when every actor is done; the root supervisor's exit sends
// SIGUSR2.
sigset_t handled_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);
  sigaddset(&set, SIGUSR2);
  return set;
}

using steady = std::chrono::steady_clock;

timespec until(steady::time_point deadline) {
  const auto left = std::max(steady::duration::zero(), deadline - steady::now());
  const auto s = std::chrono::duration_cast<std::chrono::seconds>(left);
  return {static_cast<time_t>(s.count()),
          static_cast<long>(std::chrono::nanoseconds{left - s}.count())};
}

// Waits for signals on its own thread; every other thread blocks them. Once a
// shutdown has begun it also bounds it (exit_deadline): a component blocked
// where CAF cannot cancel it (a database call, a socket) would otherwise keep
// the process alive until the kubelet's SIGKILL, holding its Leases' renewals
// hostage and its port bound.
void watch_signals(caf::actor root, std::chrono::milliseconds grace) {
  const auto set = handled_signals();
  auto log = component_logger("runtime");
  std::optional<steady::time_point> deadline;
  for (;;) {
    int sig = 0;
    if (!deadline) {
      if (sigwait(&set, &sig) != 0)
        return;
    } else {
      const auto left = until(*deadline);
      sig = sigtimedwait(&set, nullptr, &left);
      if (sig < 0 && errno == EINTR)
        continue;
      if (sig < 0) {
        log->error("the shutdown did not finish in time ({} ms grace, then {} s for the "
                   "cancelled components): exiting without waiting",
                   grace.count(), exit_margin.count());
        std::_Exit(1);
      }
    }
    if (sig == SIGUSR1)
      return;
    if (sig == SIGUSR2) { // the root supervisor is down
      deadline = std::min(deadline.value_or(steady::time_point::max()),
                          exit_deadline(steady::now(), std::chrono::milliseconds{0}));
      continue;
    }
    if (deadline) {
      log->warn("second {}: exiting without waiting", strsignal(sig));
      std::_Exit(130);
    }
    deadline = exit_deadline(steady::now(), grace);
    log->info("{}: orderly shutdown", strsignal(sig));
    caf::anon_send_exit(root, caf::exit_reason::user_shutdown);
  }
}

bool is_clean_exit(const caf::error& reason) {
  return !reason || reason == caf::exit_reason::user_shutdown;
}

} // namespace

void block_handled_signals() {
  const auto set = handled_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

std::optional<unsigned> cpus_of_cgroup_limit(std::string_view cpu_max) {
  std::istringstream in{std::string(cpu_max)};
  std::string quota;
  long long period = 0;
  if (!(in >> quota >> period) || period <= 0 || quota == "max" || quota == "-1")
    return std::nullopt;
  long long q = 0;
  try {
    std::size_t used = 0;
    q = std::stoll(quota, &used);
    if (used != quota.size() || q <= 0)
      return std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return static_cast<unsigned>(std::max<long long>(1, (q + period - 1) / period));
}

namespace {

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The process's own cgroup's CPU limit: cgroup v2 at its path in
// /proc/self/cgroup (or the namespace's root, as in a container), else v1's
// cpu controller.
std::optional<unsigned> cgroup_cpu_limit() {
  std::ifstream cgroups("/proc/self/cgroup");
  std::string line, own;
  while (std::getline(cgroups, line))
    if (line.rfind("0::", 0) == 0)
      own = line.substr(3);
  for (const auto& dir : {"/sys/fs/cgroup" + own, std::string("/sys/fs/cgroup")})
    if (auto max = first_line(dir + "/cpu.max"); !max.empty())
      return cpus_of_cgroup_limit(max);
  const auto quota = first_line("/sys/fs/cgroup/cpu/cpu.cfs_quota_us");
  const auto period = first_line("/sys/fs/cgroup/cpu/cpu.cfs_period_us");
  if (quota.empty() || period.empty())
    return std::nullopt;
  return cpus_of_cgroup_limit(quota + " " + period);
}

} // namespace

unsigned usable_cpus() {
  unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
    cpus = static_cast<unsigned>(CPU_COUNT(&set));
  if (auto limit = cgroup_cpu_limit())
    cpus = std::min(cpus, *limit);
  return std::max(1u, cpus);
}

void apply_scheduler_settings(const runtime_config& runtime,
                              caf::actor_system_config& cfg) {
  const auto threads = runtime.scheduler_threads != 0 ? size_t{runtime.scheduler_threads}
                                                      : size_t{usable_cpus()};
  cfg.set("scheduler.max-threads", threads);
  // An idle CAF worker spins briefly, then sleeps 50 µs and looks again
  // ("moderate" polling, 500 times by default: 25 ms of wake-ups after every
  // burst of messages), then blocks until a job is queued for it. vigil's
  // actors mostly wait on sockets and the database, and on two cores those
  // wake-ups took the CPU PostgreSQL needed (RELIABILITY.md "Load"), so a
  // worker blocks after half a millisecond.
  cfg.set("work-stealing.moderate-poll-attempts", idle_polls_before_blocking);
}

int run_process(const vigil_config& config, const component_starter& start) {
  // Block before any thread exists so CAF's workers inherit the mask.
  block_handled_signals();
  auto log = component_logger("runtime");

  caf::actor_system_config cfg;
  apply_scheduler_settings(config.runtime, cfg);
  auto exit_reason = std::make_shared<caf::error>();
  int code = 0;
  {
    caf::actor_system sys{cfg};
    const auto grace = std::chrono::milliseconds{config.runtime.shutdown_grace_ms};
    auto root = sys.spawn(supervisor, caf::timespan{grace});
    process_context ctx{sys, config, root};
    if (auto started = start(ctx); !started) {
      log->error("startup failed: {}", started.error().to_string());
      code = 1;
      caf::anon_send_exit(root, caf::exit_reason::user_shutdown);
    }
    // Signals are watched once every component is adopted: a SIGTERM that
    // came during the start waits (blocked, pending) and its exit request
    // reaches the supervisor behind the adoptions. Sooner, a supervisor with
    // no children yet would quit at once, and the components adopted after
    // it would run on with nobody to stop them (a leader renewing its Lease).
    std::thread signals{watch_signals, root, grace};
    root->attach_functor(
      [exit_reason, thread = signals.native_handle()](const caf::error& reason) {
        *exit_reason = reason;
        pthread_kill(thread, SIGUSR2);
      });
    root = nullptr;
    sys.await_all_actors_done();
    pthread_kill(signals.native_handle(), SIGUSR1);
    signals.join();
  }
  if (code == 0 && !is_clean_exit(*exit_reason)) {
    log->error("stopped after a failure: {}", caf::to_string(*exit_reason));
    code = 1;
  }
  return code;
}

api_client_limits lease_api_limits(std::uint32_t shards,
                                   std::chrono::seconds retry_period) {
  // The leader's GET and PUT, the shard elector's LIST and member Lease
  // write, and one write per shard (none of its own when not sharded).
  const double per_period = 4.0 + (shards > 1 ? shards : 0);
  const double period = std::max<double>(1.0, double(retry_period.count()));
  return {std::max(20.0, 2.0 * per_period / period), std::max(40.0, per_period)};
}

expected<api_server> connect_api_server(const std::string& kubeconfig,
                                        const api_client_limits& limits,
                                        const api_client_limits& lease,
                                        std::optional<api_client_limits> janitor) {
  auto connection = kube::resolve_connection(kubeconfig, "", [](const std::string& name) {
    const char* v = std::getenv(name.c_str());
    return std::string(v != nullptr ? v : "");
  });
  if (!connection)
    return connection.error();
  block_handled_signals(); // before the client's I/O thread exists
  auto client_with = [&](const api_client_limits& l) {
    kube::kube_client_options options;
    options.qps = l.qps;
    options.burst = l.burst;
    return kube::make_kube_client_curl(*connection, options);
  };
  auto client = client_with(limits);
  if (!client)
    return client.error();
  auto coordination = client_with(lease);
  if (!coordination)
    return coordination.error();
  api_server api{std::shared_ptr<kube::kube_client>(std::move(*client)),
                 std::shared_ptr<kube::kube_client>(std::move(*coordination)), nullptr,
                 connection->source};
  if (janitor) {
    auto own = client_with(*janitor);
    if (!own)
      return own.error();
    api.janitor = std::move(*own);
  }
  return api;
}

std::string replica_identity() {
  if (const char* pod = std::getenv("POD_NAME"); pod != nullptr && *pod != '\0')
    return pod;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0 && host[0] != '\0')
    return host;
  return "vigil-control";
}

} // namespace vigil
