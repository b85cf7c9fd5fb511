#include "actors/agent/nic/nic_monitor_core.hpp"

#include <fstream>

#include <gtest/gtest.h>

#include "tests/actors/agent/nic/nic_test_support.hpp"

namespace vigil::agent {
namespace {

using test::fake_nic;
using namespace test_support;

// Four single-port InfiniBand compute cards, PXB to the GPUs of NUMA 0, and
// one management NIC on NUMA 1 (no GPU there).
class nic_core : public nic_fixture {
protected:
  void SetUp() override {
    nic_fixture::SetUp();
    metadata.gpus = {gpu(0, 0), gpu(1, 0)};
    for (int i = 0; i < 4; ++i)
      add_ib("mlx5_" + std::to_string(i), 0x0c + i);
    fake_nic mgmt;
    mgmt.name = "mlx5_9";
    mgmt.pci = "0000:a1:00.0";
    mgmt.numa_node = 1;
    sys.add_nic(mgmt);
    metadata.nic_topology["mlx5_9"] = {"SYS", "SYS"};
  }

  void add_ib(const std::string& name, int bus, int numa = 0) {
    fake_nic nic;
    nic.name = name;
    char pci[32];
    std::snprintf(pci, sizeof pci, "0000:%02x:00.0", bus);
    nic.pci = pci;
    nic.numa_node = numa;
    nic.sriov_totalvfs = 8;
    sys.add_nic(nic);
    metadata.nic_topology[name] = {"PXB", "SYS"};
  }

  void down(const std::string& name, const char* phys = "3: Disabled") {
    sys.set_state(name, 1, "1: DOWN", phys);
  }
  void up(const std::string& name) { sys.set_state(name, 1, "4: ACTIVE", "5: LinkUp"); }

  // Starts and runs the first poll, checking it is the expected baseline.
  void settle() {
    start();
    auto first = poll();
    ASSERT_TRUE(first.baseline);
  }
};

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

// seed 002 §7.2 case 1 and §13.1: runtime disappearance.
TEST_F(nic_core, disappearance_is_fatal_once) {
  settle();
  sys.remove_nic("mlx5_2");
  auto r = poll();
  ASSERT_EQ(r.events.size(), 1u) << describe(r.events);
  const auto& e = r.events[0];
  EXPECT_EQ(e.message,
            "NIC mlx5_2 disappeared from /sys/class/infiniband/ - hardware failure");
  EXPECT_EQ(e.check_name, "InfiniBandStateCheck");
  EXPECT_TRUE(e.is_fatal);
  EXPECT_EQ(e.action, recommended_action::replace_vm);
  EXPECT_EQ(e.entities, (std::vector<entity>{{"NIC", "mlx5_2"}}));
  EXPECT_TRUE(poll().events.empty()) << describe(last.events);
  restart();
  EXPECT_TRUE(poll().events.empty()) << describe(last.events);
}

// seed 002 §7.2 case 1: a device gone while the pod restarted.
TEST_F(nic_core, disappearance_across_a_restart) {
  settle();
  ASSERT_TRUE(save_nic_state_file(options.state_file, *poller->state()).has_value());
  poller.reset();
  sys.remove_nic("mlx5_0");
  start(load_nic_state_file(options.state_file).state);
  auto r = poll();
  ASSERT_EQ(r.events.size(), 1u) << describe(r.events);
  EXPECT_EQ(r.events[0].message,
            "NIC mlx5_0 disappeared from /sys/class/infiniband/ - hardware failure");
}

TEST_F(nic_core, a_device_back_but_excluded_is_forgotten) {
  settle();
  sys.remove_nic("mlx5_2");
  poll();
  fake_nic back;
  back.name = "mlx5_2";
  back.pci = "0000:0e:00.0";
  back.numa_node = 1; // now on a socket without GPUs
  sys.add_nic(back);
  EXPECT_TRUE(poll().events.empty()) << describe(last.events);
  EXPECT_TRUE(poller->state()->disappeared_devices.empty());
}

TEST_F(nic_core, a_device_that_comes_back_recovers) {
  settle();
  sys.remove_nic("mlx5_2");
  poll();
  fake_nic back;
  back.name = "mlx5_2";
  back.pci = "0000:0e:00.0";
  sys.add_nic(back);
  auto r = poll();
  ASSERT_EQ(r.events.size(), 1u) << describe(r.events);
  EXPECT_EQ(r.events[0].message, "NIC mlx5_2 is back in /sys/class/infiniband/");
  EXPECT_TRUE(r.events[0].is_healthy);
  EXPECT_TRUE(poll().events.empty()) << describe(last.events);
}

// seed 002 §7: vanishing mid-poll is a candidate, confirmed on the next poll.
TEST_F(nic_core, vanishing_mid_poll_is_confirmed_next_poll) {
  settle();
  nic_snapshot snap;
  snap.listed = true;
  auto names = list_ib_devices(sys.root(), snap.diagnostics);
  ASSERT_TRUE(names.has_value());
  sys.remove_nic("mlx5_1"); // between the listing and the read
  for (const auto& name : *names)
    snap.devices.push_back(read_nic_device(sys.root(), name, snap.diagnostics));
  ASSERT_EQ(snap.find("mlx5_1")->status, device_read::vanished);
  now += std::chrono::seconds(1);
  auto r = poller->poll(snap, boot_id, now);
  EXPECT_TRUE(r.events.empty()) << describe(r.events);
  r = poll();
  ASSERT_EQ(r.events.size(), 1u) << describe(r.events);
  EXPECT_NE(r.events[0].message.find("mlx5_1 disappeared"), std::string::npos);
}

TEST_F(nic_core, a_candidate_that_is_still_there_is_no_event) {
  settle();
  nic_snapshot snap = read_nic_snapshot(sys.root());
  for (auto& d : snap.devices)
    if (d.name == "mlx5_1") {
      d.status = device_read::vanished;
      d.ports.clear();
    }
  now += std::chrono::seconds(1);
  EXPECT_TRUE(poller->poll(snap, boot_id, now).events.empty());
  EXPECT_TRUE(poll().events.empty()) << describe(last.events);
}

// Bad input: an unreadable class directory concludes nothing.
TEST_F(nic_core, unlistable_sysfs_is_no_disappearance) {
  settle();
  const auto before = *poller->state();
  now += std::chrono::seconds(1);
  auto r = poller->poll(nic_snapshot{}, boot_id, now);
  EXPECT_TRUE(r.events.empty()) << describe(r.events);
  EXPECT_FALSE(r.diagnostics.empty());
  EXPECT_TRUE(*poller->state() == before);
}

// Bad input: an unreadable or odd state file is reported, the port keeps its
// last health, and nothing crashes.
TEST_F(nic_core, unreadable_and_unexpected_port_files_keep_the_last_health) {
  settle();
  sys.remove(sys.port_dir("mlx5_1", 1) + "/state");
  sys.mkdirs(sys.port_dir("mlx5_1", 1) + "/state");
  EXPECT_TRUE(poll(40).events.empty()) << describe(last.events);
  sys.remove(sys.port_dir("mlx5_1", 1) + "/state");
  sys.write(sys.port_dir("mlx5_1", 1) + "/state", "garbage");
  auto r = poll(40);
  EXPECT_TRUE(r.events.empty()) << describe(r.events);
  ASSERT_FALSE(r.diagnostics.empty());
  EXPECT_NE(r.diagnostics[0].where.find("mlx5_1/1 state"), std::string::npos);
  EXPECT_NE(r.diagnostics[0].what.find("garbage"), std::string::npos);
  down("mlx5_1");
  r = poll();
  ASSERT_EQ(r.events.size(), 1u) << describe(r.events);
  EXPECT_TRUE(r.events[0].is_fatal);
}

// seed 002 §8: VFs are skipped whatever their state.
TEST_F(nic_core, virtual_functions_are_skipped) {
  for (int i = 0; i < 3; ++i) {
    fake_nic vf;
    vf.name = "mlx5_1" + std::to_string(i + 4);
    vf.pci = "0000:0c:00." + std::to_string(i + 1);
    vf.physfn = "0000:0c:00.0";
    vf.ports = {test::ib_port_state("1: DOWN", "3: Disabled")};
    sys.add_nic(vf);
  }
  start();
  auto r = poll();
  EXPECT_EQ(r.events.size(), 4u) << describe(r.events);
  for (const auto& e : r.events)
    EXPECT_TRUE(e.is_healthy) << e.message;
  EXPECT_EQ(poller->state()->known_devices.size(), 4u);
  sys.remove_nic("mlx5_14");
  EXPECT_TRUE(poll().events.empty()) << describe(last.events);
}

// Management NICs are never monitored: no state events, no disappearance.
TEST_F(nic_core, management_nics_are_not_monitored) {
  settle();
  down("mlx5_9");
  EXPECT_TRUE(poll().events.empty()) << describe(last.events);
  sys.remove_nic("mlx5_9");
  EXPECT_TRUE(poll().events.empty()) << describe(last.events);
}

// seed 002 §4.1.2 NIC edge case: NUMA -1 is excluded.
TEST_F(nic_core, nic_with_unknown_numa_is_excluded) {
  fake_nic odd;
  odd.name = "mlx5_5";
  odd.pci = "0000:55:00.0";
  odd.numa_node = -1;
  odd.ports = {test::ib_port_state("1: DOWN", "3: Disabled")};
  sys.add_nic(odd);
  metadata.nic_topology["mlx5_5"] = {"PXB", "PXB"};
  start();
  auto r = poll();
  EXPECT_EQ(r.roles.at("mlx5_5").role, nic_role::management);
  EXPECT_TRUE(about(r.events, "mlx5_5").empty());
}

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

// seed 002 §12.1 --checks: a disabled check sends nothing.
TEST_F(nic_core, disabled_checks_send_nothing) {
  options.checks = {nic_check::infiniband_degradation};
  sys.set_counter("mlx5_0", 1, "local_link_integrity_errors", 0);
  start();
  EXPECT_TRUE(poll().events.empty()) << describe(last.events);
  down("mlx5_0");
  sys.set_counter("mlx5_0", 1, "local_link_integrity_errors", 1);
  auto r = poll();
  ASSERT_EQ(r.events.size(), 1u) << describe(r.events);
  EXPECT_EQ(r.events[0].check_name, "InfiniBandDegradationCheck");
  sys.remove_nic("mlx5_1");
  EXPECT_TRUE(poll().events.empty()) << describe(last.events);
}

// seed 002 §12.1: exclusion drops names before classification.
TEST_F(nic_core, exclusion_regex_drops_devices) {
  options.nic_exclusion_regex = "^mlx5_3$";
  start();
  auto r = poll();
  EXPECT_EQ(r.events.size(), 3u) << describe(r.events);
  EXPECT_TRUE(about(r.events, "mlx5_3").empty());
  EXPECT_EQ(r.roles.count("mlx5_3"), 0u);
}

// seed 002 §12.1: the inclusion override bypasses the NUMA gate and topology.
TEST_F(nic_core, inclusion_override_monitors_only_matches) {
  options.nic_inclusion_regex_override = "^mlx5_[09]$";
  start();
  auto r = poll();
  ASSERT_EQ(r.events.size(), 2u) << describe(r.events);
  EXPECT_EQ(about(r.events, "mlx5_9").size(), 1u); // management NIC, pinned by hand
  EXPECT_EQ(r.roles.at("mlx5_9").reason, "inclusion override");
  EXPECT_EQ(r.roles.count("mlx5_1"), 0u);
}

TEST_F(nic_core, store_only_strategy_is_stamped) {
  options.strategy = processing_strategy::store_only;
  start();
  for (const auto& e : poll().events)
    EXPECT_EQ(e.strategy, processing_strategy::store_only);
}

// Ids are stable for the same event and differ between polls.
TEST_F(nic_core, event_ids_are_deterministic) {
  start();
  auto a = poll(0);
  start();
  auto b = poller->poll(read_nic_snapshot(sys.root()), boot_id, now);
  ASSERT_EQ(a.events.size(), b.events.size());
  for (size_t i = 0; i < a.events.size(); ++i)
    EXPECT_EQ(a.events[i].id, b.events[i].id);
  EXPECT_NE(a.events[0].id, a.events[1].id);
  start();
  auto c = poll(1);
  EXPECT_NE(a.events[0].id, c.events[0].id);
}

// seed 002 §12.2 and §4.1.2: fail fast on unusable metadata.
TEST_F(nic_core, start_fails_without_nic_topology) {
  metadata.nic_topology.clear();
  auto started = nic_poller::start(options, metadata, "", std::nullopt);
  ASSERT_FALSE(started.has_value());
  EXPECT_EQ(started.error().where, options.metadata_path);
  EXPECT_NE(started.error().what.find("nic_topology"), std::string::npos);
}

TEST_F(nic_core, start_fails_when_no_gpu_numa_is_known) {
  metadata.gpus = {gpu(0, -1), gpu(1, -1)};
  auto started = nic_poller::start(options, metadata, "", std::nullopt);
  ASSERT_FALSE(started.has_value());
  EXPECT_EQ(started.error().where, options.metadata_path);
  EXPECT_NE(started.error().what.find("numa_node"), std::string::npos);
  options.nic_inclusion_regex_override = "^mlx5_0$"; // the override skips the gate
  EXPECT_TRUE(nic_poller::start(options, metadata, "", std::nullopt).has_value());
}

TEST_F(nic_core, some_unknown_gpu_numa_is_fine) {
  metadata.gpus = {gpu(0, -1), gpu(1, 0)};
  start();
  EXPECT_EQ(poll().events.size(), 4u);
}

// The whole cycle as `vigil nic scan` runs it.
class nic_poll_once : public nic_core {
protected:
  void SetUp() override {
    nic_core::SetUp();
    sys.write("gpu_metadata.json", encode_gpu_metadata(metadata));
    sys.write("boot_id", "boot-1");
  }
};

TEST_F(nic_poll_once, writes_state_and_is_silent_the_second_time) {
  auto first = run_nic_poll_once(options, now);
  ASSERT_TRUE(first.has_value()) << first.error().to_string();
  EXPECT_EQ(first->events.size(), 4u) << describe(first->events);
  EXPECT_TRUE(first->diagnostics.empty()) << first->diagnostics[0].to_string();
  // seed 002 §2.2: port snapshots, known devices and the boot ID are persisted.
  auto saved = load_nic_state_file(options.state_file).state;
  ASSERT_TRUE(saved.has_value());
  EXPECT_EQ(saved->boot_id, "boot-1");
  EXPECT_EQ(saved->known_devices,
            (std::set<std::string>{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"}));
  ASSERT_EQ(saved->ports.count("mlx5_0/1"), 1u);
  EXPECT_EQ(saved->ports.at("mlx5_0/1").state, "4: ACTIVE");
  EXPECT_EQ(saved->ports.at("mlx5_0/1").phys_state, "5: LinkUp");
  EXPECT_EQ(saved->ports.at("mlx5_0/1").health, recorded_health::healthy);
  EXPECT_EQ(saved->ports.count("mlx5_9/1"), 0u); // management: not monitored
  down("mlx5_0");
  auto second = run_nic_poll_once(options, now + std::chrono::seconds(1));
  ASSERT_TRUE(second.has_value());
  ASSERT_EQ(second->events.size(), 1u) << describe(second->events);
  EXPECT_TRUE(second->events[0].is_fatal);
  auto third = run_nic_poll_once(options, now + std::chrono::seconds(2));
  EXPECT_TRUE(third->events.empty()) << describe(third->events);
}

TEST_F(nic_poll_once, corrupt_state_file_is_a_fresh_boot) {
  sys.write("state.json", "{\"version\": 1, \"boot_");
  auto r = run_nic_poll_once(options, now);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->events.size(), 4u);
  ASSERT_FALSE(r->diagnostics.empty());
  EXPECT_NE(r->diagnostics[0].what.find("corrupt"), std::string::npos);
}

TEST_F(nic_poll_once, missing_metadata_stops_with_the_file_named) {
  sys.remove("gpu_metadata.json");
  auto r = run_nic_poll_once(options, now);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().where, options.metadata_path);
}

TEST_F(nic_poll_once, metadata_without_nic_topology_stops) {
  auto m = metadata;
  m.nic_topology.clear();
  sys.write("gpu_metadata.json", encode_gpu_metadata(m));
  auto r = run_nic_poll_once(options, now);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().to_string().find("nic_topology"), std::string::npos);
}

TEST_F(nic_poll_once, missing_boot_id_is_reported_and_polled_anyway) {
  sys.remove("boot_id");
  auto r = run_nic_poll_once(options, now);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->events.size(), 4u);
  ASSERT_FALSE(r->diagnostics.empty());
  EXPECT_EQ(r->diagnostics[0].where, options.boot_id_path);
}

TEST_F(nic_poll_once, default_route_nic_is_management) {
  fake_nic eth;
  eth.name = "mlx5_7";
  eth.pci = "0000:17:00.0";
  eth.netdev = "eth0";
  eth.ports = {test::roce_port()};
  sys.add_nic(eth);
  metadata.nic_topology["mlx5_7"] = {"PXB", "SYS"};
  sys.write("gpu_metadata.json", encode_gpu_metadata(metadata));
  sys.write("route", test::route_table_with_default("eth0"));
  auto r = run_nic_poll_once(options, now);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->roles.at("mlx5_7").role, nic_role::management);
  EXPECT_TRUE(about(r->events, "mlx5_7").empty());
  sys.remove("route"); // unavailable: the step is skipped silently
  options.state_file = sys.path("other-state.json");
  r = run_nic_poll_once(options, now);
  EXPECT_EQ(r->roles.at("mlx5_7").role, nic_role::compute);
  EXPECT_TRUE(r->diagnostics.empty());
}

// seed 002 §9.1: a RoCE port's state event carries its GID diagnostics; an
// InfiniBand port's does not, and an empty table names the failure it causes.
TEST(nic_gid_diagnostics, roce_port_events_carry_the_gid_table) {
  test::fake_sysfs sys;
  for (const char* name : {"mlx5_0", "mlx5_1"}) {
    fake_nic nic;
    nic.name = name;
    nic.pci = name == std::string("mlx5_0") ? "0000:0c:00.0" : "0000:0d:00.0";
    nic.ports = {test::roce_port("1: DOWN", "3: Disabled")};
    sys.add_nic(nic);
  }
  sys.set_gid("mlx5_0", 1, 0, "fe80:0000:0000:0000:ba3f:d2ff:fec3:65c4", "RoCE v2");
  sys.set_gid("mlx5_0", 1, 3, "0000:0000:0000:0000:0000:ffff:0a33:ba20", "RoCE v2");
  sys.mkdirs(sys.port_dir("mlx5_1", 1) + "/gids"); // an empty table
  auto port_event = [](const std::string& device, const std::string& layer) {
    health_event e;
    e.entities = {{"NIC", device}, {"NICPort", "1"}};
    e.metadata = {{"link_layer", layer}, {"state", "DOWN"}};
    return e;
  };
  std::vector<health_event> events{port_event("mlx5_0", "Ethernet"),
                                   port_event("mlx5_1", "Ethernet"),
                                   port_event("mlx5_0", "InfiniBand")};
  std::vector<nic_diagnostic> diagnostics;
  add_gid_diagnostics(events, sys.root(), diagnostics);
  EXPECT_EQ(events[0].metadata["gid_count"], "2");
  EXPECT_EQ(events[0].metadata["gid_ipv4"], "10.51.186.32");
  EXPECT_EQ(events[0].metadata.count("gid_problems"), 0u);
  EXPECT_EQ(events[1].metadata["gid_count"], "0");
  EXPECT_NE(events[1].metadata["gid_problems"].find("ENODATA"), std::string::npos);
  EXPECT_EQ(events[2].metadata.count("gid_count"), 0u);
  EXPECT_TRUE(diagnostics.empty());
}

} // namespace
} // namespace vigil::agent
