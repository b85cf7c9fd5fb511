// The load run (issue #21 item 4), scripts/load's driver. A real `vigil
// control` process with a real PostgreSQL journal, against the Kubernetes API
// test server holding the simulated cluster's Nodes, takes a steady stream of
// HealthEvents from 1,000 simulated agents. Each agent is the agent's own
// forwarder (forwarder_logic, a disk spool, http_event_poster with its own
// kept-alive connection), so batching, Retry-After, backoff and spooling are
// the production code's. Twice during the run PostgreSQL gets worse: first
// slow (the backends serving vigil are stopped 90 % of every 100 ms), then
// stalled (the journal table locked). Every few seconds the driver samples
// the control plane's resident memory and its /metrics (journal lag, queue,
// refusals) and the agents' acknowledgements, 503s and spools. At the end the
// agents drain and the journal's event rows are counted against what was
// generated: nothing acknowledged may be missing.
//
// With --replicas R the control plane is R processes sharing the nodes in
// shards (issue 22), each agent posting to one of them. --nodes N puts N
// Nodes in the cluster (the agents' first, then plain GPU Nodes), so the
// replicas carry a large fleet while 1,000 agents load them; --kill-at S
// SIGKILLs replica 0 S seconds into the run and times the handover: until
// every shard's Lease is held by another replica, and until the others'
// node actors cover the whole fleet again (their vigil_nodes); then starts
// it again, as its Deployment would.
//
// The agents' threads run at nice 10 (--nice), so that the thousand of them
// do not take the cores from the control plane they load, which on a real
// fleet has machines of its own.
//
// The events are non-fatal application XIDs (13) spread over every GPU of
// every node: they are journaled and routed to their node actors, and no rule
// quarantines for them, so the run measures ingest, journal and routing, not
// remediation.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include <curl/curl.h>
#include <libpq-fe.h>
#include <nlohmann/json.hpp>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "actors/agent/dcgm/prometheus_text.hpp"
#include "actors/agent/forwarder/event_spool.hpp"
#include "actors/agent/forwarder/forwarder_logic.hpp"
#include "actors/agent/forwarder/http_event_poster.hpp"
#include "actors/control/leader/shard_assignment.hpp"
#include "runtime/sim/kube/kube_test_server.hpp"
#include "runtime/sim/simulated_cluster.hpp"
#include "tests/support/control_process.hpp"
#include "tests/support/test_databases.hpp"

namespace vigil::load {
namespace {

using json = nlohmann::json;
using steady = std::chrono::steady_clock;

struct options {
  double rate = 10000; ///< events/s over all agents
  int agents = 1000;   ///< one per node
  int seconds = 600;   ///< generating; the drain comes after
  int threads = 0;     ///< driver threads the agents are spread over; 0: one per agent
  int slow_for = 60;   ///< PostgreSQL 10× slower, from a third of the run
  int stall_for = 30;  ///< the journal table locked, from two thirds of the run
  int sample = 10;     ///< seconds between samples
  int drain = 180;     ///< at most this long for the agents to empty their spools
  bool json = false;
  std::string vigil = VIGIL_BINARY;
  /// `vigil control` processes; above 1 they share the nodes in `shards`
  /// shards (control.shards) and agent i posts to replica i mod replicas.
  int replicas = 1;
  int shards = 0; ///< 0: 4 per replica
  int nodes = 0;  ///< Nodes in the cluster; 0: one per agent
  /// With replicas > 1: SIGKILL replica 0 this many seconds into the run
  /// (0: never) and time the handover.
  double kill_at = 0;
  /// The agents' threads run this much nicer than the control plane: on a
  /// real fleet they run on other machines, and here their thousand threads
  /// would otherwise take most of the cores from the system under test.
  int nice = 10;
};

/// The handover after replica 0's SIGKILL (--kill-at), seconds from the kill.
struct handover {
  double killed_at = -1;        ///< seconds into the run; < 0: not yet
  double leases_taken = -1;     ///< every shard Lease held by another replica; < 0: never
  double node_actors_back = -1; ///< the others' vigil_nodes sum to the fleet; < 0: never
  bool restarted = false;       ///< replica 0 started again (not a crash's restart)
};

/// What all agents did, summed by their threads.
struct agent_totals {
  std::atomic<std::uint64_t> generated{0}, refused{0}, posts{0}, accepted{0};
  std::atomic<std::uint64_t> answered_503{0}, with_retry_after{0}, other_failures{0};
  std::atomic<std::uint64_t> post_micros{0};
};

/// One simulated agent: its node's event source and the agent's forwarder.
struct simulated_agent {
  std::string node;
  int number = 0;
  std::unique_ptr<agent::event_spool> spool;
  std::unique_ptr<agent::forwarder_logic> forwarder;
  std::unique_ptr<agent::http_event_poster> poster;
  double owed = 0; ///< events due and not yet generated
  std::uint64_t sequence = 0;
};

health_event application_xid(simulated_agent& a) {
  health_event e;
  e.id = "load-" + std::to_string(a.number) + "-" + std::to_string(a.sequence);
  e.agent = "syslog-health-monitor";
  e.component_class = "GPU";
  e.check_name = "SysLogsXIDError";
  e.message = "NVRM: Xid (PCI:0000:18:00): 13, Graphics Exception";
  e.error_codes = {"13"};
  const int gpu = static_cast<int>(a.sequence % 8);
  e.entities = {{"PCI", demo::gpu_pci_address(gpu)},
                {"GPU_UUID", demo::gpu_uuid(a.number, gpu)}};
  e.node_name = a.node;
  e.generated = system_now();
  ++a.sequence;
  return e;
}

/// One driver thread: generates its agents' events at their share of the
/// rate, lets each forwarder batch and post them, and sleeps until the next
/// forwarder wakes (at most 20 ms).
void drive(std::vector<simulated_agent*> mine, double per_agent_rate, int nice,
           const std::atomic<bool>& generate, const std::atomic<bool>& stop,
           agent_totals& totals, std::atomic<std::uint64_t>& backlog) {
  // Linux: a thread's nice value is its own (PRIO_PROCESS with its tid).
  if (nice != 0)
    (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), nice);
  auto last = steady::now();
  while (!stop) {
    const auto now = steady::now();
    const double elapsed = std::chrono::duration<double>(now - last).count();
    last = now;
    std::uint64_t waiting = 0;
    auto wake = now + std::chrono::milliseconds{20};
    for (auto* a : mine) {
      if (generate) {
        a->owed += per_agent_rate * elapsed;
        for (; a->owed >= 1; a->owed -= 1) {
          ++totals.generated;
          if (a->forwarder->submit(application_xid(*a), now).status
              == agent::submit_status::refused)
            ++totals.refused;
        }
      }
      if (auto batch = a->forwarder->next_batch(steady::now())) {
        const auto sent = steady::now();
        const auto result = a->poster->post(batch->body);
        const auto answered = steady::now();
        totals.post_micros += static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::microseconds>(answered - sent).count());
        ++totals.posts;
        const auto report = a->forwarder->complete(result, answered);
        totals.accepted += report.accepted;
        if (result.http_status == 503) {
          ++totals.answered_503;
          totals.with_retry_after += result.retry_after ? 1 : 0;
        } else if (result.outcome == agent::post_outcome::retryable) {
          ++totals.other_failures;
        }
      }
      waiting += a->forwarder->queued_in_memory() + a->spool->size()
                 + (a->forwarder->in_flight() ? 1 : 0);
      if (auto next = a->forwarder->next_wakeup(steady::now()))
        wake = std::min(wake, *next);
    }
    backlog = waiting;
    std::this_thread::sleep_until(
      std::max(wake, steady::now() + std::chrono::milliseconds{1}));
  }
}

std::size_t collect(char* data, std::size_t size, std::size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

/// The control plane's /metrics, as name → value (unlabelled samples).
std::map<std::string, double> scrape(std::uint16_t port) {
  CURL* curl = curl_easy_init();
  std::string body;
  const auto url = "http://127.0.0.1:" + std::to_string(port) + "/metrics";
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 5000L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  curl_easy_perform(curl);
  curl_easy_cleanup(curl);
  std::map<std::string, double> values;
  for (const auto& s : agent::parse_prometheus_text(body).samples)
    if (s.labels.empty())
      values[s.name] = s.value;
  return values;
}

/// Resident memory of a process in MiB (VmRSS), 0 when it is gone.
double rss_mib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0)
      return std::strtod(line.c_str() + 6, nullptr) / 1024.0;
  return 0;
}

/// A connection of the driver's own to the journal's database: it slows
/// PostgreSQL down for vigil, locks the journal, and counts rows.
class database_hand {
public:
  explicit database_hand(const std::string& url) : conn_(PQconnectdb(url.c_str())) {}
  ~database_hand() {
    resume();
    PQfinish(conn_);
  }
  bool ok() const { return PQstatus(conn_) == CONNECTION_OK; }

  /// Stops (or continues) the server processes of vigil's connections.
  void pause(bool stopped) {
    if (stopped)
      paused_ = query_column("SELECT pid FROM pg_stat_activity WHERE datname ="
                             " current_database() AND pid <> pg_backend_pid()");
    for (const auto& pid : paused_)
      ::kill(static_cast<pid_t>(std::stoll(pid)), stopped ? SIGSTOP : SIGCONT);
    if (!stopped)
      paused_.clear();
  }
  void resume() { pause(false); }

  void lock_journal(bool locked) {
    command(locked ? "BEGIN" : "ROLLBACK");
    if (locked)
      command("LOCK TABLE journal IN ACCESS EXCLUSIVE MODE");
  }

  std::uint64_t event_rows() {
    auto rows = query_column("SELECT count(*) FROM journal WHERE kind = 'event'");
    return rows.empty() ? 0 : std::stoull(rows.front());
  }

private:
  void command(const char* sql) { PQclear(PQexec(conn_, sql)); }
  std::vector<std::string> query_column(const char* sql) {
    std::vector<std::string> out;
    PGresult* res = PQexec(conn_, sql);
    if (PQresultStatus(res) == PGRES_TUPLES_OK)
      for (int i = 0; i < PQntuples(res); ++i)
        out.emplace_back(PQgetvalue(res, i, 0));
    PQclear(res);
    return out;
  }

  PGconn* conn_;
  std::vector<std::string> paused_;
};

enum class phase { steady, slow, stalled, drain };

const char* to_string(phase p) {
  switch (p) {
    case phase::steady: return "steady";
    case phase::slow: return "slow";
    case phase::stalled: return "stalled";
    case phase::drain: return "drain";
  }
  return "?";
}

struct sample {
  double at = 0;
  phase during = phase::steady;
  double generated_per_s = 0, accepted_per_s = 0, posts_per_s = 0, answered_503_per_s = 0;
  double post_ms = 0; ///< mean time of a post in the window
  double rss_mib = 0;
  double journal_lag_s = 0, journal_queue = 0, journal_refused = 0, unavailable = 0;
  std::uint64_t backlog = 0; ///< events the agents hold (memory, spool, in flight)
};

json to_json(const sample& s) {
  return {{"at", s.at},
          {"phase", to_string(s.during)},
          {"generatedPerSecond", s.generated_per_s},
          {"acceptedPerSecond", s.accepted_per_s},
          {"postsPerSecond", s.posts_per_s},
          {"answered503PerSecond", s.answered_503_per_s},
          {"postMs", s.post_ms},
          {"rssMiB", s.rss_mib},
          {"journalLagSeconds", s.journal_lag_s},
          {"journalQueue", s.journal_queue},
          {"journalRefusedTotal", s.journal_refused},
          {"unavailableTotal", s.unavailable},
          {"agentBacklog", s.backlog}};
}

/// Least-squares slope of RSS over time, in MiB per minute, over `samples`.
double rss_slope_per_minute(const std::vector<sample>& samples) {
  if (samples.size() < 2)
    return 0;
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& s : samples) {
    n += 1;
    sx += s.at;
    sy += s.rss_mib;
    sxx += s.at * s.at;
    sxy += s.at * s.rss_mib;
  }
  const double d = n * sxx - sx * sx;
  return d == 0 ? 0 : 60 * (n * sxy - sx * sy) / d;
}

int run(const options& o) {
  const auto journal_url = test::fresh_postgres_database();
  if (journal_url.empty()) {
    std::cerr << "vigil_load: no PostgreSQL server: run under scripts/with-postgres\n";
    return 2;
  }
  // One connection per agent, and as many on the control plane's side.
  rlimit files{};
  ::getrlimit(RLIMIT_NOFILE, &files);
  files.rlim_cur = files.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &files);

  kube::test_server_options server_options;
  server_options.tokens = {"api-token"};
  auto started = kube::kube_test_server::start(server_options);
  if (!started) {
    std::cerr << "vigil_load: " << started.error().to_string() << "\n";
    return 2;
  }
  std::shared_ptr<kube::kube_test_server> api = std::move(*started);
  demo::cluster_spec spec;
  spec.nodes = o.agents;
  spec.racks = std::max(1, o.agents / 8);
  const int fleet_size = std::max(o.nodes, o.agents);
  api->with_store([&](kube::object_store& s) {
    demo::populate(s, spec);
    // The rest of a large fleet: GPU Nodes without workloads or agents.
    const auto* nodes = s.find_type("", "v1", "nodes");
    for (int i = o.agents + 1; i <= fleet_size; ++i)
      s.create(*nodes, "",
               {{"apiVersion", "v1"},
                {"kind", "Node"},
                {"metadata",
                 {{"name", demo::node_name(i)},
                  {"labels",
                   {{"nvidia.com/gpu.present", "true"},
                    {"nvidia.com/gpu.count", "8"},
                    {"nvidia.com/gpu.product", spec.product}}}}},
                {"spec", json::object()},
                {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}});
  });

  const auto dir = test::fresh_directory();
  std::ofstream(dir + "/token") << "ingest-token\n";
  test::write_kubeconfig(dir + "/kubeconfig", api->url(), "api-token");
  // The control plane: one process, or `replicas` sharing the shards.
  std::vector<std::uint16_t> ports;
  std::vector<std::unique_ptr<test::control_process>> controls;
  const int shards = o.replicas > 1 ? (o.shards > 0 ? o.shards : 4 * o.replicas) : 1;
  for (int r = 0; r < o.replicas; ++r) {
    const auto name = "load-control-" + std::to_string(r);
    ports.push_back(test::free_port());
    std::ofstream(dir + "/" + name + ".yaml")
      << "log: {format: json, level: warn}\n"
      << "journal: {url: \"" << journal_url << "\"}\n"
      << "control:\n  listen: 127.0.0.1:" << ports.back() << "\n  plain_http: true\n"
      << "  token_file: " << dir << "/token\n  token_review: {enabled: false}\n"
      << "  kubeconfig: " << dir << "/kubeconfig\n  shards: " << shards << "\n";
    controls.push_back(std::make_unique<test::control_process>(
      o.vigil, dir + "/" + name + ".yaml", name, dir + "/" + name + ".log"));
    if (!controls.back()->start()) {
      std::cerr << "vigil_load: cannot start " << o.vigil << "\n";
      return 2;
    }
  }
  const auto t0 = steady::now();
  auto seconds_in = [&] {
    return std::chrono::duration<double>(steady::now() - t0).count();
  };
  auto all_ready = [&] {
    return std::all_of(ports.begin(), ports.end(), [](auto p) { return test::ready(p); });
  };
  // Listing a large fleet takes its time: 120 s, and a minute per 10,000 Nodes.
  const double ready_within = 120.0 + 6.0 * fleet_size / 1000.0;
  while (seconds_in() < ready_within && !all_ready())
    std::this_thread::sleep_for(std::chrono::milliseconds{200});
  if (!all_ready()) {
    std::cerr << "vigil_load: vigil control never became ready; see " << dir
              << "/load-control-*.log\n";
    return 2;
  }

  std::cerr << "vigil_load: vigil control ready after " << seconds_in() << " s (" << dir
            << ")\n";
  // The agents: spools in /dev/shm, as each real agent has a disk of its own,
  // removed when the run ends (after the agents: declared before them).
  const auto spools = test::fresh_directory("/dev/shm");
  struct removed_at_exit {
    std::string path;
    ~removed_at_exit() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } spools_removed{spools};
  std::vector<std::unique_ptr<simulated_agent>> agents;
  for (int i = 1; i <= o.agents; ++i) {
    auto a = std::make_unique<simulated_agent>();
    a->number = i;
    a->node = demo::node_name(i);
    a->spool = std::make_unique<agent::event_spool>(
      agent::spool_options{spools + "/" + a->node, 64 * 1024 * 1024, 100'000, 1 << 20});
    if (auto opened = a->spool->open(); !opened) {
      std::cerr << "vigil_load: " << opened.error().to_string() << "\n";
      return 2;
    }
    a->forwarder = std::make_unique<agent::forwarder_logic>(agent::forwarder_options{},
                                                            *a->spool, nullptr);
    agent::http_poster_options poster;
    poster.url = "http://127.0.0.1:"
                 + std::to_string(ports[static_cast<std::size_t>(i) % ports.size()]);
    poster.token_file = dir + "/token";
    a->poster = std::make_unique<agent::http_event_poster>(poster);
    agents.push_back(std::move(a));
  }

  std::cerr << "vigil_load: " << agents.size() << " agents ready after " << seconds_in()
            << " s\n";
  database_hand database(journal_url);
  if (!database.ok()) {
    std::cerr << "vigil_load: cannot connect to " << journal_url << "\n";
    return 2;
  }
  agent_totals totals;
  std::atomic<bool> generate{true}, stop{false};
  std::vector<std::thread> threads;
  const double per_agent = o.rate / o.agents;
  // One thread per agent by default: a post that waits (the journal slow)
  // holds up only its own agent, as on a real fleet.
  const int thread_count = o.threads > 0 ? std::min(o.threads, o.agents) : o.agents;
  std::vector<std::atomic<std::uint64_t>> backlogs(
    static_cast<std::size_t>(thread_count));
  for (int t = 0; t < thread_count; ++t) {
    std::vector<simulated_agent*> mine;
    for (std::size_t i = static_cast<std::size_t>(t); i < agents.size();
         i += static_cast<std::size_t>(thread_count))
      mine.push_back(agents[i].get());
    threads.emplace_back(drive, std::move(mine), per_agent, o.nice, std::cref(generate),
                         std::cref(stop), std::ref(totals),
                         std::ref(backlogs[static_cast<std::size_t>(t)]));
  }

  const auto start = seconds_in();
  const double slow_from = start + o.seconds / 3.0, slow_to = slow_from + o.slow_for;
  const double stall_from = start + 2.0 * o.seconds / 3.0,
               stall_to = stall_from + o.stall_for;
  const double end = start + o.seconds;
  std::vector<sample> samples;
  struct {
    std::uint64_t generated = 0, accepted = 0, posts = 0, answered_503 = 0, micros = 0;
    double at = 0;
  } before;
  before.at = start;
  double next_sample = start + o.sample;
  bool stall_on = false;
  double drain_end = 0;
  auto backlog = [&] {
    std::uint64_t sum = 0;
    for (auto& b : backlogs)
      sum += b;
    return sum;
  };
  // --kill-at: who holds each shard's Lease, and how many node actors the
  // live replicas run.
  handover took;
  double next_handover_check = 0;
  auto leases_away_from = [&](const std::string& dead) {
    bool all = true;
    api->with_store([&](kube::object_store& store) {
      const auto* leases = store.find_type("coordination.k8s.io", "v1", "leases");
      for (int k = 0; k < shards && all; ++k) {
        auto lease = store.get(
          *leases, "vigil",
          control::shard_lease_name("vigil-control", static_cast<std::uint32_t>(k)));
        const auto holder =
          lease.ok() ? (*lease.value)["spec"].value("holderIdentity", "") : "";
        all = !holder.empty() && holder != dead;
      }
    });
    return all;
  };
  auto live_node_actors = [&] {
    double sum = 0;
    for (std::size_t r = 1; r < controls.size(); ++r)
      sum += scrape(ports[r])["vigil_nodes"];
    return sum;
  };
  for (;;) {
    const double now = seconds_in();
    if (o.kill_at > 0 && controls.size() > 1 && took.killed_at < 0
        && now - start >= o.kill_at) {
      controls[0]->signal(SIGKILL);
      took.killed_at = now - start;
      std::cerr << "vigil_load: replica 0 SIGKILLed at " << took.killed_at << " s\n";
    }
    if (took.killed_at >= 0 && !took.restarted && now >= next_handover_check) {
      next_handover_check = now + 0.5;
      const double since = now - start - took.killed_at;
      if (took.leases_taken < 0 && leases_away_from(controls[0]->identity()))
        took.leases_taken = since;
      if (took.leases_taken >= 0 && live_node_actors() >= fleet_size)
        took.node_actors_back = since;
      if (took.node_actors_back >= 0 || since > 600) { // -1: not within 10 minutes
        std::cerr << "vigil_load: handover: Leases taken after " << took.leases_taken
                  << " s, node actors back after " << took.node_actors_back
                  << " s; replica 0 started again\n";
        took.restarted = controls[0]->start();
      }
    }
    phase during = now >= end                            ? phase::drain
                   : now >= stall_from && now < stall_to ? phase::stalled
                   : now >= slow_from && now < slow_to   ? phase::slow
                                                         : phase::steady;
    if ((during == phase::stalled) != stall_on) {
      stall_on = !stall_on;
      database.lock_journal(stall_on);
    }
    if (during == phase::slow) {
      // Stopped 90 ms of every 100: a database ten times slower.
      database.pause(true);
      std::this_thread::sleep_for(std::chrono::milliseconds{90});
      database.resume();
      std::this_thread::sleep_for(std::chrono::milliseconds{10});
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds{100});
    }
    if (during == phase::drain && generate) {
      generate = false;
      drain_end = now + o.drain;
    }
    if (seconds_in() >= next_sample) {
      sample s;
      s.at = seconds_in() - start;
      s.during = during;
      const double span = seconds_in() - before.at;
      const std::uint64_t g = totals.generated, a = totals.accepted, p = totals.posts,
                          f = totals.answered_503, m = totals.post_micros;
      s.generated_per_s = static_cast<double>(g - before.generated) / span;
      s.accepted_per_s = static_cast<double>(a - before.accepted) / span;
      s.posts_per_s = static_cast<double>(p - before.posts) / span;
      s.answered_503_per_s = static_cast<double>(f - before.answered_503) / span;
      s.post_ms = p > before.posts ? static_cast<double>(m - before.micros) / 1000.0
                                       / static_cast<double>(p - before.posts)
                                   : 0;
      before = {g, a, p, f, m, seconds_in()};
      // Summed over the replicas (the most lag of any).
      s.rss_mib = s.journal_lag_s = s.journal_queue = s.journal_refused = s.unavailable =
        0;
      for (std::size_t r = 0; r < controls.size(); ++r) {
        s.rss_mib += rss_mib(controls[r]->pid());
        auto metrics = scrape(ports[r]);
        s.journal_lag_s = std::max(s.journal_lag_s, metrics["vigil_journal_lag_seconds"]);
        s.journal_queue += metrics["vigil_journal_queue_depth"];
        s.journal_refused += metrics["vigil_journal_refused_total"];
        s.unavailable += metrics["vigil_events_unavailable_total"];
      }
      s.backlog = backlog();
      samples.push_back(s);
      if (!o.json)
        std::printf("%6.0fs %-7s gen %7.0f/s ack %7.0f/s posts %6.0f/s 503 %6.1f/s post "
                    "%6.1f ms  rss %6.1f MiB  lag %5.2fs queue %6.0f  backlog %8llu\n",
                    s.at, to_string(s.during), s.generated_per_s, s.accepted_per_s,
                    s.posts_per_s, s.answered_503_per_s, s.post_ms, s.rss_mib,
                    s.journal_lag_s, s.journal_queue,
                    static_cast<unsigned long long>(s.backlog));
      std::fflush(stdout);
      next_sample += o.sample;
    }
    if (during == phase::drain && (backlog() == 0 || now >= drain_end))
      break;
  }
  stop = true;
  for (auto& t : threads)
    t.join();
  if (took.killed_at >= 0 && !took.restarted) // the run ended first
    took.restarted = controls[0]->start();
  auto restarts = [&] { // a crash's restarts, not --kill-at's
    int n = took.restarted ? -1 : 0;
    for (const auto& c : controls)
      n += c->starts() - 1;
    return n;
  };
  auto running = [&] {
    return std::all_of(controls.begin(), controls.end(),
                       [](const auto& c) { return c->running(); });
  };
  const double drained_in = seconds_in() - end;
  const std::uint64_t generated = totals.generated, rows = database.event_rows();
  const std::uint64_t held = backlog();

  // Steady samples after the first minute and away from the slow phases
  // (30 s to recover after each) tell whether memory and lag stay flat.
  std::vector<sample> steady_samples;
  double lag_max = 0, rss_max = 0, rss_first = 0;
  for (const auto& s : samples) {
    const double at = s.at + start;
    const bool recovering =
      (at >= slow_from && at < slow_to + 30) || (at >= stall_from && at < stall_to + 30);
    if (s.during == phase::steady && s.at >= 60 && !recovering) {
      steady_samples.push_back(s);
      lag_max = std::max(lag_max, s.journal_lag_s);
      if (rss_first == 0)
        rss_first = s.rss_mib;
    }
    rss_max = std::max(rss_max, s.rss_mib);
  }
  json summary{
    {"rate", o.rate},
    {"agents", o.agents},
    {"seconds", o.seconds},
    {"generated", generated},
    {"refusedByAgents", totals.refused.load()},
    {"acceptedAcks", totals.accepted.load()},
    {"journalEventRows", rows},
    {"stillHeldByAgents", held},
    // Generated events are either journaled, still held by their agent, or
    // refused by the agent (its spool full: counted, never acknowledged).
    {"lost", generated > rows + held + totals.refused
               ? generated - rows - held - totals.refused
               : 0},
    {"answered503", totals.answered_503.load()},
    {"answered503WithRetryAfter", totals.with_retry_after.load()},
    {"otherFailedPosts", totals.other_failures.load()},
    {"drainSeconds", drained_in},
    {"rssMiBAfterFirstMinute", rss_first},
    {"rssMiBMax", rss_max},
    {"rssSlopeMiBPerMinuteSteady", rss_slope_per_minute(steady_samples)},
    {"journalLagSecondsMaxSteady", lag_max},
    {"replicas", o.replicas},
    {"shards", shards},
    {"nodes", fleet_size},
    {"killedAtSeconds", took.killed_at},
    {"handoverLeasesSeconds", took.leases_taken},
    {"handoverNodeActorsSeconds", took.node_actors_back},
    {"controlRestarts", restarts()},
    {"controlRunning", running()},
  };
  if (o.json) {
    json all = summary;
    all["samples"] = json::array();
    for (const auto& s : samples)
      all["samples"].push_back(to_json(s));
    std::cout << all.dump(2) << "\n";
  } else {
    std::cout << summary.dump(2) << "\n";
  }
  return summary["lost"].get<std::uint64_t>() == 0 && running() ? 0 : 1;
}

int usage(const std::string& problem) {
  std::cerr << "vigil_load: " << problem
            << "\nusage: vigil_load [--rate EVENTS_PER_S] [--agents N] [--seconds T] "
               "[--threads N] [--slow-for S] [--stall-for S] [--sample S] [--drain S] "
               "[--replicas R] [--shards K] [--nodes N] [--kill-at S] [--nice N] "
               "[--json] [--vigil PATH]\n";
  return 2;
}

} // namespace
} // namespace vigil::load

int main(int argc, char** argv) {
  using namespace vigil::load;
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto number = [&](auto& out) {
      return vigil::test::read_option_number(argc, argv, i, out);
    };
    bool ok = true;
    if (arg == "--rate")
      ok = number(o.rate) && o.rate > 0;
    else if (arg == "--agents")
      ok = number(o.agents) && o.agents > 0;
    else if (arg == "--seconds")
      ok = number(o.seconds) && o.seconds > 0;
    else if (arg == "--threads")
      ok = number(o.threads) && o.threads > 0;
    else if (arg == "--slow-for")
      ok = number(o.slow_for);
    else if (arg == "--stall-for")
      ok = number(o.stall_for);
    else if (arg == "--sample")
      ok = number(o.sample) && o.sample > 0;
    else if (arg == "--drain")
      ok = number(o.drain);
    else if (arg == "--replicas")
      ok = number(o.replicas) && o.replicas > 0;
    else if (arg == "--shards")
      ok = number(o.shards) && o.shards > 0;
    else if (arg == "--nodes")
      ok = number(o.nodes) && o.nodes > 0;
    else if (arg == "--kill-at")
      ok = number(o.kill_at) && o.kill_at > 0;
    else if (arg == "--nice") {
      if (!number(o.nice) || o.nice < 0 || o.nice > 19)
        return usage("--nice wants a number from 0 to 19");
    } else if (arg == "--json")
      o.json = true;
    else if (arg == "--vigil" && i + 1 < argc)
      o.vigil = argv[++i];
    else
      return usage("unknown argument " + arg);
    if (!ok)
      return usage(arg + " wants a positive number");
  }
  if (o.kill_at > 0 && o.replicas < 2)
    return usage("--kill-at wants --replicas 2 or more (a replica to hand over to)");
  std::signal(SIGPIPE, SIG_IGN);
  curl_global_init(CURL_GLOBAL_DEFAULT);
  return run(o);
}
