#include "actors/control/fleet/agent_liveness.hpp"

#include <gtest/gtest.h>

namespace vigil::control {
namespace {

using namespace std::chrono_literals;

const wall_time t0 = from_unix(1'800'000'000, 0);

TEST(agent_liveness, a_gpu_node_never_heard_of_is_flagged_once_after_the_window) {
  agent_liveness live(300s);
  live.watch("gpu-1", t0);
  EXPECT_TRUE(live.newly_silent(t0 + 299s).empty());
  auto silent = live.newly_silent(t0 + 300s);
  ASSERT_EQ(silent.size(), 1u);
  EXPECT_EQ(silent[0].first, "gpu-1");
  EXPECT_EQ(silent[0].second, t0);
  EXPECT_TRUE(live.newly_silent(t0 + 900s).empty()); // flagged once
  EXPECT_EQ(live.silent(), 1u);
}

TEST(agent_liveness, a_heartbeat_keeps_it_and_clears_a_flag) {
  agent_liveness live(300s);
  live.watch("gpu-1", t0);
  EXPECT_FALSE(live.heard("gpu-1", t0 + 200s));
  EXPECT_TRUE(live.newly_silent(t0 + 450s).empty());
  ASSERT_EQ(live.newly_silent(t0 + 500s).size(), 1u);
  EXPECT_TRUE(live.heard("gpu-1", t0 + 600s)); // it was flagged: tell the node
  EXPECT_EQ(live.silent(), 0u);
  // Watching a node already heard of does not reset its clock.
  live.watch("gpu-1", t0 + 800s);
  EXPECT_EQ(live.newly_silent(t0 + 900s).size(), 1u);
}

TEST(agent_liveness, forgotten_nodes_and_a_zero_window_flag_nothing) {
  agent_liveness live(300s);
  live.watch("gpu-1", t0);
  live.forget("gpu-1");
  EXPECT_TRUE(live.newly_silent(t0 + 1h).empty());
  agent_liveness off(0s);
  off.watch("gpu-1", t0);
  EXPECT_TRUE(off.newly_silent(t0 + 24h).empty());
}

TEST(agent_liveness, heartbeats_decode_and_errors_name_the_field) {
  auto beat = decode_heartbeat(
    R"({"nodeName":"gpu-1","agentVersion":"0.1.0","bootId":"b","intervalSeconds":60,)"
    R"("sentAt":"2026-11-25T04:00:00Z"})");
  ASSERT_TRUE(beat.has_value()) << beat.error().to_string();
  EXPECT_EQ(beat->node_name, "gpu-1");
  EXPECT_EQ(beat->interval_seconds, 60);
  ASSERT_TRUE(beat->sent_at.has_value());
  auto error_of = [](std::string_view body) {
    auto b = decode_heartbeat(body);
    return b ? std::string{} : b.error().to_string();
  };
  EXPECT_NE(error_of("{}").find("nodeName"), std::string::npos);
  EXPECT_NE(error_of("[]").find("heartbeat"), std::string::npos);
  EXPECT_NE(error_of(R"({"nodeName":7})").find("nodeName"), std::string::npos);
  EXPECT_NE(error_of(R"({"nodeName":"n","sentAt":"yesterday"})").find("sentAt"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"nodeName":"n","intervalSeconds":-1})").find("intervalSeconds"),
            std::string::npos);
  EXPECT_FALSE(beat->gpus.has_value()); // an agent without metadata
}

TEST(agent_liveness, a_heartbeat_carries_what_the_agent_knows_of_its_gpus) {
  auto beat = decode_heartbeat(
    R"({"nodeName":"gpu-1","gpus":{"product":"NVIDIA A100-SXM4-80GB","count":8,)"
    R"("nvswitches":6,"driverVersion":"575.57.08","futureKey":true}})");
  ASSERT_TRUE(beat.has_value()) << beat.error().to_string();
  ASSERT_TRUE(beat->gpus.has_value());
  EXPECT_EQ(*beat->gpus, (agent_gpu_facts{"NVIDIA A100-SXM4-80GB", 8, 6, "575.57.08"}));
  auto partial = decode_heartbeat(R"({"nodeName":"gpu-1","gpus":{"count":1}})");
  ASSERT_TRUE(partial.has_value());
  EXPECT_EQ(partial->gpus->nvswitch_count, -1); // not said: unknown
  auto error_of = [](std::string_view body) {
    auto b = decode_heartbeat(body);
    return b ? std::string{} : b.error().where;
  };
  EXPECT_EQ(error_of(R"({"nodeName":"n","gpus":[]})"), "gpus");
  EXPECT_EQ(error_of(R"({"nodeName":"n","gpus":{"count":-2}})"), "gpus.count");
  EXPECT_EQ(error_of(R"({"nodeName":"n","gpus":{"nvswitches":1.5}})"), "gpus.nvswitches");
  EXPECT_EQ(error_of(R"({"nodeName":"n","gpus":{"product":6}})"), "gpus.product");
}

} // namespace
} // namespace vigil::control
