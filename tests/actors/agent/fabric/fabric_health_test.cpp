#include "actors/agent/fabric/fabric_health.hpp"

#include <fstream>
#include <random>
#include <sstream>

#include <gtest/gtest.h>

#include "tests/support/source_tree.hpp"

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

// The fabric's health (nvidia-smi -q's Fabric → Health), 12 fields a row.
std::string with_health(const std::string& gpu, const std::string& health) {
  return gpu + ", Completed, Success, " + health + ", True\n";
}
const std::string gpu0 = "0, GPU-0a, 00000000:18:00.0";
const std::string gpu1 = "1, GPU-1b, 00000000:2A:00.0";
const std::string good = "Healthy, Full, False, False, False, None";

// The H200 VM of the device session (driver 580): the health fields exist,
// all N/A without a fabric.
TEST(fabric_health, reads_the_health_fields_of_driver_580) {
  std::ifstream in(vigil::test::source_dir()
                   + "/tests/data/fabric/h200_1gpu_vm_driver580_health.csv");
  std::stringstream text;
  text << in.rdbuf();
  auto r = rows(text.str());
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].state, "");
  EXPECT_EQ(r[0].summary, "");
  EXPECT_EQ(r[0].incorrect_configuration, "");
  fabric_health health("n1");
  EXPECT_TRUE(health.observe(r, t0).empty());
  auto parsed = rows(with_health(gpu0, "Limited Capacity, Degraded, False, True, False, "
                                       "Insufficient NVLinks"));
  EXPECT_EQ(parsed[0].partition_assigned, "True");
  ASSERT_EQ(parsed.size(), 1u);
  EXPECT_EQ(parsed[0].summary, "Limited Capacity");
  EXPECT_EQ(parsed[0].bandwidth, "Degraded");
  EXPECT_EQ(parsed[0].route_unhealthy, "True");
  EXPECT_EQ(parsed[0].incorrect_configuration, "Insufficient NVLinks");
  EXPECT_FALSE(parse_fabric_query(gpu0 + ", Completed, Success, Healthy\n").has_value());
}

TEST(fabric_health, a_registered_fabric_in_bad_health_is_a_node_fault) {
  fabric_health health("n1");
  auto first =
    health.observe(rows(with_health(gpu0, good) + with_health(gpu1, good)), t0);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_TRUE(first[0].is_healthy);
  auto degraded = health.observe(
    rows(with_health(gpu0, good)
         + with_health(gpu1, "Unhealthy, Degraded, False, True, False, None")),
    t0 + 60s);
  ASSERT_EQ(degraded.size(), 1u);
  EXPECT_FALSE(degraded[0].is_healthy);
  EXPECT_TRUE(degraded[0].is_fatal);
  EXPECT_EQ(degraded[0].action, recommended_action::restart_bm);
  EXPECT_NE(degraded[0].message.find(
              "GPU 1 (GPU-1b): fabric route unhealthy, bandwidth Degraded"),
            std::string::npos)
    << degraded[0].message;
  EXPECT_EQ(degraded[0].message.find("GPU 0"), std::string::npos);
  auto wrong = health.observe(
    rows(with_health(gpu0, "Unhealthy, Full, False, False, False, Incorrect SysGUID")),
    t0 + 120s);
  ASSERT_EQ(wrong.size(), 1u);
  EXPECT_NE(wrong[0].message.find("incorrect configuration Incorrect SysGUID"),
            std::string::npos);
  // A summary alone (Limited Capacity) is a fault too.
  auto limited =
    health.observe(rows(with_health(gpu0, "Limited Capacity, , , , , ")), t0 + 180s);
  ASSERT_EQ(limited.size(), 1u);
  EXPECT_NE(limited[0].message.find("fabric health Limited Capacity"), std::string::npos);
  auto fixed = health.observe(rows(with_health(gpu0, good)), t0 + 240s);
  ASSERT_EQ(fixed.size(), 1u);
  EXPECT_TRUE(fixed[0].is_healthy);
}

// While the driver recovers a route, bandwidth is degraded on purpose: not
// a fault unless the recovery outlasts the grace.
TEST(fabric_health, a_route_recovery_is_a_fault_only_when_it_outlasts_the_grace) {
  fabric_health health("n1", 600s);
  EXPECT_EQ(health.observe(rows(with_health(gpu0, good)), t0).size(), 1u);
  const auto recovering =
    rows(with_health(gpu0, "Unhealthy, Degraded, True, False, False, None"));
  EXPECT_TRUE(health.observe(recovering, t0 + 10s).empty());
  EXPECT_TRUE(health.observe(recovering, t0 + 609s).empty());
  auto overdue = health.observe(recovering, t0 + 610s);
  ASSERT_EQ(overdue.size(), 1u);
  EXPECT_FALSE(overdue[0].is_healthy);
  EXPECT_NE(overdue[0].message.find("fabric recovery in progress for 600 s"),
            std::string::npos)
    << overdue[0].message;
  // An access-timeout recovery that ends well: healthy again.
  fabric_health other("n2", 600s);
  EXPECT_EQ(other.observe(rows(with_health(gpu0, good)), t0).size(), 1u);
  EXPECT_TRUE(
    other
      .observe(rows(with_health(gpu0, "Healthy, Full, False, False, True, None")),
               t0 + 1s)
      .empty());
  EXPECT_TRUE(other.observe(rows(with_health(gpu0, good)), t0 + 2s).empty()); // unchanged
}

// An HGX node whose NVSwitches need Fabric Manager, and it is gone: a fault
// even while the GPUs still show the fabric completed; its return clears it.
TEST(fabric_health, fabric_manager_missing_where_nvswitches_need_it_is_a_fault) {
  fabric_health health("n1");
  fabric_manager_state manager{4, true};
  EXPECT_TRUE(health.observe(rows(completed), t0, manager)[0].is_healthy);
  manager.running = false;
  auto gone = health.observe(rows(completed), t0 + 60s, manager);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_FALSE(gone[0].is_healthy);
  EXPECT_EQ(gone[0].action, recommended_action::restart_bm);
  EXPECT_NE(gone[0].message.find("nvidia-fabricmanager is not running (4 NVSwitches"),
            std::string::npos)
    << gone[0].message;
  // A driver without fabric fields (N/A) on such a node: still judged.
  fabric_health old_driver("n2");
  auto na =
    old_driver.observe(rows("0, GPU-0a, 00000000:18:00.0, N/A, N/A\n"), t0, manager);
  ASSERT_EQ(na.size(), 1u);
  EXPECT_FALSE(na[0].is_healthy);
  manager.running = true;
  auto back = health.observe(rows(completed), t0 + 120s, manager);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_TRUE(back[0].is_healthy);
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
