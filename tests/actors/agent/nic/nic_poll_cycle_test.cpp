// One poll cycle as `vigil nic scan` runs it (metadata, boot ID and state
// file read from disk and written back), and the GID diagnostics added to
// RoCE port events.
#include "actors/agent/nic/nic_monitor_core.hpp"

#include <gtest/gtest.h>

#include "tests/actors/agent/nic/nic_core_fixture.hpp"

namespace vigil::agent {
namespace {

using test::fake_nic;
using namespace test_support;

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
