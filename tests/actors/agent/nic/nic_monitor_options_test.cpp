#include "actors/agent/nic/nic_monitor_options.hpp"

#include <algorithm>

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
  // Appendix A "> 0" for every counter, as a rise since vigil's baseline.
  EXPECT_EQ(parsed->counter_thresholds,
            (std::map<std::string, std::uint64_t>{{"link_downed", 0},
                                                  {"excessive_buffer_overrun_errors", 0},
                                                  {"local_link_integrity_errors", 0},
                                                  {"rnr_nak_retry_err", 0}}));
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
                       "^mlx5_[0-3]$",
                       "--counter-threshold",
                       "rnr_nak_retry_err=500, local_link_integrity_errors = 2"});
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
  EXPECT_EQ(parsed->counter_thresholds.at("rnr_nak_retry_err"), 500u);
  EXPECT_EQ(parsed->counter_thresholds.at("local_link_integrity_errors"), 2u);
  EXPECT_EQ(parsed->counter_thresholds.at("link_downed"), 0u);
}

// --counter-threshold in a command that embeds the monitor (vigil agent, vigil
// nic scan): the tuning flags carry it, and each value adds to the defaults.
TEST(nic_monitor_options, counter_thresholds_apply_over_the_defaults) {
  auto specs = nic_monitor_tuning_specs();
  ASSERT_TRUE(std::any_of(specs.begin(), specs.end(), [](const option_spec& s) {
    return s.name == "counter-threshold";
  }));
  auto line = parse_command_line(specs, {"--counter-threshold=link_downed=1"});
  ASSERT_TRUE(line.has_value()) << line.error().to_string();
  nic_monitor_options options;
  ASSERT_TRUE(apply_nic_monitor_flags(*line, options).has_value());
  EXPECT_EQ(options.counter_thresholds.at("link_downed"), 1u);
  EXPECT_EQ(options.counter_thresholds.size(), 4u);
  ASSERT_TRUE(parse_counter_thresholds("rnr_nak_retry_err=7", options.counter_thresholds)
                .has_value());
  EXPECT_EQ(options.counter_thresholds.at("link_downed"), 1u);
  EXPECT_EQ(options.counter_thresholds.at("rnr_nak_retry_err"), 7u);
  // A bad item applies nothing of its value.
  EXPECT_FALSE(
    parse_counter_thresholds("link_downed=5,bogus=1", options.counter_thresholds)
      .has_value());
  EXPECT_EQ(options.counter_thresholds.at("link_downed"), 1u);
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

// A bad --counter-threshold names the flag and the counter or value at fault.
TEST(nic_monitor_options, bad_counter_thresholds_name_the_flag) {
  expect_failure({"--counter-threshold", "symbol_errors=3"}, "--counter-threshold",
                 "unknown counter \"symbol_errors\" (known: link_downed,");
  expect_failure({"--counter-threshold", "link_downed=many"}, "--counter-threshold",
                 "\"many\" for link_downed is not a whole number");
  expect_failure({"--counter-threshold", "link_downed=-1"}, "--counter-threshold",
                 "\"-1\" for link_downed");
  expect_failure({"--counter-threshold", "link_downed=1.5"}, "--counter-threshold",
                 "\"1.5\" for link_downed");
  expect_failure({"--counter-threshold", "rnr_nak_retry_err=99999999999999999999"},
                 "--counter-threshold", "for rnr_nak_retry_err");
  expect_failure({"--counter-threshold", "link_downed="}, "--counter-threshold",
                 "\"\" for link_downed");
  expect_failure({"--counter-threshold", "link_downed"}, "--counter-threshold",
                 "expected NAME=N, got \"link_downed\"");
  expect_failure({"--counter-threshold", "=3"}, "--counter-threshold", "expected NAME=N");
  expect_failure({"--counter-threshold", ","}, "--counter-threshold", "expected NAME=N");
  expect_failure({"--counter-threshold"}, "--counter-threshold", "needs a value");
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
