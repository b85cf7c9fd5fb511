#include "actors/agent/nic/nic_monitor_options.hpp"

#include <gtest/gtest.h>

namespace vigil::agent {
namespace {

expected<nic_monitor_options> parse(std::vector<std::string> args,
                                    std::optional<std::string> env = "node-env") {
  return parse_nic_monitor_flags(args, env);
}

void expect_failure(std::vector<std::string> args, const std::string& where,
                    const std::string& what) {
  auto parsed = parse(args);
  ASSERT_FALSE(parsed.has_value());
  EXPECT_EQ(parsed.error().where, where) << parsed.error().to_string();
  EXPECT_NE(parsed.error().what.find(what), std::string::npos)
    << parsed.error().to_string();
}

// seed 002 §12.1 defaults.
TEST(nic_monitor_options, defaults_are_the_seeds) {
  auto parsed = parse({});
  ASSERT_TRUE(parsed.has_value()) << parsed.error().to_string();
  EXPECT_EQ(parsed->state_polling_interval, std::chrono::seconds(1));
  EXPECT_EQ(parsed->state_file, "/var/run/nic_health_monitor/state.json");
  EXPECT_EQ(parsed->boot_id_path, "/nvsentinel/proc/sys/kernel/random/boot_id");
  EXPECT_EQ(parsed->metadata_path, "/var/lib/nvsentinel/gpu_metadata.json");
  EXPECT_EQ(parsed->checks.size(), 4u);
  EXPECT_EQ(parsed->node_name, "node-env");
  EXPECT_EQ(parsed->nic_exclusion_regex, "^veth.*,^docker.*,^br-.*,^lo$");
  EXPECT_EQ(parsed->nic_inclusion_regex_override, "");
  EXPECT_EQ(parsed->strategy, processing_strategy::execute_remediation);
}

TEST(nic_monitor_options, values_are_read) {
  auto parsed = parse({"--state-polling-interval",
                       "500ms",
                       "--state-file=/s.json",
                       "--boot-id-path",
                       "/b",
                       "--metadata-path",
                       "/m.json",
                       "--checks",
                       "InfiniBandStateCheck, EthernetStateCheck,NoSuchCheck",
                       "--node-name",
                       "gpu-7",
                       "--nic-exclusion-regex",
                       "^eno.*",
                       "--sysfs-root",
                       "/host/sys",
                       "--proc-net-route",
                       "/host/route",
                       "--processing-strategy",
                       "STORE_ONLY",
                       "--nic-inclusion-regex-override",
                       "^mlx5_[0-3]$"});
  ASSERT_TRUE(parsed.has_value()) << parsed.error().to_string();
  EXPECT_EQ(parsed->state_polling_interval, std::chrono::milliseconds(500));
  EXPECT_EQ(parsed->state_file, "/s.json");
  EXPECT_EQ(parsed->boot_id_path, "/b");
  EXPECT_EQ(parsed->metadata_path, "/m.json");
  EXPECT_EQ(parsed->checks, (std::set<nic_check>{nic_check::infiniband_state,
                                                 nic_check::ethernet_state}));
  EXPECT_EQ(parsed->unknown_checks, std::vector<std::string>{"NoSuchCheck"});
  EXPECT_EQ(parsed->node_name, "gpu-7");
  EXPECT_EQ(parsed->nic_exclusion_regex, "^eno.*");
  EXPECT_EQ(parsed->nic_inclusion_regex_override, "^mlx5_[0-3]$");
  EXPECT_EQ(parsed->sysfs_root, "/host/sys");
  EXPECT_EQ(parsed->proc_net_route, "/host/route");
  EXPECT_EQ(parsed->strategy, processing_strategy::store_only);
}

TEST(nic_monitor_options, errors_name_the_flag) {
  expect_failure({"--state-polling-interval", "soon"}, "--state-polling-interval",
                 "not a duration");
  expect_failure({"--state-polling-interval", "0s"}, "--state-polling-interval",
                 "at least 1ms");
  expect_failure({"--checks", "Bogus"}, "--checks", "no known check");
  expect_failure({"--nic-exclusion-regex", "^(veth"}, "--nic-exclusion-regex",
                 "invalid pattern");
  expect_failure({"--processing-strategy", "YOLO"}, "--processing-strategy",
                 "EXECUTE_REMEDIATION");
  expect_failure({"--state-file", ""}, "--state-file", "empty");
  expect_failure({"--state-file"}, "--state-file", "needs a value");
  expect_failure({"--frobnicate", "1"}, "--frobnicate", "unknown option");
  expect_failure({"stray"}, "stray", "unexpected argument");
}

// seed 002 §12.1: --node-name, else NODE_NAME; startup fails if unset.
TEST(nic_monitor_options, node_name_is_required) {
  auto parsed = parse({}, std::nullopt);
  ASSERT_FALSE(parsed.has_value());
  EXPECT_EQ(parsed.error().where, "--node-name");
  EXPECT_EQ(parse({"--node-name", "x"}, std::nullopt)->node_name, "x");
  EXPECT_EQ(parse({"--node-name", "x"}, "env")->node_name, "x");
}

TEST(nic_monitor_options, go_durations) {
  EXPECT_EQ(*parse_go_duration("1s"), std::chrono::milliseconds(1000));
  EXPECT_EQ(*parse_go_duration("1.5s"), std::chrono::milliseconds(1500));
  EXPECT_EQ(*parse_go_duration("1m30s"), std::chrono::milliseconds(90000));
  EXPECT_EQ(*parse_go_duration("2h"), std::chrono::hours(2));
  EXPECT_EQ(*parse_go_duration("250ms"), std::chrono::milliseconds(250));
  EXPECT_FALSE(parse_go_duration("").has_value());
  EXPECT_FALSE(parse_go_duration("10").has_value());
  EXPECT_FALSE(parse_go_duration("-1s").has_value());
  EXPECT_FALSE(parse_go_duration("1x").has_value());
  EXPECT_FALSE(parse_go_duration("500us").has_value()); // under a millisecond
}

TEST(nic_monitor_options, check_names) {
  for (auto c : {nic_check::infiniband_state, nic_check::infiniband_degradation,
                 nic_check::ethernet_state, nic_check::ethernet_degradation})
    EXPECT_EQ(parse_nic_check(to_string(c)), c);
  EXPECT_EQ(state_check_for("Ethernet"), nic_check::ethernet_state);
  EXPECT_EQ(state_check_for("InfiniBand"), nic_check::infiniband_state);
  EXPECT_EQ(degradation_check_for("Ethernet"), nic_check::ethernet_degradation);
  EXPECT_FALSE(parse_nic_check("nope").has_value());
}

TEST(nic_monitor_options, name_patterns) {
  auto ok = compile_name_patterns("--x", "^veth.*, ^lo$,,");
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok->size(), 2u);
  auto bad = compile_name_patterns("--x", "[");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().where, "--x");
}

} // namespace
} // namespace vigil::agent
