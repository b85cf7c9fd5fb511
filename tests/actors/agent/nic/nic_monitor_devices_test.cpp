// Which NICs the poller watches and when they are gone: disappearance at
// runtime and across restarts, unreadable sysfs input, virtual functions,
// management and NUMA-less NICs, and the options that select devices and
// checks or make start() fail.
#include "actors/agent/nic/nic_monitor_core.hpp"

#include <gtest/gtest.h>

#include "tests/actors/agent/nic/nic_core_fixture.hpp"

namespace vigil::agent {
namespace {

using test::fake_nic;
using namespace test_support;

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

// mlx5_2 as the fixture builds it, to add back once it has gone.
fake_nic mlx5_2_again() {
  fake_nic nic;
  nic.name = "mlx5_2";
  nic.pci = "0000:0e:00.0";
  return nic;
}

// No port of it is judged: nothing shows the device works again.
TEST_F(nic_core, a_device_back_but_excluded_keeps_its_disappearance) {
  settle();
  sys.remove_nic("mlx5_2");
  poll();
  auto back = mlx5_2_again();
  back.numa_node = 1; // now on a socket without GPUs
  sys.add_nic(back);
  EXPECT_TRUE(poll().events.empty()) << describe(last.events);
  EXPECT_EQ(poller->state()->disappeared_devices, (std::set<std::string>{"mlx5_2"}));
}

// seed 002 §7.3: the loss is a hardware failure. Listed again with its link
// down (a rescan, a driver reload), the device keeps its disappearance; its
// port, healthy before, reports the link down. A working port clears both.
TEST_F(nic_core, a_device_back_with_its_link_down_keeps_its_disappearance) {
  settle();
  sys.remove_nic("mlx5_2");
  poll();
  auto back = mlx5_2_again();
  back.ports = {test::ib_port_state("1: DOWN", "3: Disabled")};
  sys.add_nic(back);
  auto r = poll();
  ASSERT_EQ(r.events.size(), 1u) << describe(r.events);
  EXPECT_TRUE(r.events[0].is_fatal);
  EXPECT_EQ(r.events[0].entities,
            (std::vector<entity>{{"NIC", "mlx5_2"}, {"NICPort", "1"}}));
  EXPECT_TRUE(poll().events.empty()) << describe(last.events);
  EXPECT_EQ(poller->state()->disappeared_devices, (std::set<std::string>{"mlx5_2"}));
  restart();
  EXPECT_TRUE(poll().events.empty()) << describe(last.events);
  up("mlx5_2");
  r = poll();
  ASSERT_EQ(r.events.size(), 2u) << describe(r.events);
  EXPECT_EQ(r.events[0].message, "NIC mlx5_2 is back in /sys/class/infiniband/");
  EXPECT_EQ(r.events[0].entities, (std::vector<entity>{{"NIC", "mlx5_2"}}));
  EXPECT_TRUE(r.events[1].is_healthy);
  EXPECT_EQ(r.events[1].entities,
            (std::vector<entity>{{"NIC", "mlx5_2"}, {"NICPort", "1"}}));
  EXPECT_TRUE(poller->state()->disappeared_devices.empty());
}

// The RDMA core unloaded: /sys/class/infiniband itself is gone, and so is
// every device it listed.
TEST_F(nic_core, a_missing_class_directory_is_every_device_gone) {
  settle();
  const auto known = poller->state()->known_devices;
  ASSERT_FALSE(known.empty());
  sys.remove("class/infiniband");
  auto r = poll();
  ASSERT_EQ(r.events.size(), known.size()) << describe(r.events);
  for (const auto& e : r.events) {
    EXPECT_TRUE(e.is_fatal) << e.message;
    EXPECT_NE(e.message.find("disappeared from /sys/class/infiniband/"),
              std::string::npos);
  }
  EXPECT_EQ(poller->state()->disappeared_devices, known);
  EXPECT_TRUE(poll().events.empty()) << describe(last.events);
}

TEST_F(nic_core, a_device_that_comes_back_recovers) {
  settle();
  sys.remove_nic("mlx5_2");
  poll();
  auto back = mlx5_2_again();
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

} // namespace
} // namespace vigil::agent
