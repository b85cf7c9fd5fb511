#include "actors/agent/fabric/fabric_health.hpp"

#include <random>

#include <gtest/gtest.h>

namespace vigil::agent {
namespace {

using namespace std::chrono_literals;

const wall_time t0 = from_unix(1'800'000'000, 0);

std::vector<fabric_row> rows(std::string_view csv) {
  auto parsed = parse_fabric_query(csv);
  EXPECT_TRUE(parsed.has_value()) << parsed.error().to_string();
  return parsed ? *parsed : std::vector<fabric_row>{};
}

// An HGX H100 node with Fabric Manager running, as nvidia-smi prints it.
const char* completed = "0, GPU-0a, 00000000:18:00.0, Completed, Success\n"
                        "1, GPU-1b, 00000000:2A:00.0, Completed, Success\n";

TEST(fabric_health, reads_nvidia_smis_query_and_its_na_spellings) {
  auto r = rows(std::string("index, uuid, pci.bus_id, fabric.state, fabric.status\n")
                + completed + "2, GPU-2c, 00000000:3A:00.0, [N/A], N/A\r\n");
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[1].uuid, "GPU-1b");
  EXPECT_EQ(r[1].state, "Completed");
  EXPECT_EQ(r[1].status, "Success");
  EXPECT_EQ(r[2].state, "");
  auto bad = parse_fabric_query("0, GPU-0a, Completed\n");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().where, "line 1");
  EXPECT_FALSE(parse_fabric_query("x, GPU, p, Completed, Success\n").has_value());
}

// The H200 VM of the device session: one GPU, no fabric (N/A): nothing.
TEST(fabric_health, a_node_without_a_fabric_says_nothing) {
  fabric_health health("n1");
  EXPECT_TRUE(
    health.observe(rows("0, GPU-9e, 00000000:00:06.0, N/A, N/A\n"), t0).empty());
  EXPECT_TRUE(
    health.observe(rows("0, GPU-9e, 00000000:00:06.0, Not Supported, N/A\n"), t0 + 1h)
      .empty());
}

TEST(fabric_health, a_failed_fabric_is_a_node_fault_recommending_a_reboot) {
  fabric_health health("n1");
  auto first = health.observe(rows(completed), t0);
  ASSERT_EQ(first.size(), 1u); // the first reading clears what a last run raised
  EXPECT_TRUE(first[0].is_healthy);
  EXPECT_TRUE(health.observe(rows(completed), t0 + 60s).empty());
  auto broken = health.observe(
    rows("0, GPU-0a, 00000000:18:00.0, Completed, Success\n"
         "1, GPU-1b, 00000000:2A:00.0, Completed, Insufficient Resources\n"),
    t0 + 120s);
  ASSERT_EQ(broken.size(), 1u);
  const auto& e = broken[0];
  EXPECT_FALSE(e.is_healthy);
  EXPECT_TRUE(e.is_fatal);
  EXPECT_EQ(e.action, recommended_action::restart_bm);
  EXPECT_EQ(e.component_class, "NVLinkFabric");
  EXPECT_EQ(e.check_name, fabric_check_name);
  EXPECT_TRUE(e.entities.empty()); // the node, never one GPU
  EXPECT_NE(e.message.find("GPU 1 (GPU-1b): fabric status Insufficient Resources"),
            std::string::npos)
    << e.message;
  EXPECT_NE(e.message.find("nvidia-fabricmanager"), std::string::npos);
  // Fabric Manager restarted: registering again is not yet healthy.
  EXPECT_TRUE(health
                .observe(rows("0, GPU-0a, 00000000:18:00.0, In Progress, N/A\n"
                              "1, GPU-1b, 00000000:2A:00.0, In Progress, N/A\n"),
                         t0 + 180s)
                .empty());
  auto fixed = health.observe(rows(completed), t0 + 240s);
  ASSERT_EQ(fixed.size(), 1u);
  EXPECT_TRUE(fixed[0].is_healthy);
}

TEST(fabric_health, a_registration_that_never_completes_is_a_fault_after_the_grace) {
  fabric_health health("n1", 600s);
  const char* starting = "0, GPU-0a, 00000000:18:00.0, Not Started, N/A\n";
  EXPECT_TRUE(health.observe(rows(starting), t0).empty());
  EXPECT_TRUE(health.observe(rows(starting), t0 + 599s).empty());
  auto overdue = health.observe(rows(starting), t0 + 600s);
  ASSERT_EQ(overdue.size(), 1u);
  EXPECT_FALSE(overdue[0].is_healthy);
  EXPECT_NE(overdue[0].message.find("fabric registration Not Started for 600 s"),
            std::string::npos);
}

TEST(fabric_health, garbage_and_truncation_never_crash) {
  std::mt19937 random(11);
  fabric_health health("n1");
  for (int round = 0; round < 300; ++round) {
    std::string text(static_cast<std::size_t>(random() % 120), '\0');
    for (auto& c : text)
      c = static_cast<char>(random() % 256);
    if (auto parsed = parse_fabric_query(text))
      health.observe(*parsed, t0);
  }
  const std::string line = completed;
  for (std::size_t n = 0; n <= line.size(); ++n)
    if (auto parsed = parse_fabric_query(line.substr(0, n)))
      health.observe(*parsed, t0);
}

} // namespace
} // namespace vigil::agent
