// The agent's actors under CAF's test coordinator: the forwarder spools while
// the control plane refuses and drains in order when it is back, and the
// nic_monitor turns a port going down in a fake sysfs into a fatal event on
// its polling interval.
#define CAF_SUITE agent
#include <caf/test/dsl.hpp>

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
      return r;
    },
  };
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
  actor fwd = sys.spawn(forwarder, spool, options, poster);

  fixture() { sched.run(); }

  fake_poster_state& control_plane() {
    return deref<stateful_actor<fake_poster_state>>(poster).state;
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

CAF_TEST(nic_monitor_reports_a_port_going_down_on_its_interval) {
  vigil::test::fake_sysfs sysfs;
  vigil::test::fake_nic nic;
  nic.name = "mlx5_0";
  nic.pci = "0000:0c:00.0";
  sysfs.add_nic(nic);
  sysfs.write("boot_id", "boot-1");
  agent::gpu_metadata metadata;
  metadata.gpus = {{0, "0000:0f:00.0", 0, "GPU-0", "", ""}};
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

CAF_TEST_FIXTURE_SCOPE_END()
