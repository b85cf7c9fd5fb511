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

// Appendix A: link_downed delta > 0 at runtime; the first reading is a baseline.
TEST(nic_health, link_downed_needs_a_delta) {
  std::map<std::string, std::uint64_t> now{{"link_downed", 4}};
  EXPECT_TRUE(evaluate_counters(std::nullopt, {}, now).empty());
  auto f =
    evaluate_counters(std::map<std::string, std::uint64_t>{{"link_downed", 1}}, {}, now);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].what, kind::increased);
  EXPECT_EQ(f[0].previous, 1u);
  EXPECT_EQ(f[0].current, 4u);
  EXPECT_EQ(counter_message("mlx5_0", 1, "InfiniBand", f[0]),
            "Port mlx5_0 port 1: link_downed increased by 3 (1 -> 4)");
  EXPECT_TRUE(
    evaluate_counters(std::map<std::string, std::uint64_t>{{"link_downed", 4}}, {}, now)
      .empty());
  // A counter that went down was reset: a new baseline, no event.
  EXPECT_TRUE(
    evaluate_counters(std::map<std::string, std::uint64_t>{{"link_downed", 9}}, {}, now)
      .empty());
}

// Appendix A: the other counters are fatal above 0, once, until they clear.
TEST(nic_health, other_counters_breach_above_zero_once) {
  for (const char* name : {"excessive_buffer_overrun_errors",
                           "local_link_integrity_errors", "rnr_nak_retry_err"}) {
    std::map<std::string, std::uint64_t> now{{name, 2}};
    auto f = evaluate_counters(std::nullopt, {}, now);
    ASSERT_EQ(f.size(), 1u) << name;
    EXPECT_EQ(f[0].what, kind::breached);
    EXPECT_EQ(f[0].counter, name);
    EXPECT_TRUE(evaluate_counters(now, {name}, {{name, 5}}).empty()) << name;
    auto cleared = evaluate_counters(now, {name}, {{name, 0}});
    ASSERT_EQ(cleared.size(), 1u);
    EXPECT_EQ(cleared[0].what, kind::cleared);
    EXPECT_TRUE(evaluate_counters(std::nullopt, {}, {{name, 0}}).empty());
  }
  auto f = evaluate_counters(std::nullopt, {}, {{"rnr_nak_retry_err", 7}});
  EXPECT_EQ(counter_message("mlx5_0", 1, "Ethernet", f[0]),
            "RoCE port mlx5_0 port 1: rnr_nak_retry_err is 7 (threshold > 0)");
}

} // namespace
} // namespace vigil::agent
