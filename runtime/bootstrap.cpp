#include "runtime/bootstrap.hpp"

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <memory>
#include <pthread.h>
#include <thread>
#include <unistd.h>

#include <caf/all.hpp>

#include "actors/supervisor/supervisor.hpp"
#include "runtime/kube/kube_config.hpp"
#include "runtime/logging.hpp"

namespace vigil {

namespace {

// SIGUSR1 is ours: the main thread sends it to end the signal thread.
sigset_t handled_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);
  return set;
}

// Waits for signals on its own thread; every other thread blocks them.
void watch_signals(caf::actor root) {
  const auto set = handled_signals();
  auto log = component_logger("runtime");
  bool stopping = false;
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0 || sig == SIGUSR1)
      return;
    if (stopping) {
      log->warn("second {}: exiting without waiting", strsignal(sig));
      std::_Exit(130);
    }
    stopping = true;
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

void apply_scheduler_settings(const runtime_config& runtime,
                              caf::actor_system_config& cfg) {
  const auto threads = runtime.scheduler_threads != 0
                         ? size_t{runtime.scheduler_threads}
                         : size_t{std::max(1u, std::thread::hardware_concurrency())};
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
    root->attach_functor(
      [exit_reason](const caf::error& reason) { *exit_reason = reason; });
    std::thread signals{watch_signals, root};
    process_context ctx{sys, config, root};
    if (auto started = start(ctx); !started) {
      log->error("startup failed: {}", started.error().to_string());
      code = 1;
      caf::anon_send_exit(root, caf::exit_reason::user_shutdown);
    }
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

expected<api_server> connect_api_server(const std::string& kubeconfig,
                                        const api_client_limits& limits,
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
  // A few requests per retry period: a Lease GET and PUT (the shard elector:
  // a LIST and one write per shard held), far under this limit.
  kube::kube_client_options lease_options;
  lease_options.qps = 20;
  lease_options.burst = 40;
  auto coordination = kube::make_kube_client_curl(*connection, lease_options);
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
