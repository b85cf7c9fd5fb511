// The real bootstrap in-process: signals, start failures and crashes decide
// the exit code. No sleeps: the test sends the signal itself.
#include "runtime/bootstrap.hpp"

#include <csignal>
#include <cstdlib>
#include <future>
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

// Blocked where no exit message reaches it. (An argument, as for the others:
// CAF 0.17's spawn of a function without one trips UBSan.)
void blocked_component(caf::blocking_actor*, int) {
  std::promise<void> never;
  never.get_future().wait();
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
  // 0 workers: one per CPU the process may use.
  runtime.scheduler_threads = 0;
  caf::actor_system_config per_core;
  apply_scheduler_settings(runtime, per_core);
  EXPECT_EQ(caf::get_or(per_core, "scheduler.max-threads", size_t{0}), usable_cpus());
  EXPECT_GE(usable_cpus(), 1u);
}

TEST(bootstrap, a_cgroup_cpu_limit_is_read_as_whole_cpus_rounded_up) {
  // cgroup v2's cpu.max: quota and period in µs.
  EXPECT_EQ(cpus_of_cgroup_limit("200000 100000"), 2u);
  EXPECT_EQ(cpus_of_cgroup_limit("150000 100000"), 2u); // limits.cpu: 1500m
  EXPECT_EQ(cpus_of_cgroup_limit("10000 100000"), 1u);  // 100m: still one worker
  EXPECT_EQ(cpus_of_cgroup_limit("max 100000"), std::nullopt);
  // cgroup v1's cfs_quota_us and cfs_period_us, joined.
  EXPECT_EQ(cpus_of_cgroup_limit("400000 100000"), 4u);
  EXPECT_EQ(cpus_of_cgroup_limit("-1 100000"), std::nullopt);
  // Not such a line: no limit read, nothing thrown.
  EXPECT_EQ(cpus_of_cgroup_limit(""), std::nullopt);
  EXPECT_EQ(cpus_of_cgroup_limit("max"), std::nullopt);
  EXPECT_EQ(cpus_of_cgroup_limit("2x 100000"), std::nullopt);
  EXPECT_EQ(cpus_of_cgroup_limit("200000 0"), std::nullopt);
  EXPECT_EQ(cpus_of_cgroup_limit("0 100000"), std::nullopt);
}

// One replica may hold every shard: its look (a LIST, the member Lease, the
// leader's Lease and a write per shard) must fit in the burst and take at most
// half the retry period at the limiter's rate; many shards once made the
// look outlast the renew deadline behind a fixed 20 qps.
TEST(bootstrap, the_lease_client_renews_every_shard_well_inside_a_retry_period) {
  for (std::uint32_t shards : {1u, 2u, 16u, 64u, 500u, 4096u})
    for (std::uint32_t period : {1u, 2u, 9u}) {
      const auto limits = lease_api_limits(shards, std::chrono::seconds{period});
      const double look = 4.0 + (shards > 1 ? shards : 0);
      EXPECT_GE(limits.burst, look) << shards << " shards, " << period << " s";
      EXPECT_GE(limits.qps * period, 2 * look) << shards << " shards, " << period << " s";
      EXPECT_GE(limits.qps, 20.0);
      EXPECT_GE(limits.burst, 40.0);
    }
  const auto single = lease_api_limits(1, std::chrono::seconds{2});
  EXPECT_EQ(single.qps, 20.0);
  EXPECT_EQ(single.burst, 40.0);
  const auto many = lease_api_limits(1000, std::chrono::seconds{2});
  EXPECT_EQ(many.qps, 1004.0);
  EXPECT_EQ(many.burst, 1004.0);
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

// A component blocked where CAF cannot reach it (a database call, a socket)
// holds the process past its shutdown; exit_deadline ends it. A death test:
// the process exits, and the blocked thread with it.
TEST(bootstrap, a_shutdown_still_blocked_at_its_deadline_exits_1) {
  auto config = test_config();
  config.runtime.shutdown_grace_ms = 0;
  EXPECT_EXIT(
    {
      run_process(config, [](process_context& ctx) -> status {
        ctx.system.spawn<caf::detached>(blocked_component, 0);
        kill(getpid(), SIGTERM);
        return ok();
      });
      std::_Exit(0);
    },
    ::testing::ExitedWithCode(1), "the shutdown did not finish in time");
}

} // namespace
} // namespace vigil
