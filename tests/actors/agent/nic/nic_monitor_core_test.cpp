// The NIC poller's port states: the first poll's baselines, transitions
// between healthy and unhealthy states, escalation through card homogeneity,
// and what survives a pod restart or a reboot.
#include "actors/agent/nic/nic_monitor_core.hpp"

#include <gtest/gtest.h>

#include "tests/actors/agent/nic/nic_core_fixture.hpp"

namespace vigil::agent {
namespace {

using namespace test_support;

// seed 002 §3.4 first poll, §13.1 fields.
TEST_F(nic_core, first_poll_sends_healthy_baselines) {
  start();
  auto r = poll();
  EXPECT_TRUE(r.baseline);
  ASSERT_EQ(r.events.size(), 4u) << describe(r.events);
  const auto& e = r.events[0];
  EXPECT_EQ(e.agent, "nic-health-monitor");
  EXPECT_EQ(e.component_class, "NIC");
  EXPECT_EQ(e.check_name, "InfiniBandStateCheck");
  EXPECT_EQ(e.message, "Port mlx5_0 port 1: healthy (ACTIVE, LinkUp)");
  EXPECT_TRUE(e.is_healthy);
  EXPECT_FALSE(e.is_fatal);
  EXPECT_EQ(e.action, recommended_action::none);
  EXPECT_EQ(e.entities, (std::vector<entity>{{"NIC", "mlx5_0"}, {"NICPort", "1"}}));
  EXPECT_EQ(e.node_name, "gpu-node-42");
  EXPECT_EQ(e.generated, now);
  EXPECT_EQ(e.metadata.at("pci_address"), "0000:0c:00.0");
  EXPECT_EQ(e.metadata.at("role"), "Compute");
  EXPECT_EQ(e.id.rfind("nic-", 0), 0u);
  // The management NIC (NUMA 1) is classified but not monitored.
  EXPECT_EQ(r.roles.at("mlx5_9").role, nic_role::management);
  EXPECT_TRUE(about(r.events, "mlx5_9").empty());
  // Every event is a valid HealthEvent on the wire.
  for (const auto& ev : r.events) {
    auto decoded = decode_health_event(encode_health_event(ev));
    ASSERT_TRUE(decoded.has_value()) << decoded.error().to_string();
    EXPECT_TRUE(*decoded == ev);
  }
}

TEST_F(nic_core, steady_state_is_silent) {
  settle();
  EXPECT_TRUE(poll().events.empty());
  EXPECT_TRUE(poll(60).events.empty());
}

// seed 002 §3.4 step 4: healthy → unhealthy is one fatal event.
TEST_F(nic_core, healthy_to_down_is_fatal) {
  settle();
  down("mlx5_1");
  auto r = poll();
  ASSERT_EQ(r.events.size(), 1u) << describe(r.events);
  const auto& e = r.events[0];
  EXPECT_EQ(e.message, "Port mlx5_1 port 1: state DOWN, phys_state Disabled");
  EXPECT_TRUE(e.is_fatal);
  EXPECT_FALSE(e.is_healthy);
  EXPECT_EQ(e.action, recommended_action::replace_vm);
  EXPECT_EQ(e.entities, (std::vector<entity>{{"NIC", "mlx5_1"}, {"NICPort", "1"}}));
  EXPECT_TRUE(poll().events.empty()) << describe(last.events);
}

// seed 002 §3.4 step 4: unhealthy → healthy is a recovery.
TEST_F(nic_core, down_to_active_is_a_recovery) {
  settle();
  down("mlx5_1");
  poll();
  up("mlx5_1");
  auto r = poll();
  ASSERT_EQ(r.events.size(), 1u) << describe(r.events);
  EXPECT_EQ(r.events[0].message, "Port mlx5_1 port 1: healthy (ACTIVE, LinkUp)");
  EXPECT_TRUE(r.events[0].is_healthy);
  EXPECT_EQ(r.events[0].action, recommended_action::none);
}

// seed 002 §3.4 step 4: intermediate unhealthy transitions are suppressed.
TEST_F(nic_core, unhealthy_to_unhealthy_is_silent) {
  settle();
  down("mlx5_1");
  poll();
  down("mlx5_1", "2: Polling");
  EXPECT_TRUE(poll().events.empty()) << describe(last.events);
  sys.set_state("mlx5_1", 1, "2: INIT", "5: LinkUp");
  EXPECT_TRUE(poll().events.empty()) << describe(last.events);
}

// seed 002 §3.2: INIT/ARMED on InfiniBand, Polling, LinkErrorRecovery: non-fatal.
TEST_F(nic_core, transient_infiniband_states_are_non_fatal) {
  settle();
  sys.set_state("mlx5_0", 1, "2: INIT", "5: LinkUp");
  sys.set_state("mlx5_1", 1, "3: ARMED", "5: LinkUp");
  sys.set_state("mlx5_2", 1, "4: ACTIVE", "2: Polling");
  sys.set_state("mlx5_3", 1, "4: ACTIVE", "6: LinkErrorRecovery");
  auto r = poll();
  ASSERT_EQ(r.events.size(), 4u) << describe(r.events);
  for (const auto& e : r.events) {
    EXPECT_FALSE(e.is_fatal) << e.message;
    EXPECT_FALSE(e.is_healthy) << e.message;
    EXPECT_EQ(e.action, recommended_action::none) << e.message;
  }
  EXPECT_EQ(r.events[0].message, "Port mlx5_0 port 1: state INIT, phys_state LinkUp");
  EXPECT_EQ(r.events[3].message,
            "Port mlx5_3 port 1: state ACTIVE, phys_state LinkErrorRecovery");
}

// A degraded port that goes DOWN crosses into fatal: one REPLACE_VM event,
// then nothing while it moves between unhealthy states, and a recovery.
TEST_F(nic_core, a_degraded_port_going_down_is_reported_fatal_once) {
  settle();
  sys.set_state("mlx5_0", 1, "2: INIT", "5: LinkUp");
  ASSERT_EQ(poll().events.size(), 1u) << describe(last.events);
  EXPECT_FALSE(last.events[0].is_fatal);
  down("mlx5_0");
  auto r = poll(1);
  ASSERT_EQ(r.events.size(), 1u) << describe(r.events);
  EXPECT_TRUE(r.events[0].is_fatal);
  EXPECT_EQ(r.events[0].action, recommended_action::replace_vm);
  EXPECT_EQ(r.events[0].message, "Port mlx5_0 port 1: state DOWN, phys_state Disabled");
  sys.set_state("mlx5_0", 1, "2: INIT", "5: LinkUp");
  EXPECT_TRUE(poll(2).events.empty()) << describe(last.events);
  down("mlx5_0");
  EXPECT_TRUE(poll(3).events.empty()) << describe(last.events);
  up("mlx5_0");
  r = poll(4);
  ASSERT_EQ(r.events.size(), 1u) << describe(r.events);
  EXPECT_TRUE(r.events[0].is_healthy);
}

// seed 002 §3.2 and §4.3: a port that stays out of ACTIVE leaves its card below
// the peer mode; after 30 s that is fatal, and clears when the port is back.
TEST_F(nic_core, stuck_port_escalates_through_card_homogeneity) {
  settle();
  sys.set_state("mlx5_2", 1, "4: ACTIVE", "2: Polling");
  ASSERT_EQ(poll().events.size(), 1u) << describe(last.events);
  EXPECT_TRUE(poll(10).events.empty()) << describe(last.events);
  auto r = poll(25);
  ASSERT_EQ(r.events.size(), 1u) << describe(r.events);
  const auto& card = r.events[0];
  EXPECT_EQ(card.message,
            "Card 0000:0e:00 (Compute) has 0 active ports, expected 1 (peer mode)");
  EXPECT_TRUE(card.is_fatal);
  EXPECT_EQ(card.action, recommended_action::replace_vm);
  EXPECT_EQ(card.entities, (std::vector<entity>{{"NIC", "mlx5_2"}}));
  EXPECT_TRUE(poll(60).events.empty()) << describe(last.events);
  up("mlx5_2");
  r = poll();
  ASSERT_EQ(r.events.size(), 2u) << describe(r.events);
  EXPECT_TRUE(r.events[0].is_healthy);
  EXPECT_EQ(r.events[1].message,
            "Card 0000:0e:00 (Compute) has 1 active ports, matching peer mode 1");
  EXPECT_TRUE(r.events[1].is_healthy);
}

TEST_F(nic_core, a_short_dip_is_not_escalated) {
  settle();
  sys.set_state("mlx5_2", 1, "2: INIT", "5: LinkUp");
  poll();
  up("mlx5_2");
  ASSERT_EQ(poll(5).events.size(), 1u);
  sys.set_state("mlx5_2", 1, "2: INIT", "5: LinkUp");
  poll(5);
  EXPECT_TRUE(poll(29).events.empty()) << describe(last.events);
}

// seed 002 §3.4 first poll: a DOWN port on an anomalous card is fatal, with the card.
TEST_F(nic_core, first_poll_reports_ports_of_anomalous_cards) {
  down("mlx5_1");
  start();
  auto r = poll();
  auto events = about(r.events, "mlx5_1");
  ASSERT_EQ(events.size(), 2u) << describe(r.events);
  EXPECT_EQ(events[0].message, "Port mlx5_1 port 1: state DOWN, phys_state Disabled");
  EXPECT_TRUE(events[0].is_fatal);
  EXPECT_EQ(events[1].message,
            "Card 0000:0d:00 (Compute) has 0 active ports, expected 1 (peer mode)");
  EXPECT_TRUE(events[1].is_fatal);
  EXPECT_EQ(r.events.size(), 5u) << describe(r.events); // three healthy baselines
  EXPECT_TRUE(poll().events.empty()) << describe(last.events);
}

// seed 002 §3.4 first poll and §4.3.4 (L40): uncabled ports on expected cards
// are suppressed; a later failure of a cabled port is still reported.
TEST_F(nic_core, first_poll_suppresses_uncabled_ports_of_expected_cards) {
  for (int i = 0; i < 4; ++i) {
    const auto name = "mlx5_" + std::to_string(i);
    sys.set_port(name, test::ib_port_state("1: DOWN", "2: Polling", 2));
  }
  start();
  auto r = poll();
  ASSERT_EQ(r.events.size(), 4u) << describe(r.events);
  for (const auto& e : r.events)
    EXPECT_TRUE(e.is_healthy) << e.message;
  EXPECT_TRUE(poll().events.empty()) << describe(last.events);
  down("mlx5_3");
  r = poll();
  ASSERT_EQ(r.events.size(), 1u) << describe(r.events);
  EXPECT_EQ(r.events[0].message, "Port mlx5_3 port 1: state DOWN, phys_state Disabled");
  // The uncabled port 2 never reports, even when the cabled one recovers.
  up("mlx5_3");
  r = poll();
  ASSERT_EQ(r.events.size(), 1u) << describe(r.events);
  EXPECT_EQ(r.events[0].entities[1].value, "1");
}

// seed 002 §3.4: pod restart, same boot — persisted DOWN now ACTIVE recovers.
TEST_F(nic_core, restart_emits_the_recovery_that_happened_meanwhile) {
  settle();
  down("mlx5_1");
  poll();
  ASSERT_TRUE(save_nic_state_file(options.state_file, *poller->state()).has_value());
  poller.reset();
  up("mlx5_1"); // fixed while the pod was away
  auto loaded = load_nic_state_file(options.state_file);
  ASSERT_TRUE(loaded.state.has_value());
  start(loaded.state);
  auto r = poll();
  EXPECT_FALSE(r.baseline);
  ASSERT_EQ(r.events.size(), 1u) << describe(r.events);
  EXPECT_EQ(r.events[0].message, "Port mlx5_1 port 1: healthy (ACTIVE, LinkUp)");
}

TEST_F(nic_core, restart_reports_a_failure_that_happened_meanwhile) {
  settle();
  restart();
  down("mlx5_2");
  auto r = poll();
  ASSERT_EQ(r.events.size(), 1u) << describe(r.events);
  EXPECT_TRUE(r.events[0].is_fatal);
  restart();
  EXPECT_TRUE(poll().events.empty()) << describe(last.events);
}

// seed 002 §3.4 and §7.2 case 2: a boot-ID change clears state, sends healthy
// baselines, and a device gone across the reboot is no disappearance.
TEST_F(nic_core, reboot_clears_state_and_sends_baselines) {
  settle();
  down("mlx5_1");
  poll();
  restart();
  sys.remove_nic("mlx5_3");
  up("mlx5_1");
  boot_id = "boot-2";
  auto r = poll();
  EXPECT_TRUE(r.baseline);
  ASSERT_EQ(r.events.size(), 3u) << describe(r.events);
  for (const auto& e : r.events)
    EXPECT_TRUE(e.is_healthy) << e.message;
  EXPECT_TRUE(about(r.events, "mlx5_3").empty());
  EXPECT_EQ(poller->state()->boot_id, "boot-2");
  EXPECT_EQ(poller->state()->known_devices,
            (std::set<std::string>{"mlx5_0", "mlx5_1", "mlx5_2"}));
}

// seed 002 §3.4 step 4 needs a boot ID to prove a reboot: while it cannot be
// read the state is kept, so a device that vanishes meanwhile is still
// reported, and nothing is re-baselined when the ID reads again.
TEST_F(nic_core, an_unreadable_boot_id_keeps_the_state) {
  settle();
  down("mlx5_1");
  ASSERT_EQ(poll().events.size(), 1u);
  boot_id = "";
  sys.remove_nic("mlx5_2");
  auto r = poll();
  EXPECT_FALSE(r.baseline);
  ASSERT_EQ(r.events.size(), 1u) << describe(r.events);
  EXPECT_NE(r.events[0].message.find("mlx5_2 disappeared"), std::string::npos);
  EXPECT_EQ(poller->state()->boot_id, "boot-1");
  boot_id = "boot-1";
  r = poll();
  EXPECT_FALSE(r.baseline);
  EXPECT_TRUE(r.events.empty()) << describe(r.events);
}

TEST(nic_boot, only_two_known_different_ids_are_a_reboot) {
  EXPECT_TRUE(boot_changed("boot-1", "boot-2"));
  EXPECT_FALSE(boot_changed("boot-1", "boot-1"));
  EXPECT_FALSE(boot_changed("boot-1", ""));
  EXPECT_FALSE(boot_changed("", "boot-2"));
}

} // namespace
} // namespace vigil::agent
