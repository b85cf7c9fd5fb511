#include "actors/agent/xid/nic_driver_check.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "tests/support/fresh_directory.hpp"
#include "tests/support/source_tree.hpp"

namespace vigil::agent {
namespace {

using test::config_dir;
using test::source_dir;

const nic_driver_check& shipped() {
  static const nic_driver_check check = [] {
    auto patterns = load_nic_driver_patterns(config_dir());
    EXPECT_TRUE(patterns.has_value()) << patterns.error().to_string();
    auto made =
      nic_driver_check::make(patterns ? *patterns : std::vector<nic_driver_pattern>{});
    EXPECT_TRUE(made.has_value());
    return made ? *made : *nic_driver_check::make({});
  }();
  return check;
}

std::string matched(std::string_view line) {
  const auto* p = shipped().match(line);
  return p != nullptr ? p->name : "";
}

// Lines as mlx5_core writes them (NVSentinel's test cases carry the same).
TEST(nic_driver_check, the_shipped_patterns_name_mlx5s_faults) {
  ASSERT_EQ(shipped().patterns().size(), 8u);
  EXPECT_EQ(matched("mlx5_core 0000:03:00.0: wait_func:1195:(pid 1967079): "
                    "ENABLE_HCA(0x104) timeout. Will cause a leak of a command resource"),
            "cmd_exec_timeout");
  EXPECT_EQ(matched("mlx5_core 0000:d2:00.0: poll_health:825: device's health "
                    "compromised - reached miss count."),
            "health_poll_failed");
  EXPECT_EQ(matched("mlx5_core: INFO: synd 0x8: unrecoverable hardware error."),
            "unrecoverable_err");
  EXPECT_EQ(matched("NETDEV WATCHDOG: eth0 (mlx5_core): transmit queue 0 timed out"),
            "netdev_watchdog");
  EXPECT_EQ(matched("mlx5_core 0000:65:00.0 eth0: NETDEV WATCHDOG: CPU: 5: transmit "
                    "queue 0 timed out 5032 ms"),
            "netdev_watchdog"); // newer kernels put the driver first
  EXPECT_EQ(matched("mlx5_core 0000:12:00.0: mlx5_pcie_event:299: Detected insufficient "
                    "power on the PCIe slot (27W)."),
            "pci_power_insufficient");
  EXPECT_EQ(matched("mlx5_core 0000:5c:00.0: Port module event[error]: module 0, Cable "
                    "error, High Temperature"),
            "port_module_high_temp");
  EXPECT_EQ(matched("mlx5_cmd_out_err:838:(pid 1441871): ACCESS_REG(0x805) op_mod(0x1) "
                    "failed, status bad operation(0x2), syndrome (0x305684), err(-22)"),
            "access_reg_failed");
  EXPECT_EQ(
    matched("mlx5_core 0000:41:00.1: Port module event: module 1, Cable unplugged"),
    "module_unplugged");
  // Healthy chatter, another driver, garbage: nothing.
  EXPECT_EQ(matched("mlx5_core 0000:0c:00.0: Port module event: module 0, Cable plugged"),
            "");
  EXPECT_EQ(matched("NETDEV WATCHDOG: eth0 (ixgbe): transmit queue 0 timed out"), "");
  EXPECT_EQ(matched("NVRM: Xid (PCI:0000:03:00): 48, pid=1, name=a"), "");
  EXPECT_EQ(matched(std::string(5000, 'x') + "mlx5" + std::string(1, '\0')), "");
  EXPECT_EQ(matched(""), "");
}

TEST(nic_driver_check, the_first_matching_pattern_wins) {
  auto check = nic_driver_check::make(
    {{"first", true, recommended_action::replace_vm, "mlx5_core.*timeout", ""},
     {"second", false, recommended_action::none, "mlx5_core", ""}});
  ASSERT_TRUE(check.has_value());
  EXPECT_EQ(check->match("mlx5_core: a timeout")->name, "first");
  EXPECT_EQ(check->match("mlx5_core: other")->name, "second");
  auto bad =
    nic_driver_check::make({{"broken", true, recommended_action::none, "(", ""}});
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().where, "nic driver pattern broken");
}

TEST(nic_driver_check, each_pattern_has_a_literal_to_search_before_its_regex) {
  EXPECT_EQ(
    required_literal(R"(mlx5_core.*timeout\. Will cause a leak of a command resource)"),
    "timeout. Will cause a leak of a command resource");
  EXPECT_EQ(required_literal("(NETDEV WATCHDOG.*mlx5_core|mlx5_core.*NETDEV WATCHDOG)"
                             ".*transmit queue.*timed out"),
            "transmit queue");
  EXPECT_EQ(required_literal("mlx5_cmd_out_err.*ACCESS_REG.*failed"), "mlx5_cmd_out_err");
  EXPECT_EQ(required_literal("a|bcd"), "");             // either side may match
  EXPECT_EQ(required_literal("abcd?e"), "abc");         // the d is optional
  EXPECT_EQ(required_literal(R"(x\d+yz[0-9]w)"), "yz"); // classes are no literal
  EXPECT_EQ(required_literal("colou?r(s)+"), "colo");
  EXPECT_EQ(required_literal(""), "");
  for (const auto& p : shipped().patterns())
    EXPECT_GE(required_literal(p.regex).size(), 10u) << p.name;
}

TEST(nic_driver_check, pattern_files_are_read_or_refused_by_line) {
  auto ok =
    parse_nic_driver_patterns("# comment\nname,fatal,action,regex,description\n"
                              "a,true,REPLACE_VM,mlx5_core.*x,the rest, with commas\n");
  ASSERT_TRUE(ok.has_value()) << ok.error().to_string();
  EXPECT_EQ((*ok)[0].description, "the rest, with commas");
  EXPECT_EQ((*ok)[0].action, recommended_action::replace_vm);
  auto field_of = [](std::string_view csv) {
    auto r = parse_nic_driver_patterns(csv);
    return r ? std::string{} : r.error().where;
  };
  const std::string head = "name,fatal,action,regex,description\n";
  EXPECT_EQ(field_of(head + "a,yes,NONE,x,d\n"), "line 2 fatal");
  EXPECT_EQ(field_of(head + "a,true,REBOOT_PLEASE,x,d\n"), "line 2 action");
  EXPECT_EQ(field_of(head + "a,true,NONE\n"), "line 2");
  EXPECT_EQ(field_of(head + ",true,NONE,x,d\n"), "line 2 name");
  EXPECT_EQ(field_of(head + "a,true,NONE,,d\n"), "line 2 regex");
  EXPECT_EQ(field_of(head + "a,true,NONE,x,d\na,false,NONE,y,d\n"), "line 3 name");
  auto missing = load_nic_driver_patterns("/nonexistent");
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().where.find("nic_driver_patterns.csv"), std::string::npos);
}

TEST(nic_driver_check, the_nic_comes_from_the_pci_address_through_sysfs) {
  EXPECT_EQ(first_pci_function("mlx5_core 0000:D2:00.0: poll_health"), "0000:d2:00.0");
  EXPECT_EQ(first_pci_function("at 10000:d2:00.0 and 0000:41:00.1:"), "0000:41:00.1");
  EXPECT_EQ(first_pci_function("mlx5_core: INFO: synd 0x8"), "");
  EXPECT_EQ(first_pci_function("0000:41:00"), "");
  // A fake sysfs: one mlx5 function with an InfiniBand device, one with only
  // a netdev, one bound to another driver.
  namespace fs = std::filesystem;
  const fs::path root = test::fresh_directory();
  auto function = [&](const std::string& pci, const std::string& driver) {
    fs::create_directories(root / "bus/pci/drivers" / driver);
    fs::create_directories(root / "bus/pci/devices" / pci);
    fs::create_symlink(root / "bus/pci/drivers" / driver,
                       root / "bus/pci/devices" / pci / "driver");
    return root / "bus/pci/devices" / pci;
  };
  fs::create_directories(function("0000:03:00.0", "mlx5_core") / "infiniband/mlx5_0");
  fs::create_directories(root / "bus/pci/devices/0000:03:00.0/net/ibp3s0");
  fs::create_directories(function("0000:04:00.0", "mlx5_core") / "net/eth4");
  fs::create_directories(function("0000:05:00.0", "ixgbe") / "net/eth5");
  EXPECT_EQ(mlx5_device_of(root.string(), "0000:03:00.0"), "mlx5_0");
  EXPECT_EQ(mlx5_device_of(root.string(), "0000:04:00.0"), "eth4");
  EXPECT_EQ(mlx5_device_of(root.string(), "0000:05:00.0"), "");
  EXPECT_EQ(mlx5_device_of(root.string(), "0000:06:00.0"), "");
  EXPECT_EQ(mlx5_device_of(root.string(), ""), "");
}

TEST(nic_driver_check, a_matched_line_is_a_nic_event) {
  const auto* p = shipped().match("mlx5_core 0000:d2:00.0: poll_health:825: device's "
                                  "health compromised - reached miss count.");
  ASSERT_NE(p, nullptr);
  nic_driver_event_input in;
  in.node_name = "gpu-1";
  in.boot_id = "b";
  in.message = "mlx5_core 0000:d2:00.0: poll_health:825: device's health compromised";
  in.raw_line = in.message;
  in.timestamp_key = "k1";
  in.device = "mlx5_3";
  in.pci = "0000:d2:00.0";
  auto e = nic_driver_event(*p, in);
  EXPECT_EQ(e.check_name, "SysLogsNICDriverError");
  EXPECT_EQ(e.component_class, "NIC");
  EXPECT_TRUE(e.is_fatal);
  EXPECT_EQ(e.action, recommended_action::replace_vm);
  EXPECT_EQ(e.error_codes, std::vector<std::string>{"health_poll_failed"});
  EXPECT_EQ(e.entities, (std::vector<entity>{{"NIC", "mlx5_3"}}));
  EXPECT_EQ(e.metadata.at("pci"), "0000:d2:00.0");
  EXPECT_EQ(e.id.size(), 32u);
  in.device.clear();
  EXPECT_TRUE(nic_driver_event(*p, in).entities.empty()); // the NIC not found
}

} // namespace
} // namespace vigil::agent
