// The NIC poller's error counters: deltas across polls, restarts and
// reboots, baselines for counters that predate vigil, breaches and the
// threshold that tolerates small rises.
#include "actors/agent/nic/nic_monitor_core.hpp"

#include <gtest/gtest.h>

#include "tests/actors/agent/nic/nic_core_fixture.hpp"

namespace vigil::agent {
namespace {

using namespace test_support;

// Appendix A counters: deltas across polls and restarts, baseline after reboot.
TEST_F(nic_core, link_downed_deltas_across_polls_restarts_and_reboots) {
  sys.set_counter("mlx5_0", 1, "link_downed", 2);
  settle();
  EXPECT_TRUE(poll().events.empty()) << describe(last.events);
  sys.set_counter("mlx5_0", 1, "link_downed", 3);
  auto r = poll();
  ASSERT_EQ(r.events.size(), 1u) << describe(r.events);
  EXPECT_EQ(r.events[0].check_name, "InfiniBandDegradationCheck");
  EXPECT_EQ(r.events[0].message,
            "Port mlx5_0 port 1: link_downed increased by 1 (2 -> 3)");
  EXPECT_TRUE(r.events[0].is_fatal);
  EXPECT_EQ(r.events[0].action, recommended_action::replace_vm);
  EXPECT_EQ(r.events[0].error_codes, std::vector<std::string>{"link_downed"});
  restart();
  sys.set_counter("mlx5_0", 1, "link_downed", 5); // while the pod was away
  r = poll();
  ASSERT_EQ(r.events.size(), 1u) << describe(r.events);
  EXPECT_EQ(r.events[0].message,
            "Port mlx5_0 port 1: link_downed increased by 2 (3 -> 5)");
  restart();
  boot_id = "boot-2";
  sys.set_counter("mlx5_0", 1, "link_downed", 1);
  r = poll();
  EXPECT_TRUE(about(r.events, "mlx5_0").size() == 1u && r.events[0].is_healthy)
    << describe(r.events);
}

// The errors counters gathered before vigil was installed are history: the
// first poll only takes baselines, and only rises vigil saw are reported.
TEST_F(nic_core, first_poll_with_old_counter_errors_reports_nothing) {
  for (int i = 0; i < 4; ++i) {
    const auto nic = "mlx5_" + std::to_string(i);
    sys.set_counter(nic, 1, "link_downed", 12);
    sys.set_counter(nic, 1, "excessive_buffer_overrun_errors", 3);
    sys.set_counter(nic, 1, "local_link_integrity_errors", 5);
    sys.set_counter(nic, 1, "rnr_nak_retry_err", 4000);
  }
  start();
  auto r = poll();
  ASSERT_EQ(r.events.size(), 4u) << describe(r.events);
  for (const auto& e : r.events) {
    EXPECT_TRUE(e.is_healthy) << e.message;
    EXPECT_EQ(e.check_name, "InfiniBandStateCheck") << e.message;
  }
  EXPECT_EQ(
    poller->state()->ports.at("mlx5_2/1").counters.baselines.at("rnr_nak_retry_err"),
    4000u);
  EXPECT_TRUE(poll().events.empty()) << describe(last.events);
  // A rise after the baseline is reported, measured from it.
  sys.set_counter("mlx5_2", 1, "local_link_integrity_errors", 6);
  r = poll();
  ASSERT_EQ(r.events.size(), 1u) << describe(r.events);
  EXPECT_EQ(r.events[0].check_name, "InfiniBandDegradationCheck");
  EXPECT_EQ(r.events[0].message, "Port mlx5_2 port 1: local_link_integrity_errors rose "
                                 "by 1 above its baseline (5 -> 6, threshold 0)");
  EXPECT_TRUE(r.events[0].is_fatal);
  EXPECT_EQ(r.events[0].action, recommended_action::replace_vm);
  EXPECT_EQ(r.events[0].metadata.at("baseline"), "5");
  EXPECT_EQ(r.events[0].metadata.at("threshold"), "0");
}

// A port vigil sees for the first time (a device added while it runs) is
// baselined like a first poll: its old counter values report nothing.
TEST_F(nic_core, a_new_port_is_baselined) {
  settle();
  add_ib("mlx5_4", 0x10);
  sys.set_counter("mlx5_4", 1, "excessive_buffer_overrun_errors", 8);
  sys.set_counter("mlx5_4", 1, "link_downed", 3);
  restart(); // the metadata now names mlx5_4
  auto r = poll();
  ASSERT_EQ(r.events.size(), 1u) << describe(r.events);
  EXPECT_TRUE(r.events[0].is_healthy) << r.events[0].message;
  sys.set_counter("mlx5_4", 1, "link_downed", 4);
  r = poll();
  ASSERT_EQ(r.events.size(), 1u) << describe(r.events);
  EXPECT_EQ(r.events[0].message,
            "Port mlx5_4 port 1: link_downed increased by 1 (3 -> 4)");
}

TEST_F(nic_core, breach_counters_report_once_and_clear) {
  sys.set_counter("mlx5_3", 1, "excessive_buffer_overrun_errors", 2);
  settle();
  sys.set_counter("mlx5_3", 1, "excessive_buffer_overrun_errors", 6);
  auto r = poll();
  ASSERT_EQ(r.events.size(), 1u) << describe(r.events);
  EXPECT_EQ(r.events[0].message, "Port mlx5_3 port 1: excessive_buffer_overrun_errors "
                                 "rose by 4 above its baseline (2 -> 6, threshold 0)");
  EXPECT_TRUE(r.events[0].is_fatal);
  sys.set_counter("mlx5_3", 1, "excessive_buffer_overrun_errors", 9);
  EXPECT_TRUE(poll().events.empty()) << describe(last.events);
  restart();
  EXPECT_TRUE(poll().events.empty()) << describe(last.events);
  // A reset clears the breach and is the new baseline.
  sys.set_counter("mlx5_3", 1, "excessive_buffer_overrun_errors", 0);
  r = poll();
  ASSERT_EQ(r.events.size(), 1u) << describe(r.events);
  EXPECT_TRUE(r.events[0].is_healthy);
  EXPECT_EQ(r.events[0].message, "Port mlx5_3 port 1: excessive_buffer_overrun_errors "
                                 "was reset (9 -> 0): cleared, new baseline");
  sys.set_counter("mlx5_3", 1, "excessive_buffer_overrun_errors", 1);
  r = poll();
  ASSERT_EQ(r.events.size(), 1u) << describe(r.events);
  EXPECT_TRUE(r.events[0].is_fatal);
}

// --counter-threshold: a rise up to the threshold is tolerated.
TEST_F(nic_core, a_threshold_suppresses_small_rises) {
  options.counter_thresholds["rnr_nak_retry_err"] = 10;
  sys.set_counter("mlx5_1", 1, "rnr_nak_retry_err", 100);
  sys.set_counter("mlx5_1", 1, "local_link_integrity_errors", 0);
  settle();
  sys.set_counter("mlx5_1", 1, "rnr_nak_retry_err", 110);
  EXPECT_TRUE(poll().events.empty()) << describe(last.events);
  sys.set_counter("mlx5_1", 1, "local_link_integrity_errors", 1); // default 0
  auto r = poll();
  ASSERT_EQ(r.events.size(), 1u) << describe(r.events);
  EXPECT_EQ(r.events[0].error_codes,
            std::vector<std::string>{"local_link_integrity_errors"});
  sys.set_counter("mlx5_1", 1, "rnr_nak_retry_err", 111);
  r = poll();
  ASSERT_EQ(r.events.size(), 1u) << describe(r.events);
  EXPECT_EQ(r.events[0].message, "Port mlx5_1 port 1: rnr_nak_retry_err rose by 11 "
                                 "above its baseline (100 -> 111, threshold 10)");
}

// A reboot (seed 002 §3.4 step 4) clears the state: counters are baselined
// again, and a breach of the previous boot is not reported anew.
TEST_F(nic_core, a_reboot_rebaselines_the_counters) {
  sys.set_counter("mlx5_0", 1, "local_link_integrity_errors", 1);
  settle();
  sys.set_counter("mlx5_0", 1, "local_link_integrity_errors", 3);
  ASSERT_EQ(poll().events.size(), 1u) << describe(last.events);
  restart();
  boot_id = "boot-2";
  sys.set_counter("mlx5_0", 1, "local_link_integrity_errors", 7);
  auto r = poll();
  EXPECT_TRUE(r.baseline);
  ASSERT_EQ(r.events.size(), 4u) << describe(r.events);
  for (const auto& e : r.events)
    EXPECT_TRUE(e.is_healthy) << e.message;
  const auto& counters = poller->state()->ports.at("mlx5_0/1").counters;
  EXPECT_EQ(counters.baselines.at("local_link_integrity_errors"), 7u);
  EXPECT_TRUE(counters.breached.empty());
  EXPECT_TRUE(poll().events.empty()) << describe(last.events);
  sys.set_counter("mlx5_0", 1, "local_link_integrity_errors", 8);
  r = poll();
  ASSERT_EQ(r.events.size(), 1u) << describe(r.events);
  EXPECT_TRUE(r.events[0].is_fatal);
}

} // namespace
} // namespace vigil::agent
