#include "actors/janitor/reboot_node_check.hpp"

#include <gtest/gtest.h>

namespace vigil::janitor {
namespace {

using namespace std::chrono_literals;

const wall_time t0 = from_unix(1'700'000'000, 0);

TEST(reboot_node_check, success_needs_a_new_boot_id_and_ready) {
  EXPECT_EQ(evaluate_reboot("boot-a", {"boot-a", true}, t0, t0 + 60s),
            reboot_progress::waiting);
  EXPECT_EQ(evaluate_reboot("boot-a", {"boot-b", false}, t0, t0 + 60s),
            reboot_progress::waiting);
  EXPECT_EQ(evaluate_reboot("boot-a", {"", true}, t0, t0 + 60s),
            reboot_progress::waiting);
  EXPECT_EQ(evaluate_reboot("boot-a", {"boot-b", true}, t0, t0 + 60s),
            reboot_progress::succeeded);
}

TEST(reboot_node_check, times_out) {
  EXPECT_EQ(evaluate_reboot("boot-a", {"boot-a", true}, t0, t0 + 1800s),
            reboot_progress::timed_out);
  EXPECT_EQ(evaluate_reboot("boot-a", {"boot-b", true}, t0, t0 + 1h),
            reboot_progress::succeeded);
  EXPECT_EQ(evaluate_reboot("boot-a", {"boot-a", true}, t0, t0 + 10s, 5s),
            reboot_progress::timed_out);
  EXPECT_EQ(to_string(reboot_progress::timed_out), "timed_out");
}

} // namespace
} // namespace vigil::janitor
