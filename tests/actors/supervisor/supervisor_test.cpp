// The root supervisor under CAF's deterministic test coordinator: the grace
// timer is advanced by hand, so "cancelled after the grace period" is exact.
#define CAF_SUITE supervisor
#include <caf/test/dsl.hpp>

#include "actors/protocol/atoms.hpp"
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
