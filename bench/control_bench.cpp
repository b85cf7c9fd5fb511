// bench/control: the control plane over a simulated fleet on the
// Kubernetes API test server. A benchmark, not a test: it reads the wall
// clock and prints the figures BENCHMARKS.md records.
//
//   bench_control JOURNAL_URL [NODES=10000] [EVENTS=200000] [RATE=1000] [SECONDS=10]
//                 [STREAMS=0] [JOURNAL_ROWS=0] [SNAPSHOT=0] [RETENTION_DAYS=0]
//
// 0. With JOURNAL_ROWS > 0 (PostgreSQL only): the journal first gets that
//    many event rows on the NODES nodes (application XID warnings and their
//    healthy clears, alternately on each node, over the last 10 days, each
//    generated at its journal time), written by PostgreSQL itself; figure
//    1's start-up then includes the fleet's rebuild from them, and its RSS
//    what the rebuild keeps. With SNAPSHOT=1 the production snapshot taker
//    (actors/control/fleet/fleet_snapshot.hpp) first stores a fleet snapshot
//    of that journal, and the rebuild starts from it. With RETENTION_DAYS
//    > 0 the production retention (prune_journal) then deletes the rows
//    older than that the snapshot does not name, timed, before the rebuild.
//
// 1. RSS per idle node: resident memory grown by the fleet listing NODES
//    Nodes (8 GPUs each by label) and spawning one idle node actor for each,
//    divided by NODES.
// 2. Throughput: EVENTS HealthEvents in ingest requests of 1,000 through the
//    ingest actor → journal (group commit) → fleet → node actor; events no
//    quarantine rule matches, so the figure is the pipeline, not the API server.
// 3. Latency: RATE fatal XIDs per second for SECONDS, one ingest request per
//    event, each on a node not yet quarantined; from handing the request to
//    the ingest actor until the gateway hands the node's cordon PATCH to the
//    API client (a client that records on its way in; no actor of the
//    bench's own in between); also until the ingest request is acknowledged
//    (journaled), and how many API requests the client was given and
//    answered in the phase: a phase whose answers fall behind has a backlog
//    the latency does not show. Also the watch events (Node changes) the
//    gateway passed on in the phase: every request and every one of them
//    passes the one gateway actor (each watch's decoder parses them).
//    With BACKGROUND_RATE set (events/s), that many events no quarantine rule
//    matches (application XID 13 warnings, spread over the fleet) go through
//    ingest in the same phase, interleaved with the fatal ones: the latency
//    of a cordon while the pipeline carries RATE + BACKGROUND_RATE events/s,
//    as a fleet's mixed traffic does, rather than RATE cordons a second.
// 4. With STREAMS > 0, that many console streams (the console feed actor,
//    subscribed to the journal, writing Server-Sent Events to streams that
//    count what they get) are open throughout: compare the figures with a
//    run without, and the rows each stream got with those committed.
//
// The Nodes are as a real GPU node has them (bench/gpu_node.hpp: GPU feature
// discovery's labels, capacity, conditions, the kubelet's images; 11.5 KB
// each), so the Node list, every Node change the watch sends and what a node
// actor reads of it cost what they cost on a cluster; MINIMAL_NODES=1 gives
// the 0.3 KB Nodes (name, three labels, Ready) of the figures before
// session 33.
//
// With API_SERVER_CPUS set (a CPU list as taskset takes it, "12-15" or
// "8,10-11"), the API test server runs in a process of its own, pinned to
// those CPUs, as a real kube-apiserver runs on machines of its own: the
// figures are then the control plane's, not the test server's thread per
// connection under one lock competing with it for the same cores. Run the
// bench itself pinned to the other CPUs (taskset -c). The peak RSS printed
// last is then this process's alone, without the test server's Nodes.
//
// The CAF scheduler has a worker per CPU the bench may use, as `vigil
// control` has by default (runtime.scheduler_threads: 0), or
// SCHEDULER_THREADS workers.
//
// The bench ends with _exit once its figures are out: tearing down NODES
// actors is not one of its figures, and at 100,000 nodes it has taken
// minutes (BENCHMARKS.md, "The breaker's window was quadratic").
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include <caf/all.hpp>
#include <libpq-fe.h>
#include <nlohmann/json.hpp>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "actors/control/breaker/breaker_actor.hpp"
#include "actors/control/console/console_feed.hpp"
#include "actors/control/fleet/fleet_actor.hpp"
#include "actors/control/fleet/fleet_snapshot.hpp"
#include "actors/control/gpu/gpu_actor.hpp"
#include "actors/control/ingest/ingest_actor.hpp"
#include "actors/control/nic_port/nic_port_actor.hpp"
#include "actors/gateway/kube_gateway.hpp"
#include "actors/gateway/kube_gateway_messages.hpp"
#include "actors/journal/journal_actor.hpp"
#include "actors/protocol/control_messages.hpp"
#include "actors/supervisor/memory_keeper.hpp"
#include "bench/gpu_node.hpp"
#include "runtime/actor_clock.hpp"
#include "runtime/bootstrap.hpp"
#include "runtime/free_memory.hpp"
#include "runtime/journal/journal_store.hpp"
#include "runtime/kube/kube_client.hpp"
#include "runtime/sim/kube/kube_test_server.hpp"

using namespace vigil;
using bench_clock = std::chrono::steady_clock;
using nlohmann::json;

namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
           bench_clock::now().time_since_epoch())
    .count();
}

double rss_kib() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE))
         / 1024;
}

std::string node_name(std::size_t i) {
  return "gpu-node-" + std::to_string(i);
}

double peak_rss_kib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss);
}

/// "12-15" or "8,10-11" → the CPUs in it; nullopt when it is not such a list.
std::optional<cpu_set_t> parse_cpu_list(const std::string& list) {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::size_t at = 0;
  while (at < list.size()) {
    const auto end = std::min(list.find(',', at), list.size());
    const std::string part = list.substr(at, end - at);
    const auto dash = part.find('-');
    try {
      const unsigned long first = std::stoul(part.substr(0, dash));
      const unsigned long last =
        dash == std::string::npos ? first : std::stoul(part.substr(dash + 1));
      if (last < first || last >= CPU_SETSIZE)
        return std::nullopt;
      for (auto cpu = first; cpu <= last; ++cpu)
        CPU_SET(cpu, &set);
    } catch (const std::exception&) {
      return std::nullopt;
    }
    at = end + 1;
  }
  return CPU_COUNT(&set) > 0 ? std::optional<cpu_set_t>{set} : std::nullopt;
}

/// A Node of the fleet: as a real GPU node has it (bench/gpu_node.hpp), or
/// with MINIMAL_NODES=1 only its name, three GPU labels and Ready, as the
/// figures before session 33 were taken.
json fleet_node(std::size_t i) {
  static const bool minimal = std::getenv("MINIMAL_NODES") != nullptr
                              && std::string(std::getenv("MINIMAL_NODES")) == "1";
  if (!minimal)
    return bench::gpu_node(node_name(i));
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata",
           {{"name", node_name(i)},
            {"labels",
             {{"nvidia.com/gpu.present", "true"},
              {"nvidia.com/gpu.count", "8"},
              {"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}}}}},
          {"spec", json::object()},
          {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

/// The API test server holding NODES GPU Nodes, Ready, 8 GPUs each by label.
expected<std::unique_ptr<kube::kube_test_server>> start_api_server(std::size_t nodes) {
  auto server = kube::kube_test_server::start({});
  if (!server)
    return server;
  (*server)->with_store([&](kube::object_store& store) {
    const auto* type = store.find_type("", "v1", "nodes");
    for (std::size_t i = 0; i < nodes; ++i)
      store.create(*type, "", fleet_node(i));
  });
  return server;
}

/// Forks the API test server into a child pinned to `cpus`, which lives until
/// this process ends; returns its URL, or "" when it did not start. Called
/// before this process starts any thread.
std::string fork_api_server(std::size_t nodes, const cpu_set_t& cpus) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0)
    return {};
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child < 0)
    return {};
  if (child == 0) {
    close(pipe_fds[0]);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
      _exit(0);
    sched_setaffinity(0, sizeof cpus, &cpus);
    auto server = start_api_server(nodes);
    const std::string line = server ? (*server)->url() + "\n" : "\n";
    if (write(pipe_fds[1], line.data(), line.size()) < 0 || !server)
      _exit(1);
    close(pipe_fds[1]);
    for (;;)
      pause();
  }
  close(pipe_fds[1]);
  std::string url;
  char c = 0;
  while (read(pipe_fds[0], &c, 1) == 1 && c != '\n')
    url.push_back(c);
  close(pipe_fds[0]);
  return url;
}

// When each node's first cordon PATCH was handed to the API client; 0 = not yet.
struct patch_times {
  explicit patch_times(std::size_t nodes) : at(nodes) {}
  std::vector<std::atomic<std::int64_t>> at;
  std::atomic<std::size_t> sent{0}, answered{0}; ///< API requests
};

// The API client as the gateway uses it, recording on the way: when each
// node's cordon PATCH is handed to it (by the gateway, after the gateway's
// mailbox), and the requests sent and answered. No actor of its own, so the
// bench adds no hop that production does not have.
class recording_client : public kube::kube_client {
public:
  recording_client(std::unique_ptr<kube::kube_client> inner,
                   std::shared_ptr<patch_times> times)
    : inner_(std::move(inner)), times_(std::move(times)) {}

  void send(kube::kube_request request, response_handler done) override {
    const std::string prefix = "/api/v1/nodes/gpu-node-";
    if (request.verb == "PATCH" && request.path.rfind(prefix, 0) == 0
        && request.path.find("/status") == std::string::npos) {
      const auto i = std::stoul(request.path.substr(prefix.size()));
      std::int64_t zero = 0;
      if (i < times_->at.size())
        times_->at[i].compare_exchange_strong(zero, now_ns());
    }
    ++times_->sent;
    inner_->send(std::move(request),
                 [times = times_, done = std::move(done)](kube::kube_result result) {
                   ++times->answered;
                   done(std::move(result));
                 });
  }
  std::uint64_t watch(kube::kube_request request, line_handler on_line,
                      end_handler on_end) override {
    return inner_->watch(std::move(request), std::move(on_line), std::move(on_end));
  }
  void stop_watch(std::uint64_t id) override { inner_->stop_watch(id); }

private:
  std::unique_ptr<kube::kube_client> inner_;
  std::shared_ptr<patch_times> times_;
};

health_event make_event(std::size_t i, std::size_t node, bool fatal,
                        const std::string& run) {
  health_event e;
  e.id = run + "-" + std::to_string(i);
  e.agent = "syslog-health-monitor";
  e.component_class = "GPU";
  e.check_name = fatal ? "SysLogsXIDError" : "SysLogsXIDWarning";
  e.is_fatal = fatal;
  e.message = fatal ? "ROBUST_CHANNEL_GPU_ECC_DBE" : "application XID 13";
  e.action = fatal ? recommended_action::component_reset : recommended_action::none;
  e.error_codes = {fatal ? "48" : "13"};
  e.entities = {
    {"GPU_UUID", "GPU-" + std::to_string(node) + "-" + std::to_string(i % 8)}};
  e.node_name = node_name(node);
  e.generated = system_now();
  return e;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(q * (v.size() - 1) + 0.5))];
}

// Figure 0: JOURNAL_ROWS event rows, PostgreSQL generating them from two
// encoded HealthEvents (the codec's own output) with the id and node filled
// in per row, a million per statement.
bool fill_journal(const std::string& url, std::size_t rows, std::size_t nodes) {
  auto template_of = [](bool healthy) {
    health_event e = make_event(0, 0, false, "");
    e.id = "@ID@";
    e.node_name = "@NODE@";
    e.entities = {{"GPU_UUID", "GPU-@NODE@"}};
    e.is_healthy = healthy;
    // Each row's own time (its journal time): the agent's generatedTimestamp.
    e.generated = from_unix(0, 0);
    auto body = encode_health_event(e);
    const std::string epoch = format_rfc3339(*e.generated);
    body.replace(body.find(epoch), epoch.size(), "@TS@");
    return body;
  };
  std::unique_ptr<PGconn, decltype(&PQfinish)> conn{PQconnectdb(url.c_str()), &PQfinish};
  if (PQstatus(conn.get()) != CONNECTION_OK) {
    std::fprintf(stderr, "cannot fill the journal: %s", PQerrorMessage(conn.get()));
    return false;
  }
  const std::int64_t step = std::chrono::nanoseconds(std::chrono::hours(240)).count()
                            / static_cast<std::int64_t>(rows);
  // The last 10 days of wall time, as the journal records it.
  const std::string end = std::to_string(system_now().time_since_epoch().count());
  const std::string total = std::to_string(rows), spacing = std::to_string(step),
                    fleet = std::to_string(nodes), warning = template_of(false),
                    cleared = template_of(true);
  const auto t0 = bench_clock::now();
  for (std::size_t from = 1; from <= rows; from += 1000000) {
    const std::string first = std::to_string(from),
                      last = std::to_string(std::min(rows, from + 999999));
    const char* params[] = {end.c_str(),   total.c_str(),   spacing.c_str(),
                            fleet.c_str(), warning.c_str(), cleared.c_str(),
                            first.c_str(), last.c_str()};
    std::unique_ptr<PGresult, decltype(&PQclear)> res{
      PQexecParams(
        conn.get(),
        "INSERT INTO journal (recorded_at_ns, node, kind, idempotency_key, body) "
        "SELECT ns, 'gpu-node-' || (i % $4::bigint), 'event', 'fill-' || i, "
        "replace(replace(replace("
        "CASE WHEN (i / $4::bigint) % 2 = 0 THEN $5 ELSE $6 END, '@ID@', "
        "'fill-' || i), '@NODE@', 'gpu-node-' || (i % $4::bigint)), '@TS@', "
        "to_char(to_timestamp(ns / 1e9) AT TIME ZONE 'UTC', "
        "'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'))::jsonb "
        "FROM (SELECT i, $1::bigint - ($2::bigint - i) * $3::bigint AS ns "
        "FROM generate_series($7::bigint, $8::bigint) AS i) AS fill",
        8, nullptr, params, nullptr, nullptr, 0),
      &PQclear};
    if (PQresultStatus(res.get()) != PGRES_COMMAND_OK) {
      std::fprintf(stderr, "cannot fill the journal: %s", PQerrorMessage(conn.get()));
      return false;
    }
  }
  // A journal that grew over days has its statistics; a table filled a
  // moment ago has not (the planner would scan it whole for every page).
  std::unique_ptr<PGresult, decltype(&PQclear)> analysed{
    PQexec(conn.get(), "ANALYZE journal"), &PQclear};
  std::printf("journal filled with %zu event rows in %.1f s\n", rows,
              std::chrono::duration<double>(bench_clock::now() - t0).count());
  return true;
}

std::uint64_t fleet_number(caf::scoped_actor& self, const caf::actor& fleet,
                           const char* key) {
  std::uint64_t out = 0;
  self->request(fleet, caf::infinite, summary_atom::value)
    .receive([&](const std::string& s) { out = json::parse(s).value(key, 0ull); },
             [](const caf::error&) {});
  return out;
}

} // namespace

// A console client that reads as fast as it is written to: counts rows.
struct counting_stream : http::body_stream {
  std::atomic<std::size_t> rows{0}, skipped_notes{0};
  bool send(std::string chunk) override {
    for (auto at = chunk.find("event: row"); at != std::string::npos;
         at = chunk.find("event: row", at + 1))
      ++rows;
    if (chunk.find("event: skipped") != std::string::npos)
      ++skipped_notes;
    return true;
  }
  std::size_t pending_bytes() const override { return 0; }
  bool closed() const override { return false; }
  void end() override {}
  void on_close(std::function<void()>) override {}
};

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: bench_control JOURNAL_URL [NODES] [EVENTS] [RATE] [SECONDS]\n");
    return 2;
  }
  const std::string url = argv[1];
  const std::size_t nodes = argc > 2 ? std::stoul(argv[2]) : 10000;
  const std::size_t events = argc > 3 ? std::stoul(argv[3]) : 200000;
  const std::size_t rate = argc > 4 ? std::stoul(argv[4]) : 1000;
  const std::size_t seconds = argc > 5 ? std::stoul(argv[5]) : 10;
  const std::size_t stream_count = argc > 6 ? std::stoul(argv[6]) : 0;
  const std::size_t journal_rows = argc > 7 ? std::stoul(argv[7]) : 0;
  const bool take_snapshot = argc > 8 && std::string(argv[8]) == "1";
  const std::size_t retention_days = argc > 9 ? std::stoul(argv[9]) : 0;
  const std::size_t probes = std::min(nodes, rate * seconds);
  const std::size_t background_rate =
    std::getenv("BACKGROUND_RATE") ? std::stoul(std::getenv("BACKGROUND_RATE")) : 0;
  const std::string run = std::to_string(bench_clock::now().time_since_epoch().count());

  // The API test server: in this process, or in one of its own.
  std::unique_ptr<kube::kube_test_server> server;
  std::string api_url;
  if (const char* cpus = std::getenv("API_SERVER_CPUS")) {
    const auto set = parse_cpu_list(cpus);
    if (!set) {
      std::fprintf(stderr, "API_SERVER_CPUS: not a CPU list: \"%s\"\n", cpus);
      return 2;
    }
    api_url = fork_api_server(nodes, *set);
    if (api_url.empty()) {
      std::fprintf(stderr, "the API test server's process did not start\n");
      return 1;
    }
    std::printf("API test server in a process of its own on CPUs %s\n", cpus);
  } else {
    auto started = start_api_server(nodes);
    if (!started) {
      std::fprintf(stderr, "%s\n", started.error().to_string().c_str());
      return 1;
    }
    server = std::move(*started);
    api_url = server->url();
  }
  kube::kube_client_options client_options;
  client_options.qps = 0; // the test server is the limit, not a client-side limiter
  auto client =
    kube::make_kube_client_curl(kube::kube_connection{api_url}, client_options);
  auto made = make_journal_store(url);
  if (!client || !made || !(*made)->open()) {
    std::fprintf(stderr, "cannot open the API test server client or the journal %s\n",
                 url.c_str());
    return 1;
  }
  std::shared_ptr<journal_store> store = std::move(*made);
  if (journal_rows > 0 && !fill_journal(url, journal_rows, nodes))
    return 1;

  // The scheduler as `vigil control` runs it by default: a worker per CPU it
  // may use (usable_cpus), or SCHEDULER_THREADS workers.
  caf::actor_system_config cfg;
  runtime_config scheduler;
  if (const char* threads = std::getenv("SCHEDULER_THREADS"))
    scheduler.scheduler_threads = static_cast<std::uint32_t>(std::stoul(threads));
  std::printf("CAF workers: %zu\n", scheduler.scheduler_threads != 0
                                      ? std::size_t{scheduler.scheduler_threads}
                                      : std::size_t{usable_cpus()});
  apply_scheduler_settings(scheduler, cfg);
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto time = std::make_shared<caf_clock>(sys.clock(), system_now());
  journal_config jc;
  jc.batch_max_events = 1000;
  jc.queue_capacity = 400000;
  auto writer = sys.spawn<caf::detached>(journal_writer, store);
  // As vigil control spawns them (control_plane_options::own_threads).
  auto journal_actor = sys.spawn<caf::detached>(journal, jc, writer);
  auto gateway_stats = std::make_shared<kube_gateway_stats>();
  auto times = std::make_shared<patch_times>(nodes);
  auto gateway =
    sys.spawn(kube_gateway, std::make_shared<recording_client>(std::move(*client), times),
              gateway_stats);
  control::breaker_config bc;
  bc.max_cordoned_percent = 100; // the probes cordon up to all nodes
  auto breaker_actor = sys.spawn(breaker, bc, journal_actor, time);

  auto settings = std::make_shared<node_settings>();
  control::quarantine_rule rule;
  rule.name = "fatal-gpu";
  rule.match.component_classes = {"GPU"};
  rule.match.is_fatal = true;
  rule.taints = {{"vigil.dev/gpu-fault", "true", control::taint_effect::no_schedule}};
  settings->quarantine.rules = {rule};
  settings->remediation.enabled = false;

  if (take_snapshot) {
    // What the snapshot actor does every interval, once, on its own connection.
    auto own = make_journal_store(url);
    if (!own || !(*own)->open())
      return 1;
    snapshot_taker taker(snapshot_builder(settings->correlation, bc.window,
                                          settings->quarantine.alias_entity_types));
    const auto t0 = bench_clock::now();
    auto snapshot = taker.take(**own, system_now());
    if (!snapshot) {
      std::fprintf(stderr, "no snapshot: %s\n", snapshot.error().to_string().c_str());
      return 1;
    }
    std::printf("fleet snapshot taken in %.1f s: %zu rows still matter; RSS %.0f KiB\n",
                std::chrono::duration<double>(bench_clock::now() - t0).count(),
                snapshot->rows.size(), rss_kib());
    if (retention_days > 0) {
      const auto t1 = bench_clock::now();
      std::int64_t from = 0;
      auto deleted = prune_journal(**own, *snapshot, taker.previous(),
                                   system_now() - std::chrono::hours{24} * retention_days,
                                   std::numeric_limits<std::size_t>::max(), from);
      if (!deleted) {
        std::fprintf(stderr, "retention failed: %s\n",
                     deleted.error().to_string().c_str());
        return 1;
      }
      const double prune_s =
        std::chrono::duration<double>(bench_clock::now() - t1).count();
      std::printf("retention (%zu days): %llu rows deleted in %.1f s (%.0f rows/s)\n",
                  retention_days, static_cast<unsigned long long>(*deleted), prune_s,
                  static_cast<double>(*deleted) / std::max(prune_s, 1e-9));
    }
  }

  // 1. RSS per idle node.
  const double rss_before = rss_kib();
  auto t_list = bench_clock::now();
  auto fleet_actor = sys.spawn(fleet, std::shared_ptr<const node_settings>(settings),
                               gateway, journal_actor, breaker_actor, time, true, false);
  while (fleet_number(self, fleet_actor, "nodes") < nodes
         || fleet_number(self, fleet_actor, "rebuilt") == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const double list_s =
    std::chrono::duration<double>(bench_clock::now() - t_list).count();
  if (journal_rows > 0)
    std::printf(
      "fleet rebuilt from %llu journal rows (%llu of them a snapshot's)\n",
      static_cast<unsigned long long>(fleet_number(self, fleet_actor, "rowsReplayed")),
      static_cast<unsigned long long>(fleet_number(self, fleet_actor, "snapshotRows")));
  std::this_thread::sleep_for(std::chrono::seconds(1)); // let the LIST body go
  const double rss_listed = rss_kib();
  // What vigil control's memory keeper does within its 30 s interval: the
  // list's pages are freed, and glibc would otherwise keep them in its arenas.
  const auto heap = read_heap();
  const bool released =
    worth_releasing(heap, memory_keeper_config{}.min_free_bytes) && release_free_memory();
  const double rss_after = rss_kib();
  std::printf("fleet of %zu nodes listed and spawned in %.2f s; RSS %.0f → %.0f KiB "
              "(heap %.0f KiB in use, %.0f KiB free), %.0f KiB after the memory "
              "keeper's rule%s: %.2f KiB per idle node\n",
              nodes, list_s, rss_before, rss_listed,
              static_cast<double>(heap.in_use_bytes) / 1024,
              static_cast<double>(heap.free_bytes) / 1024, rss_after,
              released ? " released the free heap" : " (nothing worth releasing)",
              (rss_after - rss_before) / nodes);

  // 1b. What a node's GPU and NIC-port actors add. Their node actor spawns
  // them on the first event that names the GPU or port (the Node object
  // carries no GPU UUIDs), so an idle node has none; a node that has seen
  // all of its 8 GPUs and 8 ports holds 16 more actors, measured here as
  // 8 of each per node, spawned as the node actor spawns them.
  {
    const double before = rss_kib();
    std::vector<caf::actor> entities;
    entities.reserve(nodes * 16);
    for (std::size_t n = 0; n < nodes; ++n)
      for (int k = 0; k < 8; ++k) {
        const auto node = "gpu-node-" + std::to_string(n);
        entities.push_back(sys.spawn(vigil::gpu, "GPU-" + std::to_string(n * 8 + k),
                                     settings->correlation));
        entities.push_back(sys.spawn(vigil::nic_port, node,
                                     "mlx5_" + std::to_string(k) + "/1",
                                     settings->correlation, caf::actor_addr{},
                                     std::shared_ptr<const vigil::clock>(time)));
      }
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const double grown = rss_kib() - before;
    std::printf("%zu gpu and nic_port actors (8 + 8 per node): %.2f KiB per node, "
                "%.2f KiB per idle node with them\n",
                entities.size(), grown / nodes, (rss_after - rss_before + grown) / nodes);
    for (auto& a : entities)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }

  auto ingest_actor =
    sys.spawn<caf::detached>(ingest, ingest_settings{}, journal_actor, fleet_actor, time);
  caf::actor feed;
  std::vector<std::shared_ptr<counting_stream>> streams;
  if (stream_count > 0) {
    console_feed_config fc;
    fc.keepalive = std::chrono::seconds(0);
    feed = sys.spawn(console_feed, fc, journal_actor);
    for (std::size_t i = 0; i < stream_count; ++i) {
      streams.push_back(std::make_shared<counting_stream>());
      caf::anon_send(feed, feed_open_atom::value,
                     std::shared_ptr<http::body_stream>(streams.back()),
                     console::row_filter{});
    }
  }

  // 2. Throughput.
  {
    std::atomic<std::size_t> replied{0};
    const std::size_t batch = 1000;
    const auto t0 = bench_clock::now();
    for (std::size_t first = 0; first < events; first += batch) {
      ingest_request request;
      for (std::size_t i = first; i < std::min(events, first + batch); ++i)
        request.items.push_back(
          {i - first + 1, make_event(i, i % nodes, false, run), {}});
      const auto n = request.items.size();
      request.reply = [&replied, n](control::ingest_reply) { replied += n; };
      caf::anon_send(ingest_actor, ingest_atom::value, std::move(request));
      // At most 20 requests in flight, as HTTP connections would be.
      while (first + batch - replied.load() > 20 * batch)
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    while (replied.load() < events)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    const double acked_s = std::chrono::duration<double>(bench_clock::now() - t0).count();
    while (fleet_number(self, fleet_actor, "routed") < events)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const double routed_s =
      std::chrono::duration<double>(bench_clock::now() - t0).count();
    std::printf("%zu events: all journaled and acknowledged in %.2f s (%.0f events/s), "
                "all routed to their node actors in %.2f s (%.0f events/s)\n",
                events, acked_s, events / acked_s, routed_s, events / routed_s);
  }

  // 3. Latency, ingest → cordon PATCH, at RATE events/s (and BACKGROUND_RATE
  // others interleaved).
  {
    const std::size_t sent_before = times->sent, answered_before = times->answered;
    const std::uint64_t watch_before = gateway_stats->watch_events;
    std::vector<std::int64_t> submitted(probes);
    auto acked = std::make_shared<std::vector<std::atomic<std::int64_t>>>(probes);
    // Event k of the phase is fatal when it carries the fatal share past a
    // whole probe (Bresenham), so both kinds are spread evenly through it.
    const std::size_t total_rate = rate + background_rate;
    std::size_t background_sent = 0;
    const auto t0 = bench_clock::now();
    for (std::size_t k = 0, i = 0; i < probes; ++k) {
      std::this_thread::sleep_until(
        t0 + std::chrono::nanoseconds(1'000'000'000ull * k / total_rate));
      ingest_request request;
      if ((k + 1) * rate / total_rate == k * rate / total_rate) {
        const std::size_t n = background_sent++;
        request.items.push_back(
          {1, make_event(events + probes + n, (n * 7919) % nodes, false, run), {}});
        request.reply = [](control::ingest_reply) {};
        caf::anon_send(ingest_actor, ingest_atom::value, std::move(request));
        continue;
      }
      request.items.push_back({1, make_event(events + i, i, true, run), {}});
      submitted[i] = now_ns();
      request.reply = [acked, i](control::ingest_reply) { (*acked)[i] = now_ns(); };
      caf::anon_send(ingest_actor, ingest_atom::value, std::move(request));
      ++i;
    }
    if (background_rate > 0)
      std::printf("%zu events no rule matches sent alongside, at %zu events/s\n",
                  background_sent, background_rate);
    const auto deadline = bench_clock::now() + std::chrono::seconds(30);
    auto done = [&] {
      return std::all_of(times->at.begin(), times->at.begin() + probes,
                         [](const auto& t) { return t.load() != 0; });
    };
    while (!done() && bench_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::vector<double> ms, ack_ms;
    for (std::size_t i = 0; i < probes; ++i) {
      if (auto at = times->at[i].load(); at != 0)
        ms.push_back(static_cast<double>(at - submitted[i]) / 1e6);
      if (auto at = (*acked)[i].load(); at != 0)
        ack_ms.push_back(static_cast<double>(at - submitted[i]) / 1e6);
    }
    const auto phase_s = std::chrono::duration<double>(bench_clock::now() - t0).count();
    std::printf(
      "%zu fatal XIDs at %zu events/s: %zu cordon PATCHes sent; ingest → PATCH "
      "p50 %.2f ms, p99 %.2f ms, max %.2f ms; ingest → acknowledged p50 %.2f ms, "
      "p99 %.2f ms; %zu API requests sent, %zu answered in the phase's %.1f s; "
      "%llu watch events passed on by the gateway in it\n",
      probes, rate, ms.size(), percentile(ms, 0.5), percentile(ms, 0.99),
      percentile(ms, 1.0), percentile(ack_ms, 0.5), percentile(ack_ms, 0.99),
      times->sent - sent_before, times->answered - answered_before, phase_s,
      static_cast<unsigned long long>(gateway_stats->watch_events - watch_before));
  }
  if (!streams.empty()) {
    std::this_thread::sleep_for(std::chrono::seconds(1)); // the last batches
    json summary = json::object();
    self->request(feed, caf::infinite, summary_atom::value)
      .receive([&](const std::string& s) { summary = json::parse(s); },
               [](const caf::error&) {});
    std::printf("%zu console streams open throughout: the feed saw %s committed rows; "
                "each stream got %zu rows (%s skipped)\n",
                streams.size(), summary["rows"].dump().c_str(), streams[0]->rows.load(),
                summary["skipped"].dump().c_str());
    caf::anon_send_exit(feed, caf::exit_reason::user_shutdown);
  }
  std::printf("peak RSS of this process: %.0f KiB\n", peak_rss_kib());
  std::fflush(stdout);
  _exit(0);
}
