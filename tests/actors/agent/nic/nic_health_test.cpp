#include "actors/agent/nic/nic_health.hpp"

#include <gtest/gtest.h>

namespace vigil::agent {
namespace {

port_verdict verdict(const char* state, const char* phys,
                     const char* layer = "InfiniBand") {
  auto v = evaluate_port(state, phys, layer);
  EXPECT_TRUE(v.has_value()) << v.error().to_string();
  return v.has_value() ? *v : port_verdict{};
}

TEST(nic_health, parses_sysfs_states) {
  auto s = parse_sysfs_state("4: ACTIVE");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->number, 4);
  EXPECT_EQ(s->name, "ACTIVE");
  auto p = parse_sysfs_state("4: PortConfigurationTraining");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->name, "PortConfigurationTraining");
  EXPECT_EQ(parse_sysfs_state("7: Phy Test")->name, "Phy Test");
  EXPECT_FALSE(parse_sysfs_state("ACTIVE").has_value());
  EXPECT_FALSE(parse_sysfs_state("").has_value());
  EXPECT_FALSE(parse_sysfs_state(": ACTIVE").has_value());
  EXPECT_FALSE(parse_sysfs_state("x4: ACTIVE").has_value());
}

// seed 002 §3.4 step 3.
TEST(nic_health, active_linkup_is_healthy) {
  auto v = verdict("4: ACTIVE", "5: LinkUp");
  EXPECT_EQ(v.condition, port_condition::healthy);
  EXPECT_FALSE(v.fatal);
  EXPECT_EQ(v.action, recommended_action::none);
  EXPECT_EQ(verdict("4: ACTIVE", "5: LinkUp", "Ethernet").condition,
            port_condition::healthy);
}

// Appendix A: DOWN and Disabled are fatal, REPLACE_VM, on both link layers.
TEST(nic_health, down_and_disabled_are_fatal) {
  for (const char* layer : {"InfiniBand", "Ethernet"}) {
    for (auto [s, p] : {std::pair{"1: DOWN", "3: Disabled"},
                        {"1: DOWN", "2: Polling"},
                        {"1: DOWN", "5: LinkUp"},
                        {"4: ACTIVE", "3: Disabled"},
                        {"2: INIT", "3: Disabled"}}) {
      auto v = verdict(s, p, layer);
      EXPECT_EQ(v.condition, port_condition::unhealthy) << s << " " << p << " " << layer;
      EXPECT_TRUE(v.fatal) << s << " " << p << " " << layer;
      EXPECT_EQ(v.action, recommended_action::replace_vm);
    }
  }
}

// seed 002 §3.2: INIT/ARMED on InfiniBand, Polling and LinkErrorRecovery are non-fatal.
TEST(nic_health, transient_states_are_non_fatal) {
  for (auto [s, p, layer] : {std::tuple{"2: INIT", "5: LinkUp", "InfiniBand"},
                             {"3: ARMED", "5: LinkUp", "InfiniBand"},
                             {"4: ACTIVE", "2: Polling", "InfiniBand"},
                             {"4: ACTIVE", "6: LinkErrorRecovery", "InfiniBand"},
                             {"4: ACTIVE", "2: Polling", "Ethernet"},
                             {"4: ACTIVE", "6: LinkErrorRecovery", "Ethernet"}}) {
    auto v = verdict(s, p, layer);
    EXPECT_EQ(v.condition, port_condition::unhealthy) << s << " " << p << " " << layer;
    EXPECT_FALSE(v.fatal) << s << " " << p << " " << layer;
    EXPECT_EQ(v.action, recommended_action::none);
  }
}

// seed 002 §3.2: INIT/ARMED on Ethernet is not reported.
TEST(nic_health, init_and_armed_on_ethernet_are_unreported) {
  EXPECT_EQ(verdict("2: INIT", "5: LinkUp", "Ethernet").condition,
            port_condition::unreported);
  EXPECT_EQ(verdict("3: ARMED", "2: Polling", "Ethernet").condition,
            port_condition::unreported);
}

// seed 002 §3.4 step 4: other unhealthy pairs cross into FATAL.
TEST(nic_health, other_unhealthy_pairs_are_fatal) {
  EXPECT_TRUE(verdict("4: ACTIVE", "1: Sleep").fatal);
  EXPECT_TRUE(verdict("4: ACTIVE", "7: Phy Test").fatal);
  EXPECT_TRUE(verdict("0: NOP", "5: LinkUp").fatal);
}

TEST(nic_health, unparseable_values_fail_naming_the_file) {
  auto v = evaluate_port("ACTIVE", "5: LinkUp", "InfiniBand");
  ASSERT_FALSE(v.has_value());
  EXPECT_EQ(v.error().where, "state");
  auto p = evaluate_port("4: ACTIVE", "", "InfiniBand");
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().where, "phys_state");
}

// seed 002 §13.1 messages.
TEST(nic_health, messages_follow_the_seed) {
  EXPECT_EQ(
    port_message("mlx5_0", 1, "InfiniBand", verdict("1: DOWN", "3: Disabled"), ""),
    "Port mlx5_0 port 1: state DOWN, phys_state Disabled");
  EXPECT_EQ(port_message("mlx5_0", 1, "Ethernet",
                         verdict("1: DOWN", "3: Disabled", "Ethernet"), "down"),
            "RoCE port mlx5_0 port 1: state DOWN, phys_state Disabled, operstate down");
  EXPECT_EQ(
    port_message("mlx5_0", 1, "InfiniBand", verdict("4: ACTIVE", "5: LinkUp"), ""),
    "Port mlx5_0 port 1: healthy (ACTIVE, LinkUp)");
  EXPECT_EQ(port_message("mlx5_0", 1, "Ethernet",
                         verdict("4: ACTIVE", "5: LinkUp", "Ethernet"), "up"),
            "RoCE port mlx5_0 port 1: healthy (ACTIVE, LinkUp, operstate up)");
  EXPECT_EQ(port_message("mlx5_0", 1, "Ethernet",
                         verdict("1: DOWN", "3: Disabled", "Ethernet"), ""),
            "RoCE port mlx5_0 port 1: state DOWN, phys_state Disabled");
}

using kind = counter_finding::kind;
using counters = std::map<std::string, std::uint64_t>;

const counters no_thresholds;

// Appendix A "delta > 0 (runtime)": the first reading is a baseline, then
// every rise is an event of its own.
TEST(nic_health, link_downed_needs_a_delta) {
  counter_history history;
  EXPECT_TRUE(evaluate_counters(history, {{"link_downed", 1}}, no_thresholds).empty());
  EXPECT_EQ(history.baselines.at("link_downed"), 1u);
  auto f = evaluate_counters(history, {{"link_downed", 4}}, no_thresholds);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].what, kind::increased);
  EXPECT_EQ(f[0].previous, 1u);
  EXPECT_EQ(f[0].current, 4u);
  EXPECT_EQ(counter_message("mlx5_0", 1, "InfiniBand", f[0]),
            "Port mlx5_0 port 1: link_downed increased by 3 (1 -> 4)");
  EXPECT_TRUE(evaluate_counters(history, {{"link_downed", 4}}, no_thresholds).empty());
  f = evaluate_counters(history, {{"link_downed", 5}}, no_thresholds);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].previous, 4u);
  // A counter that went down was reset: a new baseline, no event.
  EXPECT_TRUE(evaluate_counters(history, {{"link_downed", 0}}, no_thresholds).empty());
  EXPECT_EQ(history.baselines.at("link_downed"), 0u);
  EXPECT_TRUE(history.breached.empty());
}

// Old errors are history: whatever a counter holds when vigil first reads it
// reports nothing, on every counter.
TEST(nic_health, first_readings_are_baselines) {
  counter_history history;
  const counters old_errors{{"link_downed", 40},
                            {"excessive_buffer_overrun_errors", 3},
                            {"local_link_integrity_errors", 7},
                            {"rnr_nak_retry_err", 1200}};
  EXPECT_TRUE(evaluate_counters(history, old_errors, no_thresholds).empty());
  EXPECT_EQ(history.baselines, old_errors);
  EXPECT_EQ(history.readings, old_errors);
  EXPECT_TRUE(evaluate_counters(history, old_errors, no_thresholds).empty());
  // A counter first seen later (a file that appeared) is a baseline too.
  EXPECT_TRUE(evaluate_counters(history, {{"symbol_error", 9}}, no_thresholds).empty());
  // A counter missing from one reading keeps its baseline.
  EXPECT_EQ(history.baselines.at("rnr_nak_retry_err"), 1200u);
}

// Appendix A "> 0" as a rise since the baseline: fatal once, until it clears.
TEST(nic_health, other_counters_breach_on_a_rise_once) {
  for (const char* name : {"excessive_buffer_overrun_errors",
                           "local_link_integrity_errors", "rnr_nak_retry_err"}) {
    counter_history history;
    EXPECT_TRUE(evaluate_counters(history, {{name, 2}}, no_thresholds).empty()) << name;
    auto f = evaluate_counters(history, {{name, 3}}, no_thresholds);
    ASSERT_EQ(f.size(), 1u) << name;
    EXPECT_EQ(f[0].what, kind::breached);
    EXPECT_EQ(f[0].counter, name);
    EXPECT_EQ(f[0].baseline, 2u);
    EXPECT_EQ(f[0].current, 3u);
    EXPECT_TRUE(evaluate_counters(history, {{name, 5}}, no_thresholds).empty()) << name;
    EXPECT_EQ(history.breached, std::set<std::string>{name});
  }
  counter_history history;
  evaluate_counters(history, {{"rnr_nak_retry_err", 7}}, no_thresholds);
  auto f = evaluate_counters(history, {{"rnr_nak_retry_err", 9}}, no_thresholds);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(counter_message("mlx5_0", 1, "Ethernet", f[0]),
            "RoCE port mlx5_0 port 1: rnr_nak_retry_err rose by 2 above its baseline "
            "(7 -> 9, threshold 0)");
}

// A breach clears when the rise is within the threshold again: after a reset,
// which also sets a new baseline, or a raised threshold.
TEST(nic_health, a_breach_clears_on_a_reset_or_a_raised_threshold) {
  const std::string name = "local_link_integrity_errors";
  counter_history history;
  evaluate_counters(history, {{name, 4}}, no_thresholds);
  ASSERT_EQ(evaluate_counters(history, {{name, 9}}, no_thresholds).size(), 1u);
  auto cleared = evaluate_counters(history, {{name, 0}}, no_thresholds);
  ASSERT_EQ(cleared.size(), 1u);
  EXPECT_EQ(cleared[0].what, kind::cleared);
  EXPECT_EQ(counter_message("mlx5_0", 1, "InfiniBand", cleared[0]),
            "Port mlx5_0 port 1: local_link_integrity_errors was reset (9 -> 0): "
            "cleared, new baseline");
  EXPECT_TRUE(history.breached.empty());
  EXPECT_EQ(history.baselines.at(name), 0u);
  ASSERT_EQ(evaluate_counters(history, {{name, 1}}, no_thresholds).size(), 1u);
  auto raised = evaluate_counters(history, {{name, 3}}, {{name, 5}});
  ASSERT_EQ(raised.size(), 1u);
  EXPECT_EQ(raised[0].what, kind::cleared);
  EXPECT_EQ(counter_message("mlx5_0", 1, "InfiniBand", raised[0]),
            "Port mlx5_0 port 1: local_link_integrity_errors rose by 3, within its "
            "threshold 5 again");
}

// A threshold above 0 lets small rises pass; above it the rise is fatal.
TEST(nic_health, thresholds_suppress_small_rises) {
  const counters thresholds{{"rnr_nak_retry_err", 100}, {"link_downed", 2}};
  counter_history history;
  evaluate_counters(history, {{"rnr_nak_retry_err", 50}, {"link_downed", 0}}, thresholds);
  EXPECT_TRUE(evaluate_counters(history, {{"rnr_nak_retry_err", 150}, {"link_downed", 1}},
                                thresholds)
                .empty());
  EXPECT_TRUE(evaluate_counters(history, {{"rnr_nak_retry_err", 150}, {"link_downed", 2}},
                                thresholds)
                .empty());
  auto f = evaluate_counters(history, {{"rnr_nak_retry_err", 151}, {"link_downed", 3}},
                             thresholds);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].counter, "link_downed");
  EXPECT_EQ(f[0].what, kind::increased);
  EXPECT_EQ(f[0].previous, 2u); // the poll's own rise, one link down
  EXPECT_EQ(f[1].counter, "rnr_nak_retry_err");
  EXPECT_EQ(f[1].what, kind::breached);
  EXPECT_EQ(f[1].threshold, 100u);
  EXPECT_EQ(counter_message("mlx5_0", 1, "InfiniBand", f[1]),
            "Port mlx5_0 port 1: rnr_nak_retry_err rose by 101 above its baseline "
            "(50 -> 151, threshold 100)");
}

// A state file of an older vigil kept readings but no baselines.
TEST(nic_health, readings_without_a_baseline_serve_as_one) {
  counter_history history;
  history.readings = {{"excessive_buffer_overrun_errors", 6}};
  EXPECT_TRUE(
    evaluate_counters(history, {{"excessive_buffer_overrun_errors", 6}}, no_thresholds)
      .empty());
  EXPECT_EQ(history.baselines.at("excessive_buffer_overrun_errors"), 6u);
  EXPECT_EQ(
    evaluate_counters(history, {{"excessive_buffer_overrun_errors", 7}}, no_thresholds)
      .size(),
    1u);
}

} // namespace
} // namespace vigil::agent
