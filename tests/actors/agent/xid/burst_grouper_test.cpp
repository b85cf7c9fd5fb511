#include "actors/agent/xid/burst_grouper.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace vigil::agent {
namespace {

using namespace std::chrono_literals;

const wall_time t0 = from_unix(1761219482, 0);

health_event xid(std::string code, std::string uuid, std::string id = "id") {
  health_event e;
  e.id = std::move(id);
  e.agent = "syslog-health-monitor";
  e.component_class = "GPU";
  e.check_name = "SysLogsXIDError";
  e.node_name = "node1";
  e.is_fatal = true;
  e.error_codes = {std::move(code)};
  e.entities = {{"PCI", "0000:03:00"}, {"GPU_UUID", std::move(uuid)}};
  return e;
}

health_event reset(std::string uuid) {
  auto e = xid("", std::move(uuid), "reset");
  e.error_codes.clear();
  e.is_fatal = false;
  e.is_healthy = true;
  return e;
}

TEST(burst_grouper, first_event_goes_out_at_once_and_repeats_are_counted) {
  burst_grouper grouper;
  std::vector<closed_burst> closed;
  auto first = grouper.offer(xid("48", "GPU-a", "first"), t0, closed);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->id, "first");
  EXPECT_EQ(first->metadata.at("burstCount"), "1");
  for (int i = 1; i < 100; ++i)
    EXPECT_FALSE(grouper.offer(xid("48", "GPU-a", "later"), t0 + i * 1s, closed));
  EXPECT_TRUE(closed.empty());
  EXPECT_EQ(grouper.open_bursts(), 1u);
  grouper.expire(t0 + 3min, closed);
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(closed[0].count, 100u);
  EXPECT_EQ(closed[0].event.id, "first");
  EXPECT_EQ(closed[0].event.metadata.at("burstCount"), "100");
  EXPECT_EQ(closed[0].event.metadata.at("burstFirstSeen"), format_rfc3339(t0));
  EXPECT_EQ(closed[0].event.metadata.at("burstLastSeen"), format_rfc3339(t0 + 99s));
  EXPECT_EQ(grouper.open_bursts(), 0u);
}

TEST(burst_grouper, window_is_fixed_from_the_first_event) {
  burst_grouper grouper(3min);
  std::vector<closed_burst> closed;
  EXPECT_TRUE(grouper.offer(xid("48", "GPU-a"), t0, closed));
  EXPECT_FALSE(grouper.offer(xid("48", "GPU-a"), t0 + 179s, closed));
  auto next = grouper.offer(xid("48", "GPU-a", "next"), t0 + 180s, closed);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->id, "next");
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(closed[0].count, 2u);
}

TEST(burst_grouper, different_gpu_code_node_or_link_are_different_bursts) {
  burst_grouper grouper;
  std::vector<closed_burst> closed;
  EXPECT_TRUE(grouper.offer(xid("48", "GPU-a"), t0, closed));
  EXPECT_TRUE(grouper.offer(xid("48", "GPU-b"), t0, closed));
  EXPECT_TRUE(grouper.offer(xid("63", "GPU-a"), t0, closed));
  auto other_node = xid("48", "GPU-a");
  other_node.node_name = "node2";
  EXPECT_TRUE(grouper.offer(other_node, t0, closed));
  auto link1 = xid("20034", "");
  link1.component_class = "NVSwitch";
  link1.entities = {{"PCI", "0000:86:00"}, {"NVLINK", "1"}};
  auto link2 = link1;
  link2.entities[1].value = "2";
  EXPECT_TRUE(grouper.offer(link1, t0, closed));
  EXPECT_TRUE(grouper.offer(link2, t0, closed));
  EXPECT_FALSE(grouper.offer(link2, t0 + 1s, closed));
  EXPECT_EQ(grouper.open_bursts(), 6u);
}

TEST(burst_grouper, gpu_without_uuid_is_keyed_by_pci) {
  burst_grouper grouper;
  std::vector<closed_burst> closed;
  auto a = xid("79", "");
  a.entities = {{"PCI", "0000:b3:00"}};
  auto b = a;
  b.check_name = "SysLogsGPUFallenOff"; // the fallen-off message joins XID 79's burst
  EXPECT_TRUE(grouper.offer(a, t0, closed));
  EXPECT_FALSE(grouper.offer(b, t0 + 1s, closed));
}

TEST(burst_grouper, healthy_event_closes_that_gpus_bursts_and_passes_through) {
  burst_grouper grouper;
  std::vector<closed_burst> closed;
  grouper.offer(xid("48", "GPU-a"), t0, closed);
  grouper.offer(xid("48", "GPU-a"), t0 + 1s, closed);
  grouper.offer(xid("48", "GPU-b"), t0, closed);
  auto healthy = grouper.offer(reset("GPU-a"), t0 + 2s, closed);
  ASSERT_TRUE(healthy);
  EXPECT_TRUE(healthy->is_healthy);
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(closed[0].count, 2u);
  EXPECT_EQ(grouper.open_bursts(), 1u);
  // A new fault right after the reset is sent at once.
  EXPECT_TRUE(grouper.offer(xid("48", "GPU-a"), t0 + 3s, closed));
}

TEST(burst_grouper, healthy_event_without_entities_closes_its_check) {
  burst_grouper grouper;
  std::vector<closed_burst> closed;
  grouper.offer(xid("48", "GPU-a"), t0, closed);
  auto sxid = xid("20034", "");
  sxid.check_name = "SysLogsSXIDError";
  grouper.offer(sxid, t0, closed);
  auto all = reset("");
  all.entities.clear();
  grouper.offer(all, t0 + 1s, closed);
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(closed[0].event.check_name, "SysLogsXIDError");
}

TEST(burst_grouper, close_all) {
  burst_grouper grouper;
  std::vector<closed_burst> closed;
  grouper.offer(xid("48", "GPU-a"), t0, closed);
  grouper.offer(xid("48", "GPU-b"), t0, closed);
  grouper.close_all(closed);
  EXPECT_EQ(closed.size(), 2u);
  EXPECT_EQ(grouper.open_bursts(), 0u);
}

// A GPU logging 800,000 identical lines produces a handful of events.
TEST(burst_grouper, eight_hundred_thousand_lines_make_a_handful_of_events) {
  burst_grouper grouper;
  std::vector<closed_burst> closed;
  const auto event = xid("48", "GPU-a");
  int sent = 0;
  // 800,000 lines over 15 minutes: one every 1.125 ms.
  for (int i = 0; i < 800000; ++i)
    if (grouper.offer(event, t0 + std::chrono::microseconds(i * 1125LL), closed))
      ++sent;
  grouper.close_all(closed);
  EXPECT_EQ(sent, 5);
  std::uint64_t total = 0;
  for (const auto& c : closed)
    total += c.count;
  EXPECT_EQ(closed.size(), 5u);
  EXPECT_EQ(total, 800000u);
}

} // namespace
} // namespace vigil::agent
