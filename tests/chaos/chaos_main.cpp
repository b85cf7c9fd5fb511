// The chaos run (issue #21 item 1), scripts/chaos's driver. One process holds
// the cluster: the Kubernetes API test server, the simulated fleet of
// `vigil demo` (its kubelet, Job controller and agents, whose events go to
// the control plane over HTTP through the uplink) and an auditor of the API
// server. Two real `vigil control` processes with leader election share one
// real PostgreSQL journal. A seeded trace of GPU faults is played twice: once
// clean, once while the schedule kills the leader, stops PostgreSQL and makes
// the API server fail, throttle, conflict and drop its watches. Then the
// promises are counted (chaos_audit.hpp): lost, duplicates, stuck, diverged,
// the breaker's limit.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <thread>

#include <caf/all.hpp>
#include <curl/curl.h>
#include <nlohmann/json.hpp>

#include "actors/agent/xid/xid_catalog.hpp"
#include "runtime/actor_clock.hpp"
#include "runtime/sim/cluster_simulator.hpp"
#include "runtime/sim/kube/kube_test_server.hpp"
#include "runtime/sim/simulated_cluster.hpp"
#include "runtime/stdlib_workarounds.hpp"
#include "tests/chaos/chaos_audit.hpp"
#include "tests/chaos/chaos_uplink.hpp"
#include "tests/support/control_process.hpp"
#include "tests/support/test_databases.hpp"

namespace vigil::chaos {
namespace {

using json = nlohmann::json;
using steady = std::chrono::steady_clock;

struct options {
  std::uint64_t seed = 1;
  int nodes = 1000;
  int faults = 500;
  int kills = 100;
  int seconds = 0; ///< the chaos phase; 0: from the kills (5 s each, at least 60 s)
  bool json = false;
  bool clean_run = true;
  std::string vigil = VIGIL_BINARY;
};

// One GPU fault of the trace, at `at` seconds into the run.
struct fault {
  double at;
  int node, gpu;
  int code;
};

enum class action_kind {
  kill_leader,    // SIGKILL
  stop_leader,    // SIGTERM: an orderly shutdown (a rollout)
  postgres_down,  // stopped for `length` seconds
  api_errors,     // 10 % of requests answered 500 for `length` seconds
  api_throttling, // a 429 storm: 50 % for `length` seconds
  node_conflicts, // 30 % of node writes based on a version answered 409
  watch_drop,     // every watch cut
  history_gone,   // every resumed watch answered 410 Gone
};

struct action {
  double at;
  action_kind kind;
  double length = 0;
};

std::vector<fault> make_trace(const options& o, double length) {
  std::mt19937_64 dice(o.seed);
  // RESET_GPU for most, RESTART_BM (a reboot) for some (config/xid_catalog.csv).
  const int codes[] = {95, 95, 119, 64, 79};
  std::vector<fault> trace;
  for (int i = 0; i < o.faults; ++i) {
    std::uniform_real_distribution<double> when(5, std::max(6.0, length - 10));
    trace.push_back({when(dice), static_cast<int>(dice() % o.nodes) + 1,
                     static_cast<int>(dice() % 8), codes[dice() % 5]});
  }
  std::sort(trace.begin(), trace.end(), [](auto& a, auto& b) { return a.at < b.at; });
  return trace;
}

std::vector<action> make_schedule(const options& o, double length) {
  std::mt19937_64 dice(o.seed * 7919 + 1);
  std::uniform_real_distribution<double> when(8, std::max(9.0, length - 5));
  std::vector<action> plan;
  auto add = [&](action_kind kind, int times, double span) {
    for (int i = 0; i < times; ++i)
      plan.push_back({when(dice), kind, span});
  };
  add(action_kind::kill_leader, o.kills, 0);
  add(action_kind::stop_leader, std::max(1, o.kills / 10), 0);
  add(action_kind::postgres_down, std::max(1, static_cast<int>(length / 300)),
      std::min(60.0, length / 6));
  add(action_kind::api_errors, 2, length / 10);
  add(action_kind::api_throttling, 2, std::min(10.0, length / 20));
  add(action_kind::node_conflicts, 2, length / 10);
  add(action_kind::watch_drop, std::max(2, o.kills / 4), 0);
  add(action_kind::history_gone, std::max(1, o.kills / 8), 0);
  std::sort(plan.begin(), plan.end(), [](auto& a, auto& b) { return a.at < b.at; });
  return plan;
}

std::string lease_holder(kube::kube_test_server& api) {
  std::string holder;
  api.with_store([&](kube::object_store& store) {
    if (const auto* leases = store.find_type("coordination.k8s.io", "v1", "leases"))
      if (auto lease = store.get(*leases, "vigil", "vigil-control"); lease.ok())
        holder = (*lease.value)["spec"].value("holderIdentity", "");
  });
  return holder;
}

double percentile(std::vector<double> values, double p) {
  if (values.empty())
    return 0;
  std::sort(values.begin(), values.end());
  return values[static_cast<std::size_t>(p * static_cast<double>(values.size() - 1))];
}

struct run_result {
  chaos_verdict verdict;
  int kills = 0, restarts = 0;
  std::vector<double> recoveries; ///< seconds from a leader's death to a ready successor
  /// SIGTERMs a replica outlived by the kubelet's grace (then SIGKILL).
  int slow_stops = 0;
  std::vector<double> stop_ms; ///< how long each SIGTERM took to end its replica
  std::uint64_t posts = 0, failed_posts = 0;
  double seconds = 0;
  std::string error;
};

// One run of the trace: with the schedule's chaos, or clean (empty schedule).
// `postgres`: the URL of the PostgreSQL server its journal lives on.
run_result run_once(const options& o, const std::vector<fault>& trace,
                    const std::vector<action>& schedule, double length,
                    const breaker_limits& breaker, const std::string& label,
                    const std::string& postgres) {
  run_result result;
  const auto dir = test::fresh_directory();
  const auto journal_url = test::fresh_postgres_database(postgres);
  if (journal_url.empty()) {
    result.error = "no PostgreSQL server: run under scripts/with-postgres";
    return result;
  }
  kube::test_server_options server_options;
  server_options.tokens = {"api-token"};
  server_options.watch_window = 200000;
  server_options.fault_seed = o.seed;
  auto started = kube::kube_test_server::start(server_options);
  if (!started) {
    result.error = started.error().to_string();
    return result;
  }
  std::shared_ptr<kube::kube_test_server> api = std::move(*started);
  demo::simulator_settings sim;
  sim.spec.nodes = o.nodes;
  sim.spec.racks = std::max(1, o.nodes / 8);
  sim.seed = o.seed;
  sim.tick = std::chrono::seconds{1};
  sim.reset_min = sim.reset_max = std::chrono::seconds{2};
  sim.validation_min = sim.validation_max = std::chrono::seconds{2};
  sim.bug_report_min = sim.bug_report_max = std::chrono::seconds{1};
  sim.reboot_min = std::chrono::seconds{4};
  sim.reboot_max = std::chrono::seconds{8};
  api->with_store([&](kube::object_store& s) { demo::populate(s, sim.spec); });

  std::ofstream(dir + "/token") << "ingest-token\n";
  test::write_kubeconfig(dir + "/kubeconfig", api->url(), "api-token");
  const std::vector<std::uint16_t> ports{test::free_port(), test::free_port()};
  // The chaos run's Lease is short, so a killed leader is replaced within
  // seconds. The clean run kills nobody: its Lease is long, so that a leader
  // starved of CPU on a loaded machine keeps it, and the reference it gives
  // is not itself a run with failovers.
  const char* lease_settings =
    schedule.empty()
      ? "  lease_seconds: 60\n  renew_deadline_seconds: 45\n  retry_period_seconds: 2\n"
      : "  lease_seconds: 4\n  renew_deadline_seconds: 3\n  retry_period_seconds: 1\n";
  std::vector<std::unique_ptr<test::control_process>> replicas;
  for (std::size_t i = 0; i < ports.size(); ++i) {
    const auto name = std::string("replica-") + static_cast<char>('a' + i);
    const auto config = dir + "/" + name + ".yaml";
    std::ofstream(config) << "log: {format: json, level: info}\n"
                          << "journal: {url: \"" << journal_url << "\"}\n"
                          << "control:\n  listen: 127.0.0.1:" << ports[i]
                          << "\n  plain_http: true\n"
                          << "  token_file: " << dir
                          << "/token\n  token_review: {enabled: false}\n"
                          << "  kubeconfig: " << dir << "/kubeconfig\n"
                          << lease_settings
                          // The simulated agents send events, not heartbeats:
                          // silence would flag every node after 300 s.
                          << "  agent_silence_seconds: 0\n"
                          // The harness polls every second, five times the
                          // shipped intervals: five times the shipped limit
                          // of API requests too (at 50 a second, 1,000
                          // nodes' polls queued 330 requests, 7 s each).
                          << "  kube_api_qps: 250\n  kube_api_burst: 500\n"
                          << "breaker: {max_cordoned_percent: 100, max_cordoned_nodes: "
                          << breaker.max_nodes << ", window_seconds: "
                          << breaker.window_seconds
                          // Half a rack (8 nodes) in flight at once: with the
                          // default 2, a clean 1,000-node run still had 703
                          // resets waiting for their rack 300 s after the trace.
                          << ", max_concurrent_per_pool: 4}\n"
                          // The simulated inference apps keep 8 replicas on
                          // one node behind a maxUnavailable-1 budget, with no
                          // ReplicaSet controller and no spare GPU: a full
                          // drain would wait for good, as in a packed cluster.
                          // Operators set DeleteAfterTimeout for that; so does
                          // the harness, or neither run would ever settle.
                          << "drain: {poll_seconds: 1, namespaces: [{namespace: "
                             "inference, mode: DeleteAfterTimeout, timeout_minutes: "
                             "1}]}\n"
                          // The trace packs 500 faults into minutes: a
                          // node's second fault waits out the shipped 300 s
                          // cooldown past the harness's settle time, and is
                          // counted stuck though its start is scheduled.
                          << "remediation: {poll_seconds: 1, cooldown_seconds: 60, "
                             "backoff_initial_seconds: 30}\n"
                          << "janitor: {poll_seconds: 1}\n";
    replicas.push_back(std::make_unique<test::control_process>(
      o.vigil, config, name, dir + "/" + name + ".log"));
    replicas.back()->start();
  }

  auto catalog = agent::xid_catalog::load(agent::xid_catalog::default_dir());
  if (!catalog) {
    result.error = catalog.error().to_string();
    return result;
  }
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", std::size_t{2});
  caf::actor_system system{cfg};
  auto record = std::make_shared<uplink_record>();
  auto uplink = spawn_uplink(system, ports, "ingest-token", record);
  auto sim_record = std::make_shared<demo::simulation_record>();
  auto time = std::make_shared<caf_clock>(system.clock(), system_now());
  auto simulator = system.spawn(
    demo::cluster_simulator, sim,
    demo::store_access(
      [api](const std::function<void(kube::object_store&)>& f) { api->with_store(f); }),
    uplink, *catalog, std::shared_ptr<const clock>(time), sim_record);

  api_auditor audit;
  const auto t0 = steady::now();
  auto seconds_in = [&] {
    return std::chrono::duration<double>(steady::now() - t0).count();
  };
  auto audit_now = [&] {
    api->with_store([&](kube::object_store& s) { audit.poll(s, seconds_in()); });
  };
  // Waits for a leader before the trace starts.
  while (seconds_in() < 120 && !test::ready(ports[0]) && !test::ready(ports[1]))
    std::this_thread::sleep_for(std::chrono::milliseconds{200});

  std::size_t next_fault = 0, next_action = 0;
  bool postgres_stopped = false;
  double postgres_back = 0, faults_end = 0, conflicts_end = 0;
  std::map<std::string, double> down_until; // replica → no restart before
  std::vector<double> deaths;               // leaders' deaths not yet recovered from
  double last_audit = 0;
  kube::test_server_faults injected;
  auto apply_faults = [&] { api->set_faults(injected); };
  auto replica_of = [&](const std::string& identity) -> test::control_process* {
    for (auto& r : replicas)
      if (r->identity() == identity && r->running())
        return r.get();
    for (auto& r : replicas)
      if (r->running())
        return r.get();
    return nullptr;
  };

  const double end = length;
  while (seconds_in() < end) {
    const double now = seconds_in();
    while (next_fault < trace.size() && trace[next_fault].at <= now) {
      const auto& f = trace[next_fault++];
      caf::anon_send(simulator, demo::xid_atom::value, f.node, f.gpu,
                     std::vector<int>{f.code});
    }
    while (next_action < schedule.size() && schedule[next_action].at <= now) {
      const auto& a = schedule[next_action++];
      switch (a.kind) {
        case action_kind::kill_leader:
        case action_kind::stop_leader:
          if (auto* r = replica_of(lease_holder(*api))) {
            if (!r->signal(a.kind == action_kind::kill_leader ? SIGKILL : SIGTERM))
              ++result.slow_stops;
            if (a.kind == action_kind::stop_leader)
              result.stop_ms.push_back(r->last_stop_ms());
            ++result.kills;
            down_until[r->identity()] = now + 1; // the kubelet's restart delay
            deaths.push_back(now);
          }
          break;
        case action_kind::postgres_down:
          if (!postgres_stopped && test::run_postgres_control("VIGIL_TEST_PG_STOP")) {
            postgres_stopped = true;
            postgres_back = now + a.length;
          }
          break;
        case action_kind::api_errors:
          injected.error_fraction = 0.1;
          faults_end = std::max(faults_end, now + a.length);
          apply_faults();
          break;
        case action_kind::api_throttling:
          injected.throttle_fraction = 0.5;
          faults_end = std::max(faults_end, now + a.length);
          apply_faults();
          break;
        case action_kind::node_conflicts:
          injected.node_conflict_fraction = 0.3;
          conflicts_end = now + a.length;
          apply_faults();
          break;
        case action_kind::watch_drop: api->drop_watches(); break;
        case action_kind::history_gone:
          audit_now(); // the auditor reads before the history goes
          api->expire_history();
          break;
      }
    }
    if (postgres_stopped && now >= postgres_back) {
      postgres_stopped = !test::run_postgres_control("VIGIL_TEST_PG_START");
    }
    if (faults_end > 0 && now >= faults_end) {
      injected.error_fraction = injected.throttle_fraction = 0;
      faults_end = 0;
      apply_faults();
    }
    if (conflicts_end > 0 && now >= conflicts_end) {
      injected.node_conflict_fraction = 0;
      conflicts_end = 0;
      apply_faults();
    }
    for (auto& r : replicas)
      if (!r->running() && now >= down_until[r->identity()]) {
        r->start();
        ++result.restarts;
        down_until[r->identity()] = now + 2; // CrashLoopBackOff, short
      }
    if (!deaths.empty() && (test::ready(ports[0]) || test::ready(ports[1]))) {
      for (double died : deaths)
        result.recoveries.push_back(now - died);
      deaths.clear();
    }
    if (now - last_audit >= 0.5) {
      audit_now();
      last_audit = now;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds{100});
  }

  // Quiet: every fault cleared, everything running; then wait until the
  // uplink has delivered, every CR finished, the journal stood still, and
  // every cordoned node is waiting for a person (a drain held back by a
  // PodDisruptionBudget takes its time). What is left at the deadline is stuck.
  api->set_faults({});
  if (postgres_stopped)
    test::run_postgres_control("VIGIL_TEST_PG_START");
  auto reader = make_journal_store(journal_url);
  bool reader_open = false;
  auto read_journal = [&] {
    std::vector<journal_record> rows;
    if (reader && !reader_open)
      reader_open = (*reader)->open().has_value();
    if (!reader_open)
      return rows;
    journal_query q;
    for (;;) {
      auto page = (*reader)->read(q);
      if (!page || page->empty())
        break;
      q.after_seq = page->back().seq;
      rows.insert(rows.end(), page->begin(), page->end());
    }
    return rows;
  };
  auto acknowledged_ids = [&] {
    std::lock_guard<std::mutex> guard(record->mutex);
    return record->acknowledged;
  };
  std::size_t last_rows = 0;
  double still_since = seconds_in();
  while (seconds_in() < end + 300) {
    for (auto& r : replicas)
      if (!r->running() && r->start())
        ++result.restarts;
    if (!deaths.empty() && (test::ready(ports[0]) || test::ready(ports[1]))) {
      for (double died : deaths)
        result.recoveries.push_back(seconds_in() - died);
      deaths.clear();
    }
    audit_now();
    const auto rows = read_journal();
    if (rows.size() != last_rows) {
      last_rows = rows.size();
      still_since = seconds_in();
    }
    bool unfinished = false;
    for (const auto& [key, cr] : audit.crs())
      unfinished = unfinished || cr.finished < 0;
    if (record->waiting == 0 && !unfinished && seconds_in() - still_since >= 10
        && judge(rows, acknowledged_ids(), audit, breaker).stuck_nodes == 0)
      break;
    std::this_thread::sleep_for(std::chrono::seconds{2});
  }
  result.seconds = seconds_in();
  audit_now();

  for (auto& r : replicas) {
    const bool was_running = r->running();
    if (!r->signal(SIGTERM))
      ++result.slow_stops;
    if (was_running)
      result.stop_ms.push_back(r->last_stop_ms());
  }
  caf::anon_send_exit(simulator, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(uplink, caf::exit_reason::user_shutdown);
  system.await_all_actors_done();

  const auto rows = read_journal();
  result.verdict = judge(rows, acknowledged_ids(), audit, breaker);
  result.posts = record->posts;
  result.failed_posts = record->failed_posts;
  std::cerr << "chaos: " << label << " run done in " << static_cast<int>(result.seconds)
            << " s; logs in " << dir << "\n";
  return result;
}

int usage(const char* problem) {
  std::cerr << "vigil_chaos: " << problem
            << "\nusage: vigil_chaos [--seed S] [--nodes N] [--faults F] [--kills K] "
               "[--seconds T] [--no-clean-run] [--json] [--vigil PATH]\n";
  return 2;
}

} // namespace
} // namespace vigil::chaos

int main(int argc, char** argv) {
  using namespace vigil::chaos;
  vigil::fill_ctype_tables();
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto number = [&](auto& out) {
      return vigil::test::read_option_number(argc, argv, i, out);
    };
    bool ok = true;
    if (arg == "--seed")
      ok = number(o.seed);
    else if (arg == "--nodes")
      ok = number(o.nodes) && o.nodes > 0;
    else if (arg == "--faults")
      ok = number(o.faults);
    else if (arg == "--kills")
      ok = number(o.kills);
    else if (arg == "--seconds")
      ok = number(o.seconds);
    else if (arg == "--json")
      o.json = true;
    else if (arg == "--no-clean-run")
      o.clean_run = false;
    else if (arg == "--vigil" && i + 1 < argc)
      o.vigil = argv[++i];
    else
      return usage(("unknown argument " + arg).c_str());
    if (!ok)
      return usage((arg + " wants a whole number").c_str());
  }
  signal(SIGPIPE, SIG_IGN);
  curl_global_init(CURL_GLOBAL_DEFAULT);
  // 5 s a kill. (3 s, to fit the 15 minutes, left the 1,000-node
  // run failing over faster than it could finish its work: RELIABILITY.md.)
  const double length = o.seconds > 0 ? o.seconds : std::max(60, o.kills * 5);
  const auto trace = make_trace(o, length);
  const auto schedule = make_schedule(o, length);
  // Generous for the trace's rate, so the breaker bounds without tripping:
  // six times the mean, as faults bunch (the 1,000-node run saw three times
  // the mean within a minute, after an outage's backlog, and tripped at 3x).
  breaker_limits breaker;
  breaker.window_seconds = 60;
  breaker.max_nodes = static_cast<unsigned>(
    std::max(20.0, 6.0 * o.faults / length * breaker.window_seconds));

  // The clean reference runs beside the chaos run where it has a PostgreSQL
  // server of its own (the chaos stops the other one): scripts/chaos starts
  // two. Else one after the other.
  const char* clean_server = std::getenv("VIGIL_TEST_CLEAN_POSTGRES_URL");
  const bool side_by_side = o.clean_run && clean_server != nullptr && *clean_server;
  // Each run is bounded (two minutes to a leader, the trace, five minutes to
  // settle, the kubelet's grace at each stop): past those bounds and as much
  // again, the harness itself is stuck, and says so rather than holding CI
  // to its time limit.
  const double bound_s = (side_by_side || !o.clean_run ? 1 : 2) * (length + 900);
  std::thread{[bound_s] {
    std::this_thread::sleep_for(std::chrono::duration<double>(bound_s));
    std::cerr << "chaos: not done after " << static_cast<int>(bound_s)
              << " s, past every bound of its runs: the harness is stuck\n";
    std::_Exit(3);
  }}.detach();
  run_result clean;
  std::thread clean_thread;
  if (side_by_side) {
    clean_thread = std::thread{
      [&] { clean = run_once(o, trace, {}, length, breaker, "clean", clean_server); }};
  } else if (o.clean_run) {
    clean = run_once(o, trace, {}, length, breaker, "clean",
                     vigil::test::postgres_server_url());
    if (!clean.error.empty())
      return usage(clean.error.c_str());
  }
  auto chaos = run_once(o, trace, schedule, length, breaker, "chaos",
                        vigil::test::postgres_server_url());
  if (clean_thread.joinable())
    clean_thread.join();
  if (!clean.error.empty())
    return usage(clean.error.c_str());
  if (!chaos.error.empty())
    return usage(chaos.error.c_str());
  std::vector<std::string> differences, count_differences;
  const auto diverged_nodes =
    o.clean_run ? diverged(clean.verdict, chaos.verdict, &differences) : 0;
  const auto counts_differ =
    o.clean_run ? cr_counts_differ(clean.verdict, chaos.verdict, &count_differences) : 0;
  const auto& v = chaos.verdict;
  nlohmann::json report = {
    {"seed", o.seed},
    {"nodes", o.nodes},
    {"faults", o.faults},
    {"kills", chaos.kills},
    {"restarts", chaos.restarts},
    {"events_acknowledged", v.acknowledged},
    {"journal_rows", v.journal_rows},
    {"lost", v.lost},
    {"duplicates", v.duplicate_crs + v.duplicate_cordons},
    {"duplicate_crs", v.duplicate_crs},
    {"duplicate_cordons", v.duplicate_cordons},
    {"stuck", v.stuck_crs + v.stuck_nodes},
    {"stuck_crs", v.stuck_crs},
    {"stuck_nodes", v.stuck_nodes},
    {"diverged", o.clean_run ? nlohmann::json(diverged_nodes) : nlohmann::json(nullptr)},
    {"cr_counts_differ",
     o.clean_run ? nlohmann::json(counts_differ) : nlohmann::json(nullptr)},
    {"breaker_excess", v.breaker_excess},
    {"uncordoned_during_cr", v.uncordoned_during_cr},
    {"recover_p50_s", percentile(chaos.recoveries, 0.5)},
    {"recover_p99_s", percentile(chaos.recoveries, 0.99)},
    {"posts", chaos.posts},
    {"failed_posts", chaos.failed_posts},
    {"slow_stops", chaos.slow_stops + clean.slow_stops},
    {"stop_max_ms",
     std::max(percentile(chaos.stop_ms, 1.0), percentile(clean.stop_ms, 1.0))},
    {"seconds", static_cast<int>(side_by_side ? std::max(chaos.seconds, clean.seconds)
                                              : chaos.seconds + clean.seconds)},
  };
  if (o.json) {
    report["findings"] = v.findings;
    report["differences"] = differences;
    report["cr_count_differences"] = count_differences;
  }
  if (o.json) {
    std::cout << report.dump() << "\n";
  } else {
    for (auto& [key, value] : report.items())
      std::cout << key << ": " << value.dump() << "\n";
    for (const auto& f : v.findings)
      std::cout << "  " << f << "\n";
    for (const auto& d : differences)
      std::cout << "  diverged " << d << "\n";
  }
  const bool kept = v.lost == 0 && v.duplicate_crs == 0 && v.duplicate_cordons == 0
                    && v.stuck_crs == 0 && v.stuck_nodes == 0 && diverged_nodes == 0
                    && v.breaker_excess == 0 && v.uncordoned_during_cr == 0
                    && chaos.slow_stops + clean.slow_stops == 0;
  return kept ? 0 : 1;
}
