// The agent's actors under CAF's test coordinator: the forwarder spools while
// the control plane refuses and drains in order when it is back, and sends its
// heartbeat on its interval whatever the events do (a failed one is counted,
// never spooled); the nic_monitor turns a port going down in a fake sysfs into
// a fatal event on its polling interval; /healthz and /metrics speak for the
// components that answer and name those that do not.
#define CAF_SUITE agent
#include <fstream>
#include <tuple>

#include <caf/test/dsl.hpp>

#include <nlohmann/json.hpp>

#include "actors/agent/agent_endpoints.hpp"
#include "actors/agent/dcgm/dcgm_monitor.hpp"
#include "actors/agent/fabric/fabric_monitor.hpp"
#include "actors/agent/forwarder/forwarder.hpp"
#include "actors/agent/nic/nic_monitor.hpp"
#include "runtime/actor_clock.hpp"
#include "tests/support/fake_sysfs.hpp"
#include "tests/support/fresh_directory.hpp"

using namespace caf;
using namespace vigil;

namespace {

// Plays the control plane: records each POST body, answers as told.
struct fake_poster_state {
  std::vector<std::string> bodies;
  agent::post_outcome answer = agent::post_outcome::accepted;
  std::vector<agent::line_result> verdicts; ///< per line, with `answer`
  std::vector<std::string> heartbeats;
  long heartbeat_status = 200; ///< 404 until the control plane has the route
  static inline const char* name = "fake_poster";
};

// Takes its first answer as an argument: CAF 0.17 spawns without arguments
// trip UBSan inside init_fun_factory (CAF guide §10.12).
behavior fake_poster(stateful_actor<fake_poster_state>* self,
                     agent::post_outcome first_answer) {
  self->state.answer = first_answer;
  return {
    [=](post_atom, const std::string& body) {
      self->state.bodies.push_back(body);
      agent::post_result r;
      r.outcome = self->state.answer;
      r.http_status = r.outcome == agent::post_outcome::accepted ? 200 : 503;
      if (r.outcome == agent::post_outcome::rejected)
        r.http_status = 400;
      r.failure_class = r.outcome == agent::post_outcome::retryable
                          ? agent::post_failure::overloaded
                          : agent::post_failure::none;
      r.lines = self->state.verdicts;
      return r;
    },
    [=](heartbeat_atom, const std::string& json) {
      self->state.heartbeats.push_back(json);
      agent::post_result r;
      r.http_status = self->state.heartbeat_status;
      std::tie(r.outcome, r.failure_class) = agent::classify_reply(r.http_status, false);
      return r;
    },
  };
}

// A monitor that answers (figures_atom) with fixed figures, or never.
struct fake_monitor_state {
  agent::monitor_figures figures;
  bool answers = true;
  std::vector<response_promise> ignored; ///< kept, never delivered
  static inline const char* name = "fake_monitor";
};

behavior fake_monitor(stateful_actor<fake_monitor_state>* self, std::uint64_t polls) {
  self->state.figures.polls = polls;
  self->state.figures.last_poll = from_unix(1700000000, 500'000'000);
  return {
    [=](figures_atom) -> result<agent::monitor_figures> {
      if (self->state.answers)
        return self->state.figures;
      self->state.ignored.push_back(self->make_response_promise());
      return self->state.ignored.back();
    },
  };
}

// What the HTTP handler answered; `status` is 0 until it has.
struct captured_response {
  int status = 0;
  std::string body;
};

agent::heartbeat_options heartbeats_every(std::chrono::milliseconds interval) {
  agent::heartbeat_options o;
  o.interval = interval;
  o.node_name = "node-1";
  o.agent_version = "9.9.9";
  o.boot_id = "boot-1";
  return o;
}

health_event event(const std::string& id, bool fatal) {
  health_event e;
  e.id = id;
  e.agent = "test";
  e.component_class = "GPU";
  e.check_name = "SysLogsXIDError";
  e.is_fatal = fatal;
  e.node_name = "node-1";
  e.message = "m";
  return e;
}

std::shared_ptr<agent::rejected_event_log> no_rejected_log() {
  return nullptr;
}

struct fixture : test_coordinator_fixture<> {
  actor poster = sys.spawn(fake_poster, agent::post_outcome::accepted);
  std::shared_ptr<agent::event_spool> spool = [] {
    auto s = std::make_shared<agent::event_spool>(
      agent::spool_options{vigil::test::fresh_directory() + "/spool"});
    CAF_REQUIRE(s->open().has_value());
    return s;
  }();
  agent::forwarder_options options = [] {
    agent::forwarder_options o;
    o.batch_max_delay = std::chrono::milliseconds{0};
    o.backoff_initial = std::chrono::milliseconds{1000};
    o.jitter = 0;
    return o;
  }();
  std::shared_ptr<caf_clock> wall =
    std::make_shared<caf_clock>(sys.clock(), from_unix(1700000000, 0));
  std::string rejected_path = vigil::test::fresh_directory() + "/rejected-events.ndjson";
  actor fwd = sys.spawn(
    forwarder, spool, std::make_shared<agent::rejected_event_log>(rejected_path), options,
    heartbeats_every(std::chrono::milliseconds{0}), poster, wall);

  fixture() { sched.run(); }

  // The base destructor runs until no timer is left: a retry armed against a
  // control plane that keeps refusing would never let it return.
  ~fixture() {
    anon_send_exit(fwd, exit_reason::kill);
    sched.run();
  }

  fake_poster_state& control_plane() {
    return deref<stateful_actor<fake_poster_state>>(poster).state;
  }

  agent::forwarder_figures figures_of(const actor& forwarder_actor) {
    agent::forwarder_figures out;
    self->send(forwarder_actor, figures_atom::value);
    sched.run();
    self->receive([&](const agent::forwarder_figures& f) { out = f; },
                  after(std::chrono::seconds{1}) >> [] { CAF_FAIL("no figures"); });
    return out;
  }

  // GET `path` through the agent's HTTP handler; the caller runs the actors.
  std::shared_ptr<captured_response> get(const actor& endpoints,
                                         const std::string& path) {
    auto captured = std::make_shared<captured_response>();
    http::request req;
    req.method = "GET";
    req.path = req.target = path;
    make_agent_handler(endpoints)(req, [captured](http::response r) {
      captured->status = r.status;
      captured->body = r.body;
    });
    return captured;
  }
  std::string all_bodies() {
    std::string out;
    for (const auto& b : control_plane().bodies)
      out += b;
    return out;
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(agent_tests, fixture)

CAF_TEST(forwarder_posts_spools_while_refused_and_drains_in_order) {
  self->send(fwd, forward_atom::value, event("e1", true));
  sched.run();
  CAF_REQUIRE_EQUAL(control_plane().bodies.size(), 1u);
  CAF_CHECK(all_bodies().find("\"id\":\"e1\"") != std::string::npos);

  control_plane().answer = agent::post_outcome::retryable; // the control plane is away
  self->send(fwd, forward_atom::value, event("e2", true));
  sched.run();
  self->send(fwd, forward_atom::value, event("e3", false));
  sched.run();
  CAF_CHECK_EQUAL(spool->size(), 2u); // e2 (the failed batch) and e3, on disk

  control_plane().answer = agent::post_outcome::accepted;
  control_plane().bodies.clear();
  for (int i = 0; i < 5 && spool->size() > 0; ++i) {
    advance_time(std::chrono::seconds{2}); // past the backoff
    sched.run();
  }
  CAF_CHECK_EQUAL(spool->size(), 0u);
  const auto sent = all_bodies();
  CAF_CHECK(sent.find("\"id\":\"e2\"") < sent.find("\"id\":\"e3\""));
}

// A verdict per line is the only answer that drops an event; the agent keeps
// what it dropped, with the reason, in STATE-DIR/rejected-events.ndjson.
CAF_TEST(events_rejected_line_by_line_are_kept_in_the_rejected_log) {
  control_plane().answer = agent::post_outcome::rejected;
  control_plane().verdicts = {{"e1", false, "nodeName: missing"}};
  self->send(fwd, forward_atom::value, event("e1", true));
  sched.run();
  CAF_CHECK_EQUAL(spool->size(), 0u);
  std::ifstream in(rejected_path);
  std::string line;
  CAF_REQUIRE(static_cast<bool>(std::getline(in, line)));
  auto j = nlohmann::json::parse(line);
  CAF_CHECK_EQUAL(j.at("id").get<std::string>(), "e1");
  CAF_CHECK_EQUAL(j.at("reason").get<std::string>(), "nodeName: missing");
  CAF_CHECK_EQUAL(j.at("event").at("id").get<std::string>(), "e1");
  CAF_CHECK_EQUAL(j.at("rejectedAt").get<std::string>(), "2023-11-14T22:13:20Z");
  CAF_CHECK(!std::getline(in, line));
}

CAF_TEST(nic_monitor_reports_a_port_going_down_on_its_interval) {
  vigil::test::fake_sysfs sysfs;
  vigil::test::fake_nic nic;
  nic.name = "mlx5_0";
  nic.pci = "0000:0c:00.0";
  sysfs.add_nic(nic);
  sysfs.write("boot_id", "boot-1");
  agent::gpu_metadata metadata;
  metadata.gpus = {{0, "0000:0f:00.0", 0, "GPU-0", "", "", "", {}}};
  metadata.nic_topology = {{"mlx5_0", {"PIX"}}};
  agent::nic_monitor_options options;
  options.node_name = "node-1";
  options.sysfs_root = sysfs.root();
  options.boot_id_path = sysfs.path("boot_id");
  options.state_file = sysfs.path("state.json");
  auto poller = agent::nic_poller::start(options, metadata, "", std::nullopt);
  CAF_REQUIRE(poller.has_value());
  auto wall = std::make_shared<caf_clock>(sys.clock(), from_unix(1700000000, 0));
  auto monitor = sys.spawn(nic_monitor, std::move(*poller), fwd, wall);
  sched.run();
  CAF_REQUIRE_EQUAL(control_plane().bodies.size(), 1u); // the healthy baseline
  CAF_CHECK(all_bodies().find("\"isHealthy\":true") != std::string::npos);

  sysfs.set_state("mlx5_0", 1, "1: DOWN", "3: Disabled");
  sched.run();
  CAF_CHECK_EQUAL(control_plane().bodies.size(), 1u); // not before the interval
  advance_time(options.state_polling_interval);
  sched.run();
  CAF_REQUIRE_EQUAL(control_plane().bodies.size(), 2u);
  CAF_CHECK(control_plane().bodies[1].find("\"isFatal\":true") != std::string::npos);
  CAF_CHECK(control_plane().bodies[1].find("REPLACE_VM") != std::string::npos);
  anon_send_exit(monitor, exit_reason::user_shutdown);
  sched.run();
}

// Pages (or failures) in order, as a dcgm-exporter would answer.
struct scripted_pages : agent::metrics_page_source {
  std::vector<vigil::expected<std::string>> answers;
  std::size_t next = 0;
  vigil::expected<std::string> fetch() override {
    return next < answers.size() ? answers[next++] : answers.back();
  }
};

CAF_TEST(dcgm_monitor_reports_an_outage_once_and_a_hot_gpu_on_its_interval) {
  auto pages = std::make_shared<scripted_pages>();
  const std::string hot = "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"GPU-0\"} 95\n";
  pages->answers = {failure{"http://localhost:9400/metrics", "Connection refused"},
                    failure{"http://localhost:9400/metrics", "Connection refused"},
                    std::string("<html>not metrics</html>\n"), hot};
  dcgm_monitor_config config;
  config.node = "node-1";
  auto wall = std::make_shared<caf_clock>(sys.clock(), from_unix(1700000000, 0));
  auto monitor = sys.spawn(dcgm_monitor, config, pages, nullptr, fwd, wall);
  sched.run();
  CAF_REQUIRE_EQUAL(control_plane().bodies.size(), 1u);
  CAF_CHECK(control_plane().bodies[0].find("DCGMExporterReachable") != std::string::npos);
  CAF_CHECK(control_plane().bodies[0].find("STORE_ONLY") != std::string::npos);
  for (int i = 0; i < 2; ++i) { // still refused, then not a metrics page: no more
    advance_time(config.interval);
    sched.run();
  }
  CAF_CHECK_EQUAL(control_plane().bodies.size(), 1u);
  advance_time(config.interval);
  sched.run();
  const auto all = all_bodies();
  CAF_CHECK(all.find("\"checkName\":\"DCGMThermal\"") != std::string::npos);
  CAF_CHECK(all.find("dcgm-exporter is readable again") != std::string::npos);
  self->send(monitor, figures_atom::value);
  sched.run();
  self->receive(
    [](const agent::monitor_figures& f) {
      CAF_CHECK_EQUAL(f.polls, 4u);
      CAF_CHECK_EQUAL(f.events, 3u);
      CAF_CHECK_EQUAL(f.malformed, 1u); // the HTML line
    },
    after(std::chrono::seconds{1}) >> [] { CAF_FAIL("no figures"); });
  anon_send_exit(monitor, exit_reason::user_shutdown);
  sched.run();
}

// A driver without the fabric health fields refuses the query naming them
// (nvidia-smi exits 2): the monitor reads the registration alone from then
// on, and a fabric that fails is still reported, as is a GPU that lost NVLinks
// its peer has.
CAF_TEST(fabric_monitor_falls_back_to_the_registration_when_the_driver_lacks_health) {
  auto asked = std::make_shared<std::vector<std::string>>();
  auto hung = std::make_shared<bool>(false);
  auto registration =
    std::make_shared<std::string>("0, GPU-0a, 00000000:18:00.0, Completed, Success\n"
                                  "1, GPU-1b, 00000000:2A:00.0, Completed, Success\n");
  auto links = std::make_shared<std::string>("GPU 0: NVIDIA H100 (UUID: GPU-0a)\n"
                                             "\t Link 0: 26.562 GB/s\n"
                                             "\t Link 1: 26.562 GB/s\n"
                                             "GPU 1: NVIDIA H100 (UUID: GPU-1b)\n"
                                             "\t Link 0: 26.562 GB/s\n"
                                             "\t Link 1: 26.562 GB/s\n");
  agent::command_runner run =
    [=](const std::string& command) -> vigil::expected<std::string> {
    if (command.find("nvlink --status") != std::string::npos)
      return *links;
    asked->push_back(command);
    if (*hung)
      return failure{command, "timed out after 30 s; killed"};
    if (command.find("fabric.health") != std::string::npos)
      return failure{command, "exited with status 2"};
    return *registration;
  };
  fabric_monitor_config config;
  config.node = "node-1";
  auto wall = std::make_shared<caf_clock>(sys.clock(), from_unix(1700000000, 0));
  auto monitor = sys.spawn(fabric_monitor, config, run, fwd, wall);
  sched.run();
  CAF_REQUIRE_EQUAL(asked->size(), 2u); // the health query, then the registration
  // The fabric's first reading, and that nvidia-smi answers with both GPUs.
  const auto first = all_bodies();
  CAF_CHECK(first.find("GPUFabricHealth") != std::string::npos);
  CAF_CHECK(first.find("\"checkName\":\"NvidiaSmiResponds\"") != std::string::npos);
  CAF_CHECK(first.find("\"checkName\":\"GPUPresence\"") != std::string::npos);
  *registration = "0, GPU-0a, 00000000:18:00.0, Completed, Insufficient Resources\n"
                  "1, GPU-1b, 00000000:2A:00.0, Completed, Success\n";
  *links = "GPU 0: NVIDIA H100 (UUID: GPU-0a)\n\t Link 0: 26.562 GB/s\n"
           "\t Link 1: 26.562 GB/s\nGPU 1: NVIDIA H100 (UUID: GPU-1b)\n"
           "\t Link 0: 26.562 GB/s\n\t Link 1: <inactive>\n";
  advance_time(config.interval);
  sched.run();
  CAF_REQUIRE_EQUAL(asked->size(), 3u); // the health fields are not asked for again
  CAF_CHECK_EQUAL((*asked)[2].find("fabric.health"), std::string::npos);
  const auto all = all_bodies();
  CAF_CHECK(all.find("fabric status Insufficient Resources") != std::string::npos);
  CAF_CHECK(all.find("GPU 1 (GPU-1b): NVLink 1 inactive (1 of 2 active)")
            != std::string::npos);
  // GPU 1 falls off the bus: nvidia-smi cannot reach it, two readings in a
  // row; then nvidia-smi hangs, twice.
  *registration = "0, GPU-0a, 00000000:18:00.0, Completed, Success\n"
                  "Unable to determine the device handle for GPU0000:2A:00.0: "
                  "Unknown Error\n";
  for (int i = 0; i < 2; ++i) {
    advance_time(config.interval);
    sched.run();
  }
  const auto gone = all_bodies();
  CAF_CHECK(gone.find("GPU GPU-1b (0000:2a:00.0) is unreachable") != std::string::npos);
  CAF_CHECK(gone.find("GPU_MISSING") != std::string::npos);
  *hung = true;
  for (int i = 0; i < 2; ++i) {
    advance_time(config.interval);
    sched.run();
  }
  CAF_CHECK(all_bodies().find("NVIDIA_SMI_FAILED") != std::string::npos);
  anon_send_exit(monitor, exit_reason::user_shutdown);
  sched.run();
}

CAF_TEST(forwarder_heartbeats_at_start_and_every_interval_without_events) {
  CAF_CHECK_EQUAL(control_plane().heartbeats.size(), 1u); // the fixture's start-up check
  control_plane().heartbeats.clear();
  auto beating = sys.spawn(forwarder, spool, no_rejected_log(), options,
                           heartbeats_every(std::chrono::seconds{60}), poster, wall);
  sched.run();
  CAF_REQUIRE_EQUAL(control_plane().heartbeats.size(), 1u); // at start
  auto j = nlohmann::json::parse(control_plane().heartbeats[0]);
  CAF_CHECK_EQUAL(j.at("nodeName").get<std::string>(), "node-1");
  CAF_CHECK_EQUAL(j.at("agentVersion").get<std::string>(), "9.9.9");
  CAF_CHECK_EQUAL(j.at("bootId").get<std::string>(), "boot-1");
  CAF_CHECK_EQUAL(j.at("sentAt").get<std::string>(), "2023-11-14T22:13:20Z");
  CAF_CHECK_EQUAL(j.at("intervalSeconds").dump(), "60");
  advance_time(std::chrono::seconds{59});
  sched.run();
  CAF_CHECK_EQUAL(control_plane().heartbeats.size(), 1u);
  advance_time(std::chrono::seconds{1});
  sched.run();
  CAF_REQUIRE_EQUAL(control_plane().heartbeats.size(), 2u);
  auto second = nlohmann::json::parse(control_plane().heartbeats[1]);
  CAF_CHECK_EQUAL(second.at("sentAt").get<std::string>(), "2023-11-14T22:14:20Z");
  CAF_CHECK(control_plane().bodies.empty()); // no events, no batches
  auto f = figures_of(beating);
  CAF_CHECK_EQUAL(f.heartbeats.accepted, 2u);
  CAF_CHECK_EQUAL(f.heartbeats.failed, 0u);
  CAF_CHECK(f.heartbeats.last_accepted == from_unix(1700000060, 0));
  anon_send_exit(beating, exit_reason::kill);
  sched.run();
}

CAF_TEST(a_failed_heartbeat_is_counted_never_spooled_nor_retried_early) {
  control_plane().heartbeats.clear(); // the fixture's start-up check
  control_plane().heartbeat_status = 503;
  auto beating = sys.spawn(forwarder, spool, no_rejected_log(), options,
                           heartbeats_every(std::chrono::seconds{60}), poster, wall);
  sched.run();
  CAF_REQUIRE_EQUAL(control_plane().heartbeats.size(), 1u);
  advance_time(std::chrono::seconds{30}); // no backoff retry: the next is the retry
  sched.run();
  CAF_CHECK_EQUAL(control_plane().heartbeats.size(), 1u);
  CAF_CHECK_EQUAL(spool->size(), 0u);
  auto f = figures_of(beating);
  CAF_CHECK_EQUAL(f.heartbeats.failed, 1u);
  CAF_CHECK(!f.heartbeats.last_accepted);
  CAF_CHECK(!f.spooling); // events are not held back by a failed heartbeat
  self->send(beating, forward_atom::value, event("e1", true));
  sched.run();
  CAF_CHECK_EQUAL(control_plane().bodies.size(), 1u);

  control_plane().heartbeat_status = 204;
  advance_time(std::chrono::seconds{30});
  sched.run();
  CAF_CHECK_EQUAL(control_plane().heartbeats.size(), 2u);
  f = figures_of(beating);
  CAF_CHECK_EQUAL(f.heartbeats.failed, 1u);
  CAF_CHECK_EQUAL(f.heartbeats.accepted, 1u);
  CAF_CHECK_EQUAL(spool->size(), 0u);
  anon_send_exit(beating, exit_reason::kill);
  sched.run();
}

CAF_TEST(forwarder_figures_count_sent_spooled_and_the_last_success) {
  self->send(fwd, forward_atom::value, event("e1", true));
  sched.run();
  advance_time(std::chrono::seconds{5});
  control_plane().answer = agent::post_outcome::retryable;
  self->send(fwd, forward_atom::value, event("e2", true));
  sched.run();
  auto f = figures_of(fwd);
  CAF_CHECK_EQUAL(f.events.submitted, 2u);
  CAF_CHECK_EQUAL(f.events.events_accepted, 1u);
  CAF_CHECK_EQUAL(f.events.failures, 1u);
  CAF_CHECK_EQUAL(f.spooled, 1u);
  CAF_CHECK_EQUAL(f.spool_depth, 1u);
  CAF_CHECK(f.spooling);
  CAF_CHECK(f.last_accepted == from_unix(1700000000, 0));
}

CAF_TEST(healthz_is_200_while_every_component_answers) {
  auto xid = sys.spawn(fake_monitor, std::uint64_t{7});
  auto nic = sys.spawn(fake_monitor, std::uint64_t{3});
  auto endpoints = sys.spawn(agent_endpoints, agent_components{fwd, xid, nic, {}, {}},
                             caf::timespan{std::chrono::seconds{2}});
  sched.run();
  auto health = get(endpoints, "/healthz");
  sched.run();
  CAF_CHECK_EQUAL(health->status, 200);
  CAF_CHECK_EQUAL(health->body, "ok: forwarder, xid_monitor, nic_monitor\n");

  auto metrics = get(endpoints, "/metrics");
  sched.run();
  CAF_REQUIRE_EQUAL(metrics->status, 200);
  for (const auto* line :
       {"vigil_agent_component_up{component=\"forwarder\"} 1\n",
        "vigil_agent_component_up{component=\"nic_monitor\"} 1\n",
        "vigil_agent_polls_total{monitor=\"xid_monitor\"} 7\n",
        "vigil_agent_polls_total{monitor=\"nic_monitor\"} 3\n",
        "vigil_agent_last_poll_timestamp_seconds{monitor=\"nic_monitor\"} "
        "1700000000.5\n",
        "vigil_agent_events_sent_total 0\n", "vigil_agent_spool_depth 0\n",
        "vigil_agent_send_failures_total{reason=\"endpoint\"} 0\n",
        "vigil_agent_heartbeats_total{outcome=\"failed\"} 0\n",
        "vigil_agent_last_send_success_timestamp_seconds 0\n"})
    if (metrics->body.find(line) == std::string::npos)
      CAF_CHECK_FAILED("missing " << line << " in\n" << metrics->body);

  auto other = get(endpoints, "/nope");
  CAF_CHECK_EQUAL(other->status, 404);
  for (const auto& a : {xid, nic, endpoints})
    anon_send_exit(a, exit_reason::kill);
  sched.run();
}

// A wedged monitor (a hung read) answers nothing: /healthz says which after
// the ask timeout, and /metrics still serves what the others report.
CAF_TEST(healthz_is_503_naming_a_component_that_does_not_answer) {
  auto xid = sys.spawn(fake_monitor, std::uint64_t{7});
  auto nic = sys.spawn(fake_monitor, std::uint64_t{3});
  deref<stateful_actor<fake_monitor_state>>(nic).state.answers = false;
  auto endpoints = sys.spawn(agent_endpoints, agent_components{fwd, xid, nic, {}, {}},
                             caf::timespan{std::chrono::seconds{2}});
  sched.run();
  auto health = get(endpoints, "/healthz");
  sched.run();
  CAF_CHECK_EQUAL(health->status, 0); // still waiting for the NIC monitor
  advance_time(std::chrono::seconds{2});
  sched.run();
  CAF_CHECK_EQUAL(health->status, 503);
  CAF_CHECK_EQUAL(health->body,
                  "not running: nic_monitor (did not answer within 2000 ms)\n");

  auto metrics = get(endpoints, "/metrics");
  sched.run();
  advance_time(std::chrono::seconds{2});
  sched.run();
  CAF_CHECK_EQUAL(metrics->status, 200);
  CAF_CHECK(metrics->body.find("vigil_agent_component_up{component=\"nic_monitor\"} 0\n")
            != std::string::npos);
  CAF_CHECK(metrics->body.find("vigil_agent_polls_total{monitor=\"xid_monitor\"} 7\n")
            != std::string::npos);
  CAF_CHECK(metrics->body.find("{monitor=\"nic_monitor\"}") == std::string::npos);

  anon_send_exit(nic, exit_reason::kill); // a monitor that died
  sched.run();
  health = get(endpoints, "/healthz");
  sched.run();
  CAF_CHECK_EQUAL(health->status, 503);
  CAF_CHECK_EQUAL(health->body, "not running: nic_monitor (stopped)\n");
  for (const auto& a : {xid, endpoints})
    anon_send_exit(a, exit_reason::kill);
  sched.run();
}

CAF_TEST_FIXTURE_SCOPE_END()
