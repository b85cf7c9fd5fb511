// The root supervisor under CAF's deterministic test coordinator: the grace
// timer is advanced by hand, so "cancelled after the grace period" is exact.
// Also the memory keeper, whose timer and heap figures the test sets.
#define CAF_SUITE supervisor
#include <caf/test/dsl.hpp>

#include "actors/protocol/atoms.hpp"
#include "actors/supervisor/memory_keeper.hpp"
#include "actors/supervisor/supervisor.hpp"

using namespace caf;
using namespace vigil;

namespace {

// Stops at once when asked.
behavior quick_child(event_based_actor* self, int) {
  self->set_exit_handler([=](exit_msg& msg) { self->quit(msg.reason); });
  return {[](int) {}};
}

struct busy_state {
  error stop_reason;
  bool stopping = false;
};

// Has in-flight work: a stop request waits until the work (an int) is done.
behavior busy_child(stateful_actor<busy_state>* self, int) {
  self->set_exit_handler([=](exit_msg& msg) {
    self->state.stopping = true;
    self->state.stop_reason = msg.reason;
  });
  return {[=](int) {
    if (self->state.stopping)
      self->quit(self->state.stop_reason);
  }};
}

struct fixture : test_coordinator_fixture<> {
  const timespan grace = std::chrono::seconds{10};
  actor root = sys.spawn(supervisor, grace);
  actor quick = sys.spawn(quick_child, 0);
  actor stubborn = sys.spawn(busy_child, 0);

  fixture() {
    self->send(root, adopt_atom::value, std::string("quick"), quick);
    self->send(root, adopt_atom::value, std::string("stubborn"), stubborn);
    sched.run();
  }

  supervisor_state& state() { return deref<supervisor_actor>(root).state; }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(supervisor_tests, fixture)

CAF_TEST(adopted_children_are_listed) {
  self->send(root, list_atom::value);
  expect((list_atom), from(self).to(root));
  expect((std::vector<std::string>),
         from(root).to(self).with(std::vector<std::string>{"quick", "stubborn"}));
}

CAF_TEST(shutdown_stops_newest_first_and_cancels_after_grace) {
  anon_send_exit(root, exit_reason::user_shutdown);
  expect((exit_msg), to(root));
  // newest first: the stubborn child (adopted second) is asked; the quick
  // one, which it may depend on, only once it is down
  expect((exit_msg), from(root).to(stubborn));
  sched.run();
  CAF_CHECK(state().stopping);
  CAF_CHECK_EQUAL(state().children.size(), 2u);
  // one nanosecond short of the grace period: nothing is cancelled yet
  advance_time(grace - timespan{1});
  CAF_CHECK_EQUAL(state().children.size(), 2u);
  CAF_CHECK(state().cancelled.empty());
  advance_time(timespan{1});
  // the deadline cancels both explicitly, then the root quits
  expect((deadline_atom), from(root).to(root));
  expect((exit_msg),
         from(root).to(quick).with(exit_msg{root.address(), exit_reason::kill}));
  expect((exit_msg),
         from(root).to(stubborn).with(exit_msg{root.address(), exit_reason::kill}));
  sched.run();
}

CAF_TEST(in_flight_work_finishes_within_grace) {
  anon_send_exit(root, exit_reason::user_shutdown);
  sched.run();
  CAF_CHECK_EQUAL(state().children.size(), 2u);
  advance_time(grace / 2);
  // the in-flight work completes; the child stops, then the next is asked;
  // nothing is cancelled
  self->send(stubborn, 1);
  expect((int), from(self).to(stubborn));
  expect((down_msg), from(stubborn).to(root));
  expect((exit_msg), from(root).to(quick));
  expect((down_msg), from(quick).to(root));
  // the root has quit; its deadline timer finds nobody to cancel
  trigger_timeouts();
  sched.run();
}

CAF_TEST(crashed_child_stops_the_rest) {
  self->send_exit(quick, make_error(sec::runtime_error));
  sched.run();
  CAF_CHECK(state().stopping);
  CAF_CHECK_EQUAL(state().stop_reason, make_error(sec::runtime_error));
  advance_time(grace);
  sched.run();
}

CAF_TEST_FIXTURE_SCOPE_END()

CAF_TEST_FIXTURE_SCOPE(memory_keeper_tests, test_coordinator_fixture<>)

// Each interval the keeper reads the heap; it trims only when at least
// min_free_bytes and a quarter of what is in use lie free, and goes on
// checking whatever it found.
CAF_TEST(the_keeper_returns_free_memory_only_when_a_burst_left_much_of_it) {
  auto heap = std::make_shared<heap_figures>();
  auto reads = std::make_shared<int>(0), releases = std::make_shared<int>(0);
  memory_keeper_config config;
  config.interval = std::chrono::seconds{30};
  config.min_free_bytes = 64 << 20;
  memory_keeper_probe probe;
  probe.read = [=] {
    ++*reads;
    return *heap;
  };
  probe.release = [=] {
    ++*releases;
    return true;
  };
  auto keeper = sys.spawn(memory_keeper, config, probe);
  sched.run();
  CAF_CHECK_EQUAL(*reads, 0); // the first check is one interval in
  // Steady: 10 MiB free beside 200 MiB in use.
  *heap = {10u << 20, 200u << 20};
  advance_time(config.interval);
  sched.run();
  CAF_CHECK_EQUAL(*reads, 1);
  CAF_CHECK_EQUAL(*releases, 0);
  // After a rebuild: 900 MiB free beside 300 MiB in use.
  *heap = {900u << 20, 300u << 20};
  advance_time(config.interval);
  sched.run();
  CAF_CHECK_EQUAL(*reads, 2);
  CAF_CHECK_EQUAL(*releases, 1);
  // A large heap with a little free: 100 MiB free is past the floor but not
  // a quarter of 4 GiB in use.
  *heap = {100u << 20, std::size_t{4} << 30};
  advance_time(config.interval);
  sched.run();
  CAF_CHECK_EQUAL(*reads, 3);
  CAF_CHECK_EQUAL(*releases, 1);
  anon_send_exit(keeper, exit_reason::user_shutdown);
  sched.run();
}

CAF_TEST_FIXTURE_SCOPE_END()
