// `nvidia-smi nvlink --status` as drivers print it, and which GPUs lost links
// their peers have.
#include "actors/agent/fabric/nvlink_status.hpp"

#include <random>

#include <gtest/gtest.h>

namespace vigil::agent {
namespace {

// An HGX H100 node's shape (18 links a GPU), cut to 3 GPUs and 4 links.
const char* hgx = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0a)\n"
                  "\t Link 0: 26.562 GB/s\n"
                  "\t Link 1: 26.562 GB/s\n"
                  "\t Link 2: 26.562 GB/s\n"
                  "\t Link 3: 26.562 GB/s\n"
                  "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-1b)\n"
                  "\t Link 0: 26.562 GB/s\n"
                  "\t Link 1: <inactive>\n"
                  "\t Link 2: 26.562 GB/s\n"
                  "\t Link 3: <inactive>\n"
                  "GPU 2: NVIDIA H100 80GB HBM3 (UUID: GPU-2c)\n"
                  "\t NVML: Unable to retrieve NVLink information as all links are "
                  "inActive\n";

TEST(nvlink_status, reads_each_gpus_links) {
  auto gpus = parse_nvlink_status(hgx);
  ASSERT_TRUE(gpus.has_value()) << gpus.error().to_string();
  ASSERT_EQ(gpus->size(), 3u);
  EXPECT_EQ((*gpus)[1].uuid, "GPU-1b");
  EXPECT_EQ((*gpus)[0].active.size(), 4u);
  EXPECT_EQ((*gpus)[1].inactive, (std::vector<int>{1, 3}));
  EXPECT_TRUE((*gpus)[2].none_active);
}

TEST(nvlink_status, a_gpu_with_fewer_links_than_its_peers_is_named) {
  auto faults = nvlink_shortfalls(*parse_nvlink_status(hgx));
  ASSERT_EQ(faults.size(), 2u);
  EXPECT_EQ(faults[0], "GPU 1 (GPU-1b): NVLinks 1, 3 inactive (2 of 4 active)");
  EXPECT_EQ(faults[1], "GPU 2 (GPU-2c): every NVLink inactive (0 of 4 active)");
}

// The H200 VM of the device session printed nothing (no NVLinks); a PCIe
// board likewise: nothing to judge.
TEST(nvlink_status, no_links_anywhere_says_nothing) {
  auto empty = parse_nvlink_status("");
  ASSERT_TRUE(empty.has_value());
  EXPECT_TRUE(nvlink_shortfalls(*empty).empty());
  auto down = parse_nvlink_status("GPU 0: NVIDIA A100 (UUID: GPU-0a)\n"
                                  "\t Link 0: <inactive>\n"
                                  "GPU 1: NVIDIA A100 (UUID: GPU-1b)\n"
                                  "\t Link 0: <inactive>\n");
  ASSERT_TRUE(down.has_value());
  EXPECT_TRUE(nvlink_shortfalls(*down).empty()); // the fabric state reports this
}

TEST(nvlink_status, bad_lines_are_named_and_garbage_never_crashes) {
  auto orphan = parse_nvlink_status("\t Link 0: 26.562 GB/s\n");
  ASSERT_FALSE(orphan.has_value());
  EXPECT_EQ(orphan.error().where, "line 1");
  auto bad = parse_nvlink_status("GPU 0: X (UUID: GPU-0a)\n\t Link x: 1 GB/s\n");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().where, "line 2");
  std::mt19937 random(5);
  for (int round = 0; round < 300; ++round) {
    std::string text(static_cast<std::size_t>(random() % 160), '\0');
    for (auto& c : text)
      c = "GPU Link:0123 \n\tinactive(UUID)"[random() % 30];
    if (auto parsed = parse_nvlink_status(text))
      nvlink_shortfalls(*parsed);
  }
  const std::string all = hgx;
  for (std::size_t n = 0; n <= all.size(); ++n)
    if (auto parsed = parse_nvlink_status(all.substr(0, n)))
      nvlink_shortfalls(*parsed);
}

} // namespace
} // namespace vigil::agent
