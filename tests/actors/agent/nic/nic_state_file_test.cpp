#include "actors/agent/nic/nic_state_file.hpp"

#include <filesystem>

#include <gtest/gtest.h>

#include "tests/support/fake_sysfs.hpp"

namespace vigil::agent {
namespace {

nic_monitor_state sample_state() {
  nic_monitor_state s;
  s.boot_id = "boot-1";
  port_record down;
  down.state = "1: DOWN";
  down.phys_state = "3: Disabled";
  down.link_layer = "InfiniBand";
  down.health = recorded_health::unhealthy;
  down.counters.readings = {{"link_downed", 3}, {"rnr_nak_retry_err", 9}};
  down.counters.baselines = {{"link_downed", 1}, {"rnr_nak_retry_err", 2}};
  down.counters.breached = {"rnr_nak_retry_err"};
  s.ports["mlx5_0/1"] = down;
  port_record up;
  up.state = "4: ACTIVE";
  up.phys_state = "5: LinkUp";
  up.link_layer = "Ethernet";
  up.health = recorded_health::healthy;
  s.ports["mlx5_1/1"] = up;
  s.ports["mlx5_2/1"] = port_record{};
  port_record init;
  init.state = "2: INIT";
  init.phys_state = "5: LinkUp";
  init.link_layer = "InfiniBand";
  init.health = recorded_health::degraded;
  s.ports["mlx5_4/1"] = init;
  s.known_devices = {"mlx5_0", "mlx5_1", "mlx5_2"};
  s.disappeared_devices = {"mlx5_3"};
  s.anomalous_cards = {"0000:0c:00"};
  s.cards_below_mode_since = {{"0000:0d:00", 1700000000}};
  return s;
}

TEST(nic_state_file, round_trips) {
  auto s = sample_state();
  auto decoded = decode_nic_state(encode_nic_state(s));
  ASSERT_TRUE(decoded.has_value()) << decoded.error().to_string();
  EXPECT_TRUE(*decoded == s);
}

TEST(nic_state_file, wrong_fields_are_named) {
  auto bad =
    decode_nic_state(R"({"version":1,"boot_id":7,"ports":{},"known_devices":[]})");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().where, "boot_id");
  auto port = decode_nic_state(
    R"({"version":1,"boot_id":"b","ports":{"mlx5_0/1":{"state":"x"}},"known_devices":[]})");
  ASSERT_FALSE(port.has_value());
  EXPECT_EQ(port.error().where, "ports.mlx5_0/1.phys_state");
  auto health = decode_nic_state(
    R"({"version":1,"boot_id":"b","ports":{"mlx5_0/1":{"state":"x","phys_state":"y",
        "link_layer":"InfiniBand","health":"meh"}},"known_devices":[]})");
  ASSERT_FALSE(health.has_value());
  EXPECT_EQ(health.error().where, "ports.mlx5_0/1.health");
  EXPECT_EQ(decode_nic_state(R"({"version":2})").error().where, "version");
  EXPECT_FALSE(decode_nic_state("[]").has_value());
  EXPECT_FALSE(decode_nic_state("{not json").has_value());
}

// A file written before counters had baselines: its last readings serve as
// the baselines, and its breaches stand.
TEST(nic_state_file, files_without_counter_baselines_are_read) {
  auto old = decode_nic_state(R"({"version":1,"boot_id":"b","ports":{
      "mlx5_0/1":{"state":"4: ACTIVE","phys_state":"5: LinkUp","link_layer":"InfiniBand",
        "health":"healthy","counters":{"link_downed":2,"rnr_nak_retry_err":5},
        "breached_counters":["rnr_nak_retry_err"]},
      "mlx5_1/1":{"state":"4: ACTIVE","phys_state":"5: LinkUp","link_layer":"InfiniBand",
        "health":"healthy"}},"known_devices":["mlx5_0","mlx5_1"]})");
  ASSERT_TRUE(old.has_value()) << old.error().to_string();
  const auto& counters = old->ports.at("mlx5_0/1").counters;
  const std::map<std::string, std::uint64_t> readings{{"link_downed", 2},
                                                      {"rnr_nak_retry_err", 5}};
  EXPECT_EQ(counters.readings, readings);
  EXPECT_EQ(counters.baselines, readings);
  EXPECT_EQ(counters.breached, std::set<std::string>{"rnr_nak_retry_err"});
  EXPECT_TRUE(old->ports.at("mlx5_1/1").counters == counter_history{});
  auto bad = decode_nic_state(R"({"version":1,"boot_id":"b","ports":{
      "mlx5_0/1":{"state":"x","phys_state":"y","link_layer":"InfiniBand",
        "health":"healthy","counter_baselines":{"link_downed":"two"}}},
      "known_devices":[]})");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().where, "ports.mlx5_0/1.counter_baselines");
}

// seed 002 §12.1 --state-file: missing is a fresh boot; corrupt too, with a note.
TEST(nic_state_file, missing_file_is_a_fresh_boot_without_problem) {
  test::temp_dir dir;
  auto loaded = load_nic_state_file(dir.path() + "/state.json");
  EXPECT_FALSE(loaded.state.has_value());
  EXPECT_FALSE(loaded.problem.has_value());
}

TEST(nic_state_file, corrupt_file_is_a_fresh_boot_with_a_problem) {
  test::temp_dir dir;
  const auto path = dir.path() + "/state.json";
  {
    std::ofstream out(path);
    out << R"({"version":1,"boot_id":"b","ports":)"; // cut off mid-write
  }
  auto loaded = load_nic_state_file(path);
  EXPECT_FALSE(loaded.state.has_value());
  ASSERT_TRUE(loaded.problem.has_value());
  EXPECT_EQ(loaded.problem->where, path);
  EXPECT_NE(loaded.problem->what.find("fresh boot"), std::string::npos);
}

TEST(nic_state_file, a_directory_in_place_of_the_file_is_a_problem) {
  test::temp_dir dir;
  auto loaded = load_nic_state_file(dir.path());
  EXPECT_FALSE(loaded.state.has_value());
  EXPECT_TRUE(loaded.problem.has_value());
}

TEST(nic_state_file, save_then_load) {
  test::temp_dir dir;
  const auto path = dir.path() + "/state.json";
  auto s = sample_state();
  ASSERT_TRUE(save_nic_state_file(path, s).has_value());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  auto loaded = load_nic_state_file(path);
  ASSERT_TRUE(loaded.state.has_value());
  EXPECT_TRUE(*loaded.state == s);
  s.boot_id = "boot-2";
  ASSERT_TRUE(save_nic_state_file(path, s).has_value());
  EXPECT_EQ(load_nic_state_file(path).state->boot_id, "boot-2");
}

TEST(nic_state_file, save_into_a_missing_directory_fails_naming_the_file) {
  test::temp_dir dir;
  const auto path = dir.path() + "/no/such/state.json";
  auto st = save_nic_state_file(path, sample_state());
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().where, path);
}

TEST(nic_state_file, port_key) {
  EXPECT_EQ(port_key("mlx5_0", 1), "mlx5_0/1");
}

} // namespace
} // namespace vigil::agent
