#include "actors/control/rules/node_conditions.hpp"

#include <gtest/gtest.h>

namespace vigil::control {
namespace {

using namespace std::chrono_literals;

const wall_time t0 = from_unix(1'800'000'000, 0);

kube_condition ready(std::string status, wall_time since) {
  return {"Ready", std::move(status), "NodeStatusUnknown",
          "Kubelet stopped posting node status.", since};
}

TEST(node_conditions, not_ready_is_due_after_not_ready_after) {
  node_condition_settings s;
  auto pending = judge_node_conditions({ready("Unknown", t0)}, t0 + 299s, s);
  EXPECT_TRUE(pending.findings.empty());
  ASSERT_TRUE(pending.recheck_at);
  EXPECT_EQ(*pending.recheck_at, t0 + 300s);
  auto due = judge_node_conditions({ready("False", t0)}, t0 + 300s, s);
  ASSERT_EQ(due.findings.size(), 1u);
  const auto& f = due.findings[0];
  EXPECT_EQ(f.check, not_ready_check);
  EXPECT_TRUE(f.unhealthy);
  EXPECT_EQ(f.code, "False");
  EXPECT_NE(f.message.find("Ready is False (NodeStatusUnknown) for 300 s"),
            std::string::npos)
    << f.message;
  EXPECT_FALSE(due.recheck_at);
  auto fine = judge_node_conditions({ready("True", t0)}, t0 + 1h, s);
  ASSERT_EQ(fine.findings.size(), 1u);
  EXPECT_FALSE(fine.findings[0].unhealthy);
  // No transition time: counted from now. Turned off: nothing.
  EXPECT_TRUE(judge_node_conditions({ready("Unknown", t0)}, t0, s).recheck_at);
  s.not_ready_after = 0s;
  EXPECT_TRUE(judge_node_conditions({ready("Unknown", t0)}, t0 + 1h, s).findings.empty());
}

TEST(node_conditions, problem_conditions_are_true_while_the_problem_lasts) {
  node_condition_settings s;
  std::vector<kube_condition> conditions = {
    {"KernelDeadlock", "True", "DockerHung", "task docker:7 blocked", t0},
    {"ReadonlyFilesystem", "False", "FilesystemIsNotReadOnly", "", t0},
    {"MemoryPressure", "True", "KubeletHasInsufficientMemory", "", t0}, // not watched
    {"NTPProblem", "True", "NTPIsDown", "", t0}};                       // not by default
  auto v = judge_node_conditions(conditions, t0, s);
  ASSERT_EQ(v.findings.size(), 2u);
  EXPECT_EQ(v.findings[0].check, "KernelDeadlock");
  EXPECT_TRUE(v.findings[0].unhealthy);
  EXPECT_EQ(v.findings[0].code, "DockerHung");
  EXPECT_FALSE(v.findings[1].unhealthy);
  s.problem_types.push_back("NTPProblem");
  EXPECT_EQ(judge_node_conditions(conditions, t0, s).findings.size(), 3u);
}

TEST(node_conditions, events_are_vigils_own_and_their_ids_are_stable) {
  node_condition_settings s;
  condition_finding f{not_ready_check, true, "Unknown", "stopped talking", t0};
  auto e = condition_event("node-1", f, s, t0 + 300s);
  EXPECT_EQ(e.agent, node_conditions_agent);
  EXPECT_EQ(e.component_class, "Node");
  EXPECT_EQ(e.check_name, "NodeNotReady");
  EXPECT_TRUE(e.is_fatal);
  EXPECT_FALSE(e.is_healthy);
  EXPECT_EQ(e.action, recommended_action::restart_bm);
  EXPECT_EQ(e.error_codes, std::vector<std::string>{"Unknown"});
  EXPECT_TRUE(e.entities.empty());
  EXPECT_EQ(e.id, condition_event("node-1", f, s, t0 + 900s).id);
  auto cleared =
    condition_event("node-1", {not_ready_check, false, "", "Ready", t0 + 1h}, s, t0 + 1h);
  EXPECT_TRUE(cleared.is_healthy);
  EXPECT_TRUE(cleared.error_codes.empty());
  EXPECT_NE(cleared.id, e.id);
  auto problem =
    condition_event("node-1", {"KernelDeadlock", true, "DockerHung", "", t0}, s, t0);
  EXPECT_EQ(problem.action, recommended_action::none);
  EXPECT_TRUE(problem.is_fatal);
}

} // namespace
} // namespace vigil::control
