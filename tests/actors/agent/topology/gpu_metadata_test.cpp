#include "actors/agent/topology/gpu_metadata.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace vigil::agent {
namespace {

std::string fixture(const std::string& name) {
  const char* dir = std::getenv("VIGIL_SOURCE_DIR");
  std::ifstream in(std::string(dir != nullptr ? dir : ".") + "/tests/data/topo/" + name);
  EXPECT_TRUE(in.good()) << name;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

gpu_metadata two_gpus_on_two_switches() {
  gpu_metadata md;
  md.node_name = "n";
  md.driver_version = "575.57.08";
  gpu_info a;
  a.gpu_id = 0;
  a.pci_address = "0000:07:00.0";
  a.uuid = "GPU-a";
  a.device_name = "NVIDIA A100-SXM4-80GB";
  a.nvlinks = {{0, "0008:00:00.0", 29}, {1, "0005:00:00.0", 34}};
  gpu_info b = a;
  b.gpu_id = 1;
  b.pci_address = "0000:0f:00.0";
  b.uuid = "GPU-b";
  b.nvlinks = {{0, "0008:00:00.0", 31}, {1, "0005:00:00.0", -1}};
  md.gpus = {a, b};
  md.nvswitches = {"0005:00:00.0", "0008:00:00.0"};
  md.nvlinks_read = true;
  return md;
}

TEST(gpu_metadata, reads_nvsentinels_metadata_collector_file) {
  auto md = decode_gpu_metadata(fixture("nvsentinel_a100_gpu_metadata.json"));
  ASSERT_TRUE(md.has_value()) << md.error().to_string();
  EXPECT_EQ(md->node_name, "hgx-a100-17");
  ASSERT_EQ(md->gpus.size(), 2u);
  const auto& gpu1 = md->gpus[1];
  EXPECT_EQ(gpu1.pci_address, "0000:0f:00.0"); // upper case normalised
  EXPECT_EQ(gpu1.numa_node, -1);               // NVSentinel does not write it
  EXPECT_EQ(gpu1.device_name, "NVIDIA A100-SXM4-80GB");
  ASSERT_EQ(gpu1.nvlinks.size(), 4u);
  EXPECT_EQ(gpu1.nvlinks[0], (nvlink_info{0, "0008:00:00.0", 31}));
  EXPECT_EQ(gpu1.nvlinks[3].remote_link_id, -1);
  EXPECT_EQ(md->nvswitches, (std::vector<std::string>{"0008:00:00.0", "0005:00:00.0"}));
  EXPECT_TRUE(md->nic_topology.empty());
}

TEST(gpu_metadata, nvlinks_and_switches_round_trip) {
  const auto md = two_gpus_on_two_switches();
  auto back = decode_gpu_metadata(encode_gpu_metadata(md));
  ASSERT_TRUE(back.has_value()) << back.error().to_string();
  EXPECT_EQ(*back, md);
}

TEST(gpu_metadata, a_file_without_the_new_fields_encodes_as_before) {
  gpu_metadata md;
  md.node_name = "n";
  gpu_info gpu;
  gpu.pci_address = "0000:03:00.0";
  md.gpus = {gpu};
  const auto text = encode_gpu_metadata(md);
  for (const char* key : {"nvswitches", "nvlinks", "driver_version", "device_name"})
    EXPECT_EQ(text.find(key), std::string::npos) << key;
}

TEST(gpu_metadata, the_facts_a_heartbeat_carries) {
  auto facts = gpu_facts_of(two_gpus_on_two_switches());
  EXPECT_EQ(facts, (agent_gpu_facts{
                     "NVIDIA A100-SXM4-80GB",
                     2,
                     2,
                     "575.57.08",
                     {{0, "GPU-a", "0000:07:00.0"}, {1, "GPU-b", "0000:0f:00.0"}}}));
  auto back = decode_agent_gpu_facts(encode_agent_gpu_facts(facts));
  ASSERT_TRUE(back.has_value()) << back.error().to_string();
  EXPECT_EQ(*back, facts);
  // NVLinks never read: the switches are unknown, not none.
  gpu_metadata old;
  old.gpus.resize(8);
  for (std::size_t i = 0; i < old.gpus.size(); ++i)
    old.gpus[i].pci_address = "0000:1" + std::to_string(i) + ":00.0";
  EXPECT_EQ(gpu_facts_of(old).nvswitch_count, -1);
  EXPECT_EQ(gpu_facts_of(old).gpu_count, 8);
  old.nvlinks_read = true; // read, and none found (a PCIe or VM GPU)
  EXPECT_EQ(gpu_facts_of(old).nvswitch_count, 0);
  EXPECT_TRUE(gpu_facts_of(old).devices.empty()); // no UUIDs known
  auto again = decode_gpu_metadata(encode_gpu_metadata(old));
  ASSERT_TRUE(again.has_value());
  EXPECT_TRUE(again->nvlinks_read);
}

TEST(gpu_metadata, bad_devices_in_a_heartbeat_are_named) {
  auto where = [](const char* text) {
    auto facts = decode_agent_gpu_facts(nlohmann::json::parse(text));
    EXPECT_FALSE(facts.has_value()) << text;
    return facts ? std::string{} : facts.error().where;
  };
  EXPECT_EQ(where(R"({"devices": {}})"), "gpus.devices");
  EXPECT_EQ(where(R"({"devices": [{"uuid": "GPU-a"}, 7]})"), "gpus.devices[1]");
  EXPECT_EQ(where(R"({"devices": [{"pci": "0000:07:00.0"}]})"), "gpus.devices[0].uuid");
  EXPECT_EQ(where(R"({"devices": [{"uuid": "GPU-a", "pci": 7}]})"),
            "gpus.devices[0].pci");
  EXPECT_EQ(where(R"({"devices": [{"uuid": "GPU-a", "index": -1}]})"),
            "gpus.devices[0].index");
  auto fine =
    decode_agent_gpu_facts(nlohmann::json::parse(R"({"devices": [{"uuid": "GPU-a"}]})"));
  ASSERT_TRUE(fine.has_value());
  EXPECT_EQ(fine->devices[0].index, -1);
  EXPECT_EQ(fine->devices[0].pci, "");
}

TEST(gpu_metadata, bad_nvlink_and_switch_fields_are_named) {
  auto field_of = [](const std::string& text) {
    auto md = decode_gpu_metadata(text);
    EXPECT_FALSE(md.has_value()) << text;
    return md ? std::string{} : md.error().where;
  };
  const std::string gpu = R"({"gpu_id": 0, "pci_address": "0000:07:00.0", "nvlinks": )";
  EXPECT_EQ(field_of(R"({"gpus": [)" + gpu + R"("x"}]})"), "gpus[0].nvlinks");
  EXPECT_EQ(field_of(R"({"gpus": [)" + gpu
                     + R"([{"link_id": 0, "remote_pci_address": "0008:00:00.0"},
                           {"link_id": 1, "remote_pci_address": "switch"}]}]})"),
            "gpus[0].nvlinks[1].remote_pci_address");
  EXPECT_EQ(
    field_of(R"({"gpus": [)" + gpu + R"([{"remote_pci_address": "0008:00:00.0"}]}]})"),
    "gpus[0].nvlinks[0].link_id");
  EXPECT_EQ(field_of(R"({"gpus": [], "nvswitches": "0008:00:00.0"})"), "nvswitches");
  EXPECT_EQ(field_of(R"({"gpus": [], "nvswitches": ["0008:00:00.0", 7]})"),
            "nvswitches[1]");
}

TEST(gpu_metadata, the_gpus_behind_a_switch_port) {
  const auto md = two_gpus_on_two_switches();
  auto uuids = [](const std::vector<const gpu_info*>& gpus) {
    std::vector<std::string> out;
    for (const auto* g : gpus)
      out.push_back(g->uuid);
    return out;
  };
  // The port names one GPU; the switch alone names every GPU it reaches.
  EXPECT_EQ(uuids(gpus_behind_nvswitch(md, "0008:00:00.0", 31)),
            std::vector<std::string>{"GPU-b"});
  EXPECT_EQ(uuids(gpus_behind_nvswitch(md, "00000008:00:00.0", std::nullopt)),
            (std::vector<std::string>{"GPU-a", "GPU-b"}));
  EXPECT_TRUE(gpus_behind_nvswitch(md, "0008:00:00.0", 7).empty());
  EXPECT_TRUE(gpus_behind_nvswitch(md, "0000:86:00.0", std::nullopt).empty());
  EXPECT_TRUE(gpus_behind_nvswitch(md, "garbage", std::nullopt).empty());
  // A link whose far port is unknown (-1) is matched by the switch only.
  EXPECT_EQ(uuids(gpus_behind_nvswitch(md, "0005:00:00.0", 34)),
            std::vector<std::string>{"GPU-a"});
}

} // namespace
} // namespace vigil::agent
