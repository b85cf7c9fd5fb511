#include "actors/agent/fabric/gpu_presence.hpp"

#include <algorithm>

#include <gtest/gtest.h>

#include "actors/agent/xid/xid_catalog.hpp"

namespace vigil::agent {
namespace {

using namespace std::chrono_literals;

const wall_time t0 = from_unix(1'800'000'000, 0);

// An 8-GPU answer to the fabric query, less the GPUs named in `without`.
std::vector<fabric_row> answer(std::vector<int> without = {}) {
  std::string csv;
  for (int i = 0; i < 8; ++i)
    if (std::find(without.begin(), without.end(), i) == without.end())
      csv += std::to_string(i) + ", GPU-" + std::to_string(i) + ", 00000000:1"
             + std::to_string(i) + ":00.0, Completed, Success\n";
  auto rows = parse_fabric_query(csv);
  EXPECT_TRUE(rows.has_value());
  return rows ? *rows : std::vector<fabric_row>{};
}

std::vector<std::string> uuids_named(const health_event& e) {
  std::vector<std::string> out;
  for (const auto& ent : e.entities)
    if (ent.type == "GPU_UUID")
      out.push_back(ent.value);
  return out;
}

// nvidia-smi(1) RETURN VALUE: the driver's failures, and the setup's.
TEST(gpu_presence, failures_are_the_drivers_or_the_setups) {
  for (const char* what :
       {"timed out after 30 s; killed", "exited with status 9", "exited with status 10",
        "exited with status 15", "exited with status 255"})
    EXPECT_EQ(classify_nvidia_smi_failure({"nvidia-smi", what}),
              nvidia_smi_failure::driver)
      << what;
  for (const char* what :
       {"exited with status 2", "exited with status 4", "exited with status 12",
        "exited with status 127", "cannot be started: No such file or directory",
        "killed by signal 9", ""})
    EXPECT_EQ(classify_nvidia_smi_failure({"nvidia-smi", what}),
              nvidia_smi_failure::setup)
      << what;
}

// "No devices were found" (exit 6) of a node with GPUs: every one is gone.
TEST(gpu_presence, no_devices_found_is_every_known_gpu_gone) {
  const failure none{"nvidia-smi --query-gpu", "exited with status 6"};
  EXPECT_EQ(classify_nvidia_smi_failure(none), nvidia_smi_failure::no_devices);
  gpu_presence presence("node-1", {});
  (void)presence.observe(answer(), {}, t0);
  EXPECT_TRUE(presence.query_failed(none, t0 + 60s).empty());
  auto gone = presence.query_failed(none, t0 + 120s);
  ASSERT_EQ(gone.size(), 8u);
  for (const auto& e : gone) {
    EXPECT_EQ(e.check_name, gpu_presence_check);
    EXPECT_TRUE(e.is_fatal);
  }
  EXPECT_EQ(presence.observe(answer(), {}, t0 + 180s).size(), 8u); // all back
}

TEST(gpu_presence, unreachable_gpus_are_taken_out_of_the_answer) {
  auto split = split_unreachable(
    "0, GPU-0, 00000000:10:00.0, Completed, Success\n"
    "Unable to determine the device handle for GPU0000:0B:00.0: Unknown Error\n"
    "  Unable to determine the device handle for GPU 0000:3C:00.0: Unknown Error\r\n"
    "Unable to determine the device handle for GPU\n"
    "1, GPU-1, 00000000:11:00.0, Completed, Success");
  EXPECT_EQ(split.unreachable,
            (std::vector<std::string>{"0000:0b:00.0", "0000:3c:00.0"}));
  EXPECT_EQ(split.rows, "0, GPU-0, 00000000:10:00.0, Completed, Success\n"
                        "1, GPU-1, 00000000:11:00.0, Completed, Success\n");
  EXPECT_TRUE(parse_fabric_query(split.rows).has_value());
  EXPECT_EQ(split_unreachable("").rows, "");
}

// The first answer says which GPUs are there, once; a GPU gone from the list
// is a fault at the second reading in a row (a GPU being reset is briefly
// gone), with XID 79's action; listed again, it is healthy again.
TEST(gpu_presence, a_gpu_gone_from_the_list_twice_is_a_fault_until_it_is_back) {
  gpu_presence presence("node-1", {});
  auto first = presence.observe(answer(), {}, t0);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].check_name, nvidia_smi_check);
  EXPECT_TRUE(first[0].is_healthy);
  EXPECT_EQ(first[1].check_name, gpu_presence_check);
  EXPECT_TRUE(first[1].is_healthy);
  EXPECT_EQ(uuids_named(first[1]).size(), 8u);
  EXPECT_EQ(first[1].agent, gpu_presence_agent_name);
  EXPECT_TRUE(presence.observe(answer(), {}, t0 + 60s).empty());
  EXPECT_TRUE(presence.observe(answer({3}), {}, t0 + 120s).empty()); // once: a reset?
  EXPECT_TRUE(presence.observe(answer(), {}, t0 + 180s).empty());    // back: it was
  EXPECT_TRUE(presence.observe(answer({3}), {}, t0 + 240s).empty());
  auto gone = presence.observe(answer({3}), {}, t0 + 300s);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_FALSE(gone[0].is_healthy);
  EXPECT_TRUE(gone[0].is_fatal);
  EXPECT_EQ(gone[0].action, recommended_action::restart_bm);
  EXPECT_EQ(gone[0].error_codes, std::vector<std::string>{"GPU_MISSING"});
  EXPECT_EQ(uuids_named(gone[0]), std::vector<std::string>{"GPU-3"});
  EXPECT_NE(gone[0].message.find("GPU-3 (0000:13:00.0) is gone from nvidia-smi's list"),
            std::string::npos)
    << gone[0].message;
  EXPECT_TRUE(presence.observe(answer({3}), {}, t0 + 360s).empty()); // said once
  auto back = presence.observe(answer(), {}, t0 + 420s);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_TRUE(back[0].is_healthy);
  EXPECT_EQ(uuids_named(back[0]), std::vector<std::string>{"GPU-3"});
}

// A GPU of the node's gpu_metadata that nvidia-smi never lists is gone too,
// and so is one it names as unreachable, known or not by its UUID.
TEST(gpu_presence, known_and_unreachable_gpus_count_as_gone) {
  gpu_presence presence("node-1", {{"GPU-9", "0000:19:00.0"}, {"GPU-1", "0000:11:00.0"}});
  auto first = presence.observe(answer({1}), {"0000:11:00.0", "0000:aa:00.0"}, t0);
  ASSERT_EQ(first.size(), 2u); // nvidia-smi answers; 7 GPUs are there
  EXPECT_EQ(uuids_named(first[1]).size(), 7u);
  auto gone = presence.observe(answer({1}), {"0000:11:00.0", "0000:aa:00.0"}, t0 + 60s);
  ASSERT_EQ(gone.size(), 3u);
  std::vector<std::string> messages;
  for (const auto& e : gone) {
    EXPECT_FALSE(e.is_healthy);
    messages.push_back(e.message);
  }
  EXPECT_NE(messages[0].find("GPU-1 (0000:11:00.0) is unreachable"), std::string::npos)
    << messages[0];
  EXPECT_NE(messages[1].find("GPU-9 (0000:19:00.0) is gone"), std::string::npos)
    << messages[1];
  EXPECT_NE(messages[2].find("GPU at 0000:aa:00.0 is unreachable"), std::string::npos)
    << messages[2];
  EXPECT_TRUE(uuids_named(gone[2]).empty());
  // The GPU at 0000:aa:00.0 is listed again, under its UUID: healthy again.
  auto rows = answer();
  rows.push_back(rows.front());
  rows.back().uuid = "GPU-aa";
  rows.back().pci = "00000000:AA:00.0";
  auto back = presence.observe(rows, {}, t0 + 120s);
  ASSERT_EQ(back.size(), 2u); // GPU-1 and GPU-aa; GPU-9 is still gone
  EXPECT_EQ(uuids_named(back[0]), std::vector<std::string>{"GPU-1"});
  EXPECT_EQ(uuids_named(back[1]), std::vector<std::string>{"GPU-aa"});
  EXPECT_TRUE(back[1].is_healthy);
}

// A driver that does not answer twice in a row is a node fault; a setup
// problem is no verdict; the next answer clears it.
TEST(gpu_presence, a_driver_that_does_not_answer_twice_is_a_node_fault) {
  gpu_presence presence("node-1", {});
  (void)presence.observe(answer(), {}, t0);
  const failure hung{"nvidia-smi --query-gpu", "timed out after 30 s; killed"};
  const failure missing{"nvidia-smi --query-gpu", "exited with status 127"};
  EXPECT_TRUE(presence.query_failed(hung, t0 + 60s).empty());
  EXPECT_TRUE(presence.query_failed(missing, t0 + 120s).empty()); // not the driver's
  EXPECT_TRUE(presence.query_failed(hung, t0 + 180s).empty());
  auto down = presence.query_failed(hung, t0 + 240s);
  ASSERT_EQ(down.size(), 1u);
  EXPECT_EQ(down[0].check_name, nvidia_smi_check);
  EXPECT_FALSE(down[0].is_healthy);
  EXPECT_TRUE(down[0].is_fatal);
  EXPECT_EQ(down[0].action, recommended_action::restart_bm);
  EXPECT_TRUE(down[0].entities.empty()); // the node's, no GPU named
  EXPECT_NE(down[0].message.find("timed out"), std::string::npos);
  EXPECT_TRUE(presence.query_failed(hung, t0 + 300s).empty()); // said once
  auto back = presence.observe(answer(), {}, t0 + 360s);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_TRUE(back[0].is_healthy);
  EXPECT_EQ(back[0].check_name, nvidia_smi_check);
  EXPECT_EQ(back[0].message, "nvidia-smi answers again");
  // One that never answered, on a node with no GPU known, may be the
  // agent's setup: nothing is raised.
  gpu_presence never("node-2", {});
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(never.query_failed(hung, t0 + i * 60s).empty());
  gpu_presence collected("node-3", {{"GPU-0", "0000:10:00.0"}});
  EXPECT_TRUE(collected.query_failed(hung, t0).empty());
  EXPECT_EQ(collected.query_failed(hung, t0 + 60s).size(), 1u);
}

TEST(gpu_presence, a_gpu_gone_takes_the_catalogs_action_for_xid_79) {
  auto catalog = xid_catalog::load(xid_catalog::default_dir());
  ASSERT_TRUE(catalog.has_value()) << catalog.error().to_string();
  const auto* entry = catalog->find(79);
  ASSERT_NE(entry, nullptr);
  gpu_presence presence("node-1", {{"GPU-0", "0000:10:00.0"}}, &*catalog);
  (void)presence.observe(answer({0}), {}, t0);
  auto gone = presence.observe(answer({0}), {}, t0 + 60s);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].action, action_for_bucket(entry->immediate));
}

} // namespace
} // namespace vigil::agent
