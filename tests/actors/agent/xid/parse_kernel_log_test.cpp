#include "actors/agent/xid/parse_kernel_log.hpp"

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "tests/support/source_tree.hpp"

namespace vigil::agent {
namespace {

using test::config_dir;
using test::source_dir;

using namespace std::chrono_literals;

parse_options options_for(std::string node) {
  parse_options options;
  auto catalog = xid_catalog::load(source_dir() + "/config");
  EXPECT_TRUE(catalog.has_value()) << catalog.error().to_string();
  if (catalog)
    options.catalog = *catalog;
  options.node_name = std::move(node);
  options.boot_id = "3f1c0e8a";
  return options;
}

parse_result parse_fixture(const std::string& name, const parse_options& options) {
  std::ifstream in(source_dir() + "/tests/data/kmsg/" + name);
  EXPECT_TRUE(in.good()) << name;
  return parse_kernel_log(in, options);
}

std::string summary(const health_event& e) {
  std::string codes;
  for (const auto& c : e.error_codes)
    codes += c;
  std::string gpu;
  for (const auto& x : e.entities)
    if (x.type == "GPU_UUID" || (gpu.empty() && x.type == "PCI"))
      gpu = x.value;
  return e.check_name + " " + codes + " " + std::string(to_string(e.action))
         + (e.is_healthy ? " healthy"
            : e.is_fatal ? " fatal"
                         : " non-fatal")
         + " " + gpu + " x"
         + (e.metadata.count("burstCount") ? e.metadata.at("burstCount") : "-");
}

TEST(parse_kernel_log, h100_dmesg) {
  auto options = options_for("node1");
  options.boot_time = from_unix(1761218000, 0);
  auto result = parse_fixture("h100_dmesg.log", options);
  const std::string gpu3 = "GPU-455d8f70-2051-db6c-0430-ffc457bff834";
  const std::string gpu4 = "GPU-00000004-2051-db6c-0430-ffc457bff834";
  std::vector<std::string> got;
  for (const auto& e : result.events)
    got.push_back(summary(e));
  std::vector<std::string> want = {
    "SysLogsXIDError 63 NONE non-fatal " + gpu3 + " x1",
    "SysLogsXIDError 48 COMPONENT_RESET fatal " + gpu3 + " x2",
    "SysLogsXIDError 45 NONE non-fatal " + gpu3 + " x1",
    "SysLogsXIDError  NONE healthy " + gpu3 + " x-",
    "SysLogsXIDError 48 COMPONENT_RESET fatal " + gpu3 + " x1",
    "SysLogsXIDError 13 NONE non-fatal " + gpu4 + " x1",
    "SysLogsXIDError 74 CONTACT_SUPPORT fatal 0000:05:00 x1",
    "SysLogsXIDError 74 NONE non-fatal 0000:05:00 x1",
    "SysLogsXIDError 154 COMPONENT_RESET fatal 0000:06:00 x1",
    "SysLogsXIDError 165 CONTACT_SUPPORT fatal 0000:07:00 x1",
    "SysLogsXIDError 48 COMPONENT_RESET fatal " + gpu3 + " x1",
    "SysLogsGPUFallenOff 79 RESTART_BM fatal 0000:b3:00 x1",
  };
  EXPECT_EQ(got, want);
  EXPECT_EQ(result.events[1].metadata.at("decision"),
            "WORKFLOW_XID_48 with XID 63/64: drain and reset");
  EXPECT_EQ(result.events[4].metadata.at("decision"), "WORKFLOW_XID_48 solo: reset");
  // Kernel timestamps date the events: boot + 1000.5 s.
  EXPECT_EQ(result.events[1].generated, options.boot_time + 1000500ms);
  EXPECT_EQ(result.events[1].metadata.at("burstLastSeen"),
            format_rfc3339(options.boot_time + 1001s));
  const auto& c = result.counters;
  EXPECT_EQ(c.lines, 28u);
  EXPECT_EQ(c.nvidia_lines, 22u);
  EXPECT_EQ(c.malformed.counts().at("xid"), 2u);
  EXPECT_EQ(c.malformed.counts().at("reset_occurred"), 1u);
  EXPECT_EQ(c.malformed.first_lines().at("xid"),
            "[ 1700.000000] NVRM: Xid (PCI:0000:03:0");
  EXPECT_EQ(c.malformed.total(), 3u);
  EXPECT_EQ(c.events_before_grouping, 13u);
}

TEST(parse_kernel_log, hgx_syslog_with_sxid) {
  auto options = options_for("node1");
  options.syslog_year = 2025;
  auto result = parse_fixture("hgx_syslog.log", options);
  std::vector<std::string> got;
  for (const auto& e : result.events)
    got.push_back(summary(e));
  const std::string gpu0 = "GPU-00000000-2051-db6c-0430-ffc457bff830";
  std::vector<std::string> want = {
    "SysLogsXIDError 48 COMPONENT_RESET fatal " + gpu0 + " x1",
    "SysLogsSXIDError 20034 CONTACT_SUPPORT fatal 0000:86:00 x1",
    "SysLogsSXIDError 12028 NONE non-fatal 0000:c1:00 x1",
    "SysLogsSXIDError 10001 CONTACT_SUPPORT fatal 0000:05:00 x1",
    "SysLogsXIDError  NONE healthy " + gpu0 + " x-",
    "SysLogsGPUFallenOff 79 RESTART_BM fatal 0000:b4:00 x1",
  };
  EXPECT_EQ(got, want);
  // The reset event carries the PCI learned from the "GPU at PCI" line.
  EXPECT_EQ(result.events[4].entities,
            (std::vector<entity>{{"PCI", "0000:18:00"}, {"GPU_UUID", gpu0}}));
  // Kernel timestamps are there but boot_time is unknown (epoch): they still order lines.
  EXPECT_EQ(result.counters.malformed.counts().at("sxid"), 1u);
  EXPECT_EQ(result.counters.malformed.counts().at("fallen_off_bus"), 1u);
}

TEST(parse_kernel_log, gb200_journald_nvlink5) {
  auto options = options_for("gb200-n1");
  auto result = parse_fixture("gb200_journald.log", options);
  std::vector<std::string> got;
  for (const auto& e : result.events)
    got.push_back(summary(e));
  const std::string gpu0 = "GPU-a0b2c3d4-0000-1111-2222-333344445550";
  std::vector<std::string> want = {
    "SysLogsXIDError 149 COMPONENT_RESET fatal " + gpu0 + " x1",
    "SysLogsXIDError 45 NONE non-fatal " + gpu0 + " x1",
    "SysLogsXIDError 154 COMPONENT_RESET fatal " + gpu0 + " x1",
    "SysLogsXIDError 145 NONE non-fatal 0009:01:00 x1",
    "SysLogsXIDError 144 COMPONENT_RESET fatal 0009:01:00 x2",
    "SysLogsXIDError 146 NONE non-fatal 0009:01:00 x1",
    "SysLogsXIDError 154 RESTART_BM fatal 000a:01:00 x1",
  };
  EXPECT_EQ(got, want);
  // ISO journald timestamps date the events.
  EXPECT_EQ(format_rfc3339(*result.events[0].generated), "2025-10-23T11:40:00.100Z");
  EXPECT_EQ(result.counters.malformed.counts().at("nvlink5_fields"), 1u);
}

TEST(parse_kernel_log, reparsing_gives_the_same_ids) {
  auto options = options_for("node1");
  auto a = parse_fixture("h100_dmesg.log", options);
  auto b = parse_fixture("h100_dmesg.log", options);
  ASSERT_EQ(a.events.size(), b.events.size());
  std::set<std::string> ids;
  for (size_t i = 0; i < a.events.size(); ++i) {
    EXPECT_EQ(a.events[i].id, b.events[i].id);
    ids.insert(a.events[i].id);
  }
  EXPECT_EQ(ids.size(), a.events.size());
}

TEST(parse_kernel_log, gpu_metadata_seeds_uuids) {
  auto options = options_for("node1");
  gpu_metadata md;
  md.gpus.push_back(
    {0, "0000:05:00.0", 0, "GPU-55555555-2051-db6c-0430-ffc457bff834", "", "", "", {}});
  options.metadata = md;
  auto result = parse_fixture("h100_dmesg.log", options);
  ASSERT_GE(result.events.size(), 7u);
  EXPECT_EQ(result.events[6].entities.back().value,
            "GPU-55555555-2051-db6c-0430-ffc457bff834");
}

// A flood of identical lines over 15 minutes becomes a handful of
// events (80,000 lines here to keep the -O0 test quick; burst_grouper_test
// does 800,000).
TEST(parse_kernel_log, a_flood_of_identical_lines_is_grouped) {
  std::ostringstream log;
  for (int i = 0; i < 80000; ++i) {
    long long us = 1000000000LL + i * 11250LL;
    log << "[" << us / 1000000 << "."
        << std::string(6 - std::to_string(us % 1000000).size(), '0') << us % 1000000
        << "] NVRM: Xid (PCI:0000:03:00): 48, pid=1, name=a, Ch 00000076\n";
    if (i % 20 == 0)
      log << "[ 1.0] usb 1-2: new high-speed USB device number 3 using xhci_hcd\n";
  }
  std::istringstream in(log.str());
  auto result = parse_kernel_log(in, options_for("node1"));
  ASSERT_EQ(result.events.size(), 5u);
  std::uint64_t total = 0;
  for (const auto& e : result.events)
    total += std::stoull(e.metadata.at("burstCount"));
  EXPECT_EQ(total, 80000u);
  EXPECT_EQ(result.counters.events_before_grouping, 80000u);
  EXPECT_EQ(result.counters.lines, 84000u);
}

TEST(parse_kernel_log, empty_input) {
  std::istringstream in("");
  auto result = parse_kernel_log(in, options_for("node1"));
  EXPECT_TRUE(result.events.empty());
  EXPECT_EQ(result.counters.lines, 0u);
}

TEST(malformed_lines, first_of_each_kind_is_reported_once) {
  malformed_lines m;
  EXPECT_TRUE(m.add("xid", "a"));
  EXPECT_FALSE(m.add("xid", "b"));
  EXPECT_TRUE(m.add("sxid", "c"));
  EXPECT_EQ(m.counts().at("xid"), 2u);
  EXPECT_EQ(m.first_lines().at("xid"), "a");
  EXPECT_EQ(m.total(), 3u);
}

} // namespace
} // namespace vigil::agent

namespace vigil::agent {
namespace {

TEST(parse_kernel_log, mlx5_fault_lines_are_nic_events_grouped_in_bursts) {
  auto options = options_for("gpu-1");
  auto patterns = load_nic_driver_patterns(source_dir() + "/config");
  ASSERT_TRUE(patterns.has_value()) << patterns.error().to_string();
  options.nic_check = std::make_shared<const nic_driver_check>(
    *nic_driver_check::make(std::move(*patterns)));
  options.sysfs_root = "/nonexistent"; // the NIC cannot be named: no entity
  const std::string timeout = "mlx5_core 0000:03:00.0: wait_func:1195:(pid 7): "
                              "ENABLE_HCA(0x104) timeout. Will cause a leak of a "
                              "command resource";
  std::istringstream log(
    "[  10.000000] " + timeout
    + "\n"
      "[  11.000000] "
    + timeout
    + "\n" // the same burst
      "[  12.000000] mlx5_core 0000:0c:00.0: Port module event: "
      "module 0, Cable plugged\n"
      "[  13.000000] NVRM: Xid (PCI:0000:03:00): 79, pid=1, name=a\n");
  auto result = parse_kernel_log(log, options);
  EXPECT_EQ(result.counters.nic_driver_lines, 2u);
  ASSERT_EQ(result.events.size(), 2u);
  const auto& nic = result.events[0];
  EXPECT_EQ(nic.check_name, "SysLogsNICDriverError");
  EXPECT_EQ(nic.error_codes, std::vector<std::string>{"cmd_exec_timeout"});
  EXPECT_TRUE(nic.is_fatal);
  EXPECT_EQ(nic.metadata.at("burstCount"), "2");
  EXPECT_EQ(nic.metadata.at("pci"), "0000:03:00.0");
  EXPECT_EQ(result.events[1].check_name, "SysLogsXIDError");
  // Without the check, the same log has only the XID.
  options.nic_check.reset();
  std::istringstream again("[  10.000000] " + timeout + "\n");
  EXPECT_TRUE(parse_kernel_log(again, options).events.empty());
}

} // namespace
} // namespace vigil::agent
