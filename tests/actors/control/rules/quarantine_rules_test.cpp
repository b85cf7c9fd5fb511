#include "actors/control/rules/quarantine_rules.hpp"

#include <algorithm>

#include <gtest/gtest.h>

namespace vigil::control {
namespace {

const std::string gpu_a = "GPU-aaaa";
const std::string gpu_b = "GPU-bbbb";
const taint gpu_taint{"vigil.io/gpu-fault", "true", taint_effect::no_schedule};

quarantine_policy default_policy() {
  quarantine_policy p;
  quarantine_rule fatal_gpu;
  fatal_gpu.name = "fatal-gpu";
  fatal_gpu.match.component_classes = {"GPU"};
  fatal_gpu.match.is_fatal = true;
  fatal_gpu.taints = {gpu_taint};
  quarantine_rule nic;
  nic.name = "nic-down";
  nic.match.check_names = {"NICLinkState"};
  nic.match.entity_types = {"NICPort"};
  p.rules = {fatal_gpu, nic};
  return p;
}

health_event xid(const std::string& uuid, bool healthy = false) {
  health_event e;
  e.agent = "syslog-health-monitor";
  e.component_class = "GPU";
  e.check_name = "SysLogsXIDError";
  e.is_fatal = true;
  e.is_healthy = healthy;
  e.action = recommended_action::component_reset;
  e.error_codes = healthy ? std::vector<std::string>{} : std::vector<std::string>{"48"};
  e.entities = {{"PCI", "0000:" + uuid.substr(4, 2) + ":00"}, {"GPU_UUID", uuid}};
  e.node_name = "node1";
  return e;
}

health_event nic_down(const std::string& port) {
  health_event e;
  e.agent = "vigil-nic-monitor";
  e.component_class = "NIC";
  e.check_name = "NICLinkState";
  e.is_fatal = true;
  e.entities = {{"NICPort", port}};
  e.node_name = "node1";
  return e;
}

// Applies the decision to the observation, as the node actor would.
void converge(node_observation& obs, const quarantine_decision& d) {
  if (d.cordon)
    obs.unschedulable = true;
  if (d.uncordon)
    obs.unschedulable = false;
  for (const auto& t : d.add_taints)
    obs.taints.push_back(t);
  for (const auto& t : d.remove_taints)
    obs.taints.erase(std::find(obs.taints.begin(), obs.taints.end(), t));
  for (const auto& c : d.set_conditions)
    obs.conditions[c.type] = c;
  if (d.annotation)
    obs.annotation = *d.annotation;
  obs.cordon_owned = d.cordon_owned_after;
  obs.owned_taints = d.owned_taints_after;
}

struct node_fixture : ::testing::Test {
  quarantine_policy policy = default_policy();
  active_events active;
  node_observation obs;

  quarantine_decision step(const health_event& e, bool allowed = true) {
    active.apply(e, policy);
    quarantine_context context;
    context.new_quarantine_allowed = allowed;
    auto d = decide_quarantine(obs, active, policy, context);
    converge(obs, d);
    return d;
  }
};

TEST(quarantine_rules, first_matching_rule_wins_and_filters_combine) {
  auto policy = default_policy();
  auto e = xid(gpu_a);
  ASSERT_NE(match_rule(e, policy.rules), nullptr);
  EXPECT_EQ(match_rule(e, policy.rules)->name, "fatal-gpu");
  e.is_fatal = false;
  EXPECT_EQ(match_rule(e, policy.rules), nullptr);
  policy.rules[0].match.is_fatal.reset();
  policy.rules[0].match.error_codes = {"79", "48"};
  EXPECT_NE(match_rule(e, policy.rules), nullptr);
  policy.rules[0].match.actions = {recommended_action::restart_bm};
  EXPECT_EQ(match_rule(e, policy.rules), nullptr);
  auto n = nic_down("mlx5_0/1");
  EXPECT_EQ(match_rule(n, policy.rules)->name, "nic-down");
  n.entities = {{"NIC", "mlx5_0"}};
  EXPECT_EQ(match_rule(n, policy.rules), nullptr);
}

TEST_F(node_fixture, unhealthy_event_cordons_taints_and_sets_condition) {
  auto d = step(xid(gpu_a));
  EXPECT_TRUE(d.quarantined);
  EXPECT_TRUE(d.cordon);
  EXPECT_EQ(d.add_taints, std::vector<taint>{gpu_taint});
  ASSERT_EQ(d.set_conditions.size(), 1u);
  EXPECT_EQ(d.set_conditions[0].type, "GPUHealthy");
  EXPECT_FALSE(d.set_conditions[0].healthy);
  ASSERT_TRUE(d.annotation);
  EXPECT_NE(d.annotation->find(gpu_a), std::string::npos);
  EXPECT_TRUE(obs.cordon_owned);
  // Level-based: deciding again on the converged node changes nothing.
  EXPECT_TRUE(decide_quarantine(obs, active, policy).no_change(obs));
}

TEST_F(node_fixture, healthy_event_for_a_different_gpu_does_not_uncordon) {
  step(xid(gpu_a));
  auto d = step(xid(gpu_b, true));
  EXPECT_FALSE(d.uncordon);
  EXPECT_TRUE(d.remove_taints.empty());
  EXPECT_TRUE(obs.unschedulable);
  EXPECT_EQ(active.size(), 2u); // GPU_UUID and PCI of gpu_a
}

TEST_F(node_fixture, healthy_event_for_the_gpu_uncordons_and_removes_taints) {
  step(xid(gpu_a));
  auto healthy = xid(gpu_a, true);
  healthy.entities = {{"GPU_UUID", gpu_a}}; // seed 000 §1.2: PCI may be missing
  auto d = step(healthy);
  EXPECT_TRUE(active.empty());
  EXPECT_TRUE(d.uncordon);
  EXPECT_EQ(d.remove_taints, std::vector<taint>{gpu_taint});
  ASSERT_EQ(d.set_conditions.size(), 1u);
  EXPECT_TRUE(d.set_conditions[0].healthy);
  EXPECT_EQ(d.annotation, std::string());
  EXPECT_FALSE(obs.unschedulable);
  EXPECT_TRUE(obs.taints.empty());
}

TEST_F(node_fixture, stays_quarantined_until_every_gpu_recovered) {
  step(xid(gpu_a));
  step(xid(gpu_b));
  EXPECT_FALSE(step(xid(gpu_a, true)).uncordon);
  EXPECT_TRUE(step(xid(gpu_b, true)).uncordon);
}

TEST_F(node_fixture, healthy_event_without_entities_clears_the_whole_check) {
  step(xid(gpu_a));
  step(xid(gpu_b));
  step(nic_down("mlx5_0/1"));
  auto reboot = xid(gpu_a, true);
  reboot.entities.clear();
  auto d = step(reboot);
  EXPECT_FALSE(d.uncordon); // the NIC port is still down
  ASSERT_EQ(active.size(), 1u);
  EXPECT_EQ(active.records()[0].check_name, "NICLinkState");
  // GPUHealthy back to true, NICHealthy stays false.
  ASSERT_EQ(d.set_conditions.size(), 1u);
  EXPECT_EQ(d.set_conditions[0].type, "GPUHealthy");
  EXPECT_TRUE(d.set_conditions[0].healthy);
  EXPECT_FALSE(obs.conditions["NICHealthy"].healthy);
}

// A healthy event naming error codes (a cancellation, a counter that
// recovered) clears only the records raised with those codes: cancelling XID
// 163 leaves the XID 48 on the same GPU, and the node quarantined.
TEST_F(node_fixture, a_cancellation_clears_only_the_codes_it_names) {
  step(xid(gpu_a));
  auto power = xid(gpu_a);
  power.error_codes = {"163"};
  step(power);
  EXPECT_EQ(active.size(), 4u); // GPU_UUID and PCI, for each code
  auto cancel = xid(gpu_a, true);
  cancel.error_codes = {"163"};
  auto d = step(cancel);
  EXPECT_FALSE(d.uncordon);
  ASSERT_EQ(active.size(), 2u);
  for (const auto& r : active.records())
    EXPECT_EQ(r.error_codes, std::vector<std::string>{"48"});
  // A code nobody raised clears nothing; a healthy event with no code, all.
  cancel.error_codes = {"999"};
  step(cancel);
  EXPECT_EQ(active.size(), 2u);
  cancel.error_codes.clear();
  cancel.entities = {{"GPU_UUID", gpu_a}};
  EXPECT_TRUE(step(cancel).uncordon);
  EXPECT_TRUE(active.empty());
}

TEST(quarantine_rules, healthy_event_clears_is_scoped_by_agent_check_entity_and_code) {
  auto healthy = xid(gpu_a, true);
  const entity gpu{"GPU_UUID", gpu_a};
  const std::vector<std::string> codes{"48"};
  EXPECT_TRUE(healthy_event_clears(healthy, "syslog-health-monitor", "SysLogsXIDError",
                                   gpu, codes));
  EXPECT_FALSE(
    healthy_event_clears(healthy, "other-agent", "SysLogsXIDError", gpu, codes));
  EXPECT_FALSE(
    healthy_event_clears(healthy, "syslog-health-monitor", "Other", gpu, codes));
  EXPECT_FALSE(healthy_event_clears(healthy, "syslog-health-monitor", "SysLogsXIDError",
                                    {"GPU_UUID", gpu_b}, codes));
  healthy.entities.clear(); // the whole check
  EXPECT_TRUE(healthy_event_clears(healthy, "syslog-health-monitor", "SysLogsXIDError",
                                   {"GPU_UUID", gpu_b}, codes));
  healthy.error_codes = {"79", "48"};
  EXPECT_TRUE(healthy_event_clears(healthy, "syslog-health-monitor", "SysLogsXIDError",
                                   gpu, codes));
  EXPECT_FALSE(healthy_event_clears(healthy, "syslog-health-monitor", "SysLogsXIDError",
                                    gpu, {"13"}));
  EXPECT_FALSE(
    healthy_event_clears(healthy, "syslog-health-monitor", "SysLogsXIDError", gpu, {}));
}

TEST_F(node_fixture, node_cordoned_by_someone_else_is_never_uncordoned) {
  obs.unschedulable = true; // an administrator cordoned it
  auto d = step(xid(gpu_a));
  EXPECT_FALSE(d.cordon);
  EXPECT_FALSE(obs.cordon_owned);
  d = step(xid(gpu_a, true));
  EXPECT_FALSE(d.uncordon);
  EXPECT_TRUE(obs.unschedulable);
}

TEST_F(node_fixture, foreign_taint_is_never_removed) {
  obs.taints = {gpu_taint}; // same taint, put there by someone else
  auto d = step(xid(gpu_a));
  EXPECT_TRUE(d.add_taints.empty());
  EXPECT_TRUE(obs.owned_taints.empty());
  d = step(xid(gpu_a, true));
  EXPECT_TRUE(d.remove_taints.empty());
  EXPECT_EQ(obs.taints, std::vector<taint>{gpu_taint});
}

TEST_F(node_fixture, unmatched_skipped_and_store_only_events_do_not_quarantine) {
  auto benign = xid(gpu_a);
  benign.is_fatal = false;
  EXPECT_EQ(active.apply(benign, policy).ignored, "no quarantine rule matches");
  auto skipped = xid(gpu_a);
  skipped.quarantine_overrides = stage_override{false, true};
  EXPECT_EQ(active.apply(skipped, policy).ignored, "quarantineOverrides.skip");
  auto store = xid(gpu_a);
  store.strategy = processing_strategy::store_only;
  EXPECT_FALSE(active.apply(store, policy).changed);
  store.strategy = processing_strategy::store_and_analyse;
  EXPECT_FALSE(active.apply(store, policy).changed);
  EXPECT_TRUE(active.empty());
  EXPECT_FALSE(decide_quarantine(obs, active, policy).cordon);
}

TEST_F(node_fixture, force_override_quarantines_without_a_rule) {
  auto e = xid(gpu_a);
  e.is_fatal = false;
  e.quarantine_overrides = stage_override{true, false};
  EXPECT_EQ(active.apply(e, policy).rule, forced_rule_name);
  auto d = decide_quarantine(obs, active, policy);
  EXPECT_TRUE(d.cordon);
  EXPECT_TRUE(d.add_taints.empty());
}

TEST_F(node_fixture, opt_out_label_suppresses_cordon_but_keeps_conditions) {
  obs.labels[policy.opt_out_label] = "true";
  auto d = step(xid(gpu_a));
  EXPECT_TRUE(d.opted_out);
  EXPECT_FALSE(d.cordon);
  EXPECT_TRUE(d.add_taints.empty());
  EXPECT_EQ(d.set_conditions.size(), 1u);
  EXPECT_TRUE(d.annotation);
}

TEST_F(node_fixture, breaker_holds_new_cordon_but_always_releases) {
  auto d = step(xid(gpu_a), false);
  EXPECT_TRUE(d.held_by_breaker);
  EXPECT_FALSE(d.cordon);
  EXPECT_TRUE(d.add_taints.empty());
  d = step(xid(gpu_b), true);
  EXPECT_TRUE(d.cordon);
  quarantine_context refusing;
  refusing.new_quarantine_allowed = false;
  d = decide_quarantine(obs, active_events{}, policy, refusing);
  EXPECT_TRUE(d.uncordon);
  EXPECT_EQ(d.remove_taints.size(), 1u);
}

TEST_F(node_fixture, rule_without_cordon_only_taints_and_custom_condition) {
  policy.rules[1].cordon = false;
  policy.rules[1].taints = {{"vigil.io/nic", "down", taint_effect::prefer_no_schedule}};
  policy.rules[1].condition_type = "NICPortHealthy";
  auto d = step(nic_down("mlx5_0/1"));
  EXPECT_FALSE(d.cordon);
  EXPECT_EQ(d.add_taints.size(), 1u);
  ASSERT_EQ(d.set_conditions.size(), 1u);
  EXPECT_EQ(d.set_conditions[0].type, "NICPortHealthy");
}

TEST(quarantine_rules, taint_effect_round_trips) {
  for (auto e : {taint_effect::no_schedule, taint_effect::prefer_no_schedule,
                 taint_effect::no_execute})
    EXPECT_EQ(parse_taint_effect(to_string(e)), e);
  EXPECT_FALSE(parse_taint_effect("Never"));
}

} // namespace
// A fabric incident's ports (seed 002's fabric correlation): the node stays
// schedulable, with a condition and a PreferNoSchedule taint until they are up;
// the breaker has no say over a taint that takes no capacity away.
TEST_F(node_fixture, ports_down_in_a_fabric_incident_get_a_condition_and_a_soft_taint) {
  quarantine_context context;
  context.new_quarantine_allowed = false; // the breaker refuses: irrelevant here
  context.fabric_ports = {"mlx5_0/1", "mlx5_3/1"};
  auto d = decide_quarantine(obs, active, policy, context);
  EXPECT_FALSE(d.cordon);
  EXPECT_FALSE(d.quarantined);
  EXPECT_FALSE(d.held_by_breaker);
  const taint soft{fabric_taint_key, "true", taint_effect::prefer_no_schedule};
  EXPECT_EQ(d.add_taints, std::vector<taint>{soft});
  EXPECT_FALSE(starts_quarantine(d));
  ASSERT_EQ(d.set_conditions.size(), 1u);
  EXPECT_EQ(d.set_conditions[0].type, fabric_condition_type);
  EXPECT_FALSE(d.set_conditions[0].healthy);
  EXPECT_EQ(d.set_conditions[0].reason, "FabricIncident");
  EXPECT_NE(d.set_conditions[0].message.find("mlx5_0/1, mlx5_3/1"), std::string::npos);
  converge(obs, d);
  EXPECT_TRUE(decide_quarantine(obs, active, policy, context).no_change(obs));

  // Ports up: the taint goes, the condition turns healthy.
  context.fabric_ports.clear();
  d = decide_quarantine(obs, active, policy, context);
  EXPECT_EQ(d.remove_taints, std::vector<taint>{soft});
  ASSERT_EQ(d.set_conditions.size(), 1u);
  EXPECT_TRUE(d.set_conditions[0].healthy);
  EXPECT_EQ(d.set_conditions[0].reason, "PortsUp");
}

TEST_F(node_fixture, a_hard_taint_or_cordon_needs_the_breaker_a_soft_one_does_not) {
  quarantine_decision d;
  d.add_taints = {{"a", "b", taint_effect::prefer_no_schedule}};
  EXPECT_FALSE(starts_quarantine(d));
  d.add_taints.push_back(gpu_taint);
  EXPECT_TRUE(starts_quarantine(d));
  d.add_taints.clear();
  d.cordon = true;
  EXPECT_TRUE(starts_quarantine(d));
}

TEST_F(node_fixture, an_opted_out_node_gets_no_fabric_taint_but_the_condition) {
  obs.labels[policy.opt_out_label] = "true";
  quarantine_context context;
  context.fabric_ports = {"mlx5_0/1"};
  auto d = decide_quarantine(obs, active, policy, context);
  EXPECT_TRUE(d.add_taints.empty());
  ASSERT_EQ(d.set_conditions.size(), 1u);
  EXPECT_EQ(d.set_conditions[0].type, fabric_condition_type);
}

} // namespace vigil::control
