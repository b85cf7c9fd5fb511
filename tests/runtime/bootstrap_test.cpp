// The real bootstrap in-process: signals, start failures and crashes decide
// the exit code. No sleeps: the test sends the signal itself.
#include "runtime/bootstrap.hpp"

#include <csignal>
#include <unistd.h>

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include "actors/protocol/atoms.hpp"

namespace vigil {
namespace {

vigil_config test_config() {
  vigil_config config;
  config.runtime.scheduler_threads = 2;
  config.runtime.shutdown_grace_ms = 60000;
  return config;
}

// A component that stops cleanly when asked.
caf::behavior polite_component(caf::event_based_actor* self, int) {
  self->set_exit_handler([=](caf::exit_msg& msg) { self->quit(msg.reason); });
  return {[](int) {}};
}

caf::behavior crashing_component(caf::event_based_actor* self, int) {
  self->quit(caf::make_error(caf::sec::runtime_error, "device vanished"));
  return {};
}

TEST(bootstrap, scheduler_workers_come_from_the_runtime_section_and_block_when_idle) {
  runtime_config runtime;
  runtime.scheduler_threads = 3;
  caf::actor_system_config cfg;
  apply_scheduler_settings(runtime, cfg);
  EXPECT_EQ(caf::get_or(cfg, "scheduler.max-threads", size_t{0}), 3u);
  EXPECT_EQ(caf::get_or(cfg, "work-stealing.moderate-poll-attempts", size_t{0}),
            idle_polls_before_blocking);
  // 0 workers: one per core.
  runtime.scheduler_threads = 0;
  caf::actor_system_config per_core;
  apply_scheduler_settings(runtime, per_core);
  EXPECT_GE(caf::get_or(per_core, "scheduler.max-threads", size_t{0}), 1u);
}

TEST(bootstrap, sigterm_stops_in_order_and_exits_0) {
  const int code = run_process(test_config(), [](process_context& ctx) -> status {
    auto component = ctx.system.spawn(polite_component, 0);
    caf::anon_send(ctx.root, adopt_atom::value, std::string("polite"), component);
    kill(getpid(), SIGTERM);
    return ok();
  });
  EXPECT_EQ(code, 0);
}

TEST(bootstrap, failed_start_exits_1) {
  const int code = run_process(test_config(), [](process_context&) -> status {
    return failure{"journal.url", "database unreachable"};
  });
  EXPECT_EQ(code, 1);
}

TEST(bootstrap, crashed_component_exits_1) {
  const int code = run_process(test_config(), [](process_context& ctx) -> status {
    auto polite = ctx.system.spawn(polite_component, 0);
    caf::anon_send(ctx.root, adopt_atom::value, std::string("polite"), polite);
    auto crashing = ctx.system.spawn<caf::lazy_init>(crashing_component, 0);
    caf::anon_send(ctx.root, adopt_atom::value, std::string("crashing"), crashing);
    caf::anon_send(crashing, 1);
    return ok();
  });
  EXPECT_EQ(code, 1);
}

} // namespace
} // namespace vigil
