#include "actors/control/remediation/remediation_queue.hpp"

#include <gtest/gtest.h>

namespace vigil::control {
namespace {

const std::string gpu_a = "GPU-aaaaaaaa-0000-0000-0000-000000000000";
const std::string gpu_b = "GPU-bbbbbbbb-0000-0000-0000-000000000000";

node_gpu_facts hopper() {
  node_gpu_facts facts;
  facts.product_name = "NVIDIA H100 80GB HBM3";
  return facts;
}

remediation_request reset(const std::string& uuid, std::string event = "e") {
  return {plan_remediation(recommended_action::component_reset, uuid, hopper()),
          std::move(event), from_unix(1'700'000'000, 0)};
}

remediation_request reboot(std::string event = "e") {
  return {plan_remediation(recommended_action::restart_bm, "", hopper()),
          std::move(event), from_unix(1'700'000'000, 0)};
}

remediation_request replace() {
  return {plan_remediation(recommended_action::replace_vm, "", hopper()), "e",
          from_unix(1'700'000'000, 0)};
}

remediation_request custom(const std::string& name, std::string event = "e") {
  remediation_options options;
  options.custom_actions = {{name, "repair.example.com", "v1", "Fix", "fixes"}};
  return {plan_remediation(recommended_action::custom, gpu_a, hopper(), options, name),
          std::move(event), from_unix(1'700'000'000, 0)};
}

TEST(remediation_queue, starts_when_idle) {
  remediation_queue q;
  EXPECT_TRUE(q.idle());
  auto d = q.submit(reset(gpu_a));
  EXPECT_EQ(d.verdict, queue_verdict::start_now);
  ASSERT_TRUE(q.in_flight().has_value());
  EXPECT_EQ(q.in_flight()->plan.group, reset_group(gpu_a));
}

// seed 000 §4.3 case 1
TEST(remediation_queue, reboot_then_reboot_skips_while_in_flight) {
  remediation_queue q;
  q.submit(reboot("first"));
  auto d = q.submit(reboot("second"));
  EXPECT_EQ(d.verdict, queue_verdict::skipped_same);
  EXPECT_EQ(d.covering_group, "restart");
  EXPECT_TRUE(q.waiting().empty());
  EXPECT_FALSE(q.finish("restart").has_value());
  EXPECT_EQ(q.submit(reboot("third")).verdict, queue_verdict::start_now);
}

// seed 000 §4.3 case 2
TEST(remediation_queue, reset_then_reset_of_the_same_gpu_skips_another_gpu_waits) {
  remediation_queue q;
  q.submit(reset(gpu_a));
  auto same = q.submit(reset(gpu_a, "again"));
  EXPECT_EQ(same.verdict, queue_verdict::skipped_same);
  EXPECT_EQ(same.covering_group, reset_group(gpu_a));
  auto other = q.submit(reset(gpu_b));
  EXPECT_EQ(other.verdict, queue_verdict::queued);
  EXPECT_EQ(other.covering_group, reset_group(gpu_a));
  EXPECT_EQ(q.submit(reset(gpu_b)).verdict, queue_verdict::skipped_same);
  auto next = q.finish(reset_group(gpu_a));
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->plan.group, reset_group(gpu_b));
  EXPECT_EQ(q.in_flight()->plan.group, reset_group(gpu_b));
  EXPECT_FALSE(q.finish(reset_group(gpu_b)).has_value());
  EXPECT_EQ(q.submit(reset(gpu_a)).verdict, queue_verdict::start_now);
}

// seed 000 §4.3 case 3
TEST(remediation_queue, reboot_during_a_reset_runs_after_it_and_covers_waiting_resets) {
  remediation_queue q;
  q.submit(reset(gpu_a));
  q.submit(reset(gpu_b));
  auto d = q.submit(reboot());
  EXPECT_EQ(d.verdict, queue_verdict::queued);
  ASSERT_EQ(d.superseded.size(), 1u);
  EXPECT_EQ(d.superseded[0].plan.group, reset_group(gpu_b));
  ASSERT_EQ(q.waiting().size(), 1u);
  auto next = q.finish(reset_group(gpu_a));
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->plan.group, "restart");
}

// seed 000 §4.3 case 4
TEST(remediation_queue, reset_during_a_reboot_is_covered) {
  remediation_queue q;
  q.submit(reboot());
  auto d = q.submit(reset(gpu_a));
  EXPECT_EQ(d.verdict, queue_verdict::skipped_covered);
  EXPECT_EQ(d.covering_group, "restart");
  EXPECT_NE(d.reason.find("covered by restart in flight"), std::string::npos) << d.reason;
  q.finish("restart");
  EXPECT_EQ(q.submit(reset(gpu_a)).verdict, queue_verdict::start_now);
}

TEST(remediation_queue, a_waiting_reboot_covers_later_resets) {
  remediation_queue q;
  q.submit(reset(gpu_a));
  q.submit(reboot());
  auto d = q.submit(reset(gpu_b));
  EXPECT_EQ(d.verdict, queue_verdict::skipped_covered);
  EXPECT_NE(d.reason.find("waiting"), std::string::npos);
  EXPECT_EQ(q.submit(reboot()).verdict, queue_verdict::skipped_same);
}

TEST(remediation_queue, replace_covers_everything) {
  remediation_queue q;
  q.submit(replace());
  EXPECT_EQ(q.submit(reboot()).verdict, queue_verdict::skipped_covered);
  EXPECT_EQ(q.submit(reset(gpu_a)).verdict, queue_verdict::skipped_covered);
}

TEST(remediation_queue, manual_and_none_are_not_queued) {
  remediation_queue q;
  auto d = q.submit(
    {plan_remediation(recommended_action::contact_support, "", hopper()), "e", {}});
  EXPECT_EQ(d.verdict, queue_verdict::not_automatic);
  EXPECT_TRUE(q.idle());
}

TEST(remediation_queue, stale_completions_are_ignored_and_restore_works) {
  remediation_queue q;
  q.restore_in_flight(reboot());
  EXPECT_FALSE(q.finish(reset_group(gpu_a)).has_value());
  EXPECT_TRUE(q.in_flight().has_value());
  q.submit(reset(gpu_a));
  EXPECT_TRUE(q.waiting().empty());
  q.submit(replace());
  auto dropped = q.clear();
  EXPECT_EQ(dropped.size(), 1u);
  EXPECT_TRUE(q.idle());
}

// issue 19: an operator's remediation neither covers nor is covered by
// vigil's own (a reboot does not reseat a cable); only by itself.
TEST(remediation_queue, a_custom_remediation_is_covered_only_by_itself) {
  remediation_queue q;
  EXPECT_EQ(q.submit(custom("RESEAT_CABLE")).verdict, queue_verdict::start_now);
  auto same = q.submit(custom("RESEAT_CABLE", "again"));
  EXPECT_EQ(same.verdict, queue_verdict::skipped_same);
  EXPECT_EQ(q.submit(custom("REFLASH_NIC")).verdict, queue_verdict::queued);
  EXPECT_EQ(q.submit(reset(gpu_a)).verdict, queue_verdict::queued);
  auto r = q.submit(reboot());
  EXPECT_EQ(r.verdict, queue_verdict::queued);
  // The reboot dropped the waiting reset, never the waiting custom one.
  ASSERT_EQ(r.superseded.size(), 1u);
  EXPECT_EQ(r.superseded[0].plan.group, reset_group(gpu_a));
  ASSERT_EQ(q.waiting().size(), 2u);
  EXPECT_EQ(q.waiting()[0].plan.group, "custom-REFLASH_NIC");
  // A replace waiting does not cover a custom one asked for later either.
  q.submit(replace());
  EXPECT_EQ(q.submit(custom("FLUSH", "later")).verdict, queue_verdict::queued);
}

} // namespace
} // namespace vigil::control
