#include "actors/agent/nic/nic_roles.hpp"

#include <gtest/gtest.h>

namespace vigil::agent {
namespace {

constexpr const char* route_table =
  "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
  "ib0\t0000100A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
  "eth1\t00000000\t0101A8C0\t0003\t0\t0\t200\t00000000\t0\t0\t0\n"
  "eth0\t00000000\t0100000A\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
  "eth9\t00000000\t0100000A\t0002\t0\t0\t0\t00000000\t0\t0\t0\n";

TEST(nic_roles, default_route_is_the_lowest_metric_up_default) {
  EXPECT_EQ(parse_default_route_interface(route_table), "eth0");
}

TEST(nic_roles, no_default_route_gives_empty) {
  EXPECT_EQ(parse_default_route_interface(""), "");
  EXPECT_EQ(parse_default_route_interface("garbage\nmore garbage here\n"), "");
  EXPECT_EQ(parse_default_route_interface(
              "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n"
              "ib0\t0000100A\t00000000\t0001\t0\t0\t0\t00FFFFFF\n"),
            "");
}

gpu_info gpu_on(int numa) {
  gpu_info gpu;
  gpu.numa_node = numa;
  return gpu;
}

// seed 002 §4.1.2: -1 GPUs are left out of the set.
TEST(nic_roles, gpu_numa_set_ignores_unknown) {
  gpu_metadata m;
  m.gpus = {gpu_on(1), gpu_on(-1), gpu_on(3), gpu_on(1)};
  EXPECT_EQ(gpu_numa_set(m), (std::set<int>{1, 3}));
  m.gpus = {gpu_on(-1)};
  EXPECT_TRUE(gpu_numa_set(m).empty());
}

TEST(nic_roles, bluefield_hca_types) {
  EXPECT_TRUE(is_bluefield_dpu("MT41682"));
  EXPECT_TRUE(is_bluefield_dpu("MT41686"));
  EXPECT_TRUE(is_bluefield_dpu("MT41692"));
  EXPECT_FALSE(is_bluefield_dpu("MT4129"));
  EXPECT_FALSE(is_bluefield_dpu(""));
}

nic_classifier classifier(std::string default_route = "") {
  return nic_classifier{{0, 1},
                        {{"pxb", {"SYS", "PXB"}},
                         {"pix", {"PIX", "SYS"}},
                         {"node", {"NODE", "SYS"}},
                         {"phb", {"PHB", "SYS"}},
                         {"sys", {"SYS", "SYS"}},
                         {"nv", {"NV4", "X"}}},
                        std::move(default_route)};
}

nic_role role(const nic_classifier& c, std::string name, int numa, std::string layer,
              std::string hca = "MT4129") {
  return c.classify({std::move(name), numa, std::move(layer), std::move(hca)}).role;
}

// seed 002 §4.2.2, each step in its order.
TEST(nic_roles, classification_steps) {
  auto c = classifier();
  EXPECT_EQ(role(c, "pxb", 0, "Ethernet"), nic_role::compute);
  EXPECT_EQ(role(c, "pix", 1, "Ethernet"), nic_role::compute);
  EXPECT_EQ(role(c, "node", 0, "InfiniBand"), nic_role::compute);
  EXPECT_EQ(role(c, "node", 0, "Ethernet"), nic_role::storage);
  EXPECT_EQ(role(c, "phb", 0, "Ethernet"), nic_role::storage);
  EXPECT_EQ(role(c, "sys", 0, "Ethernet"), nic_role::storage);
  EXPECT_EQ(role(c, "sys", 0, "InfiniBand"), nic_role::compute);
  EXPECT_EQ(role(c, "nv", 0, "Ethernet"), nic_role::storage);
  EXPECT_EQ(role(c, "unlisted", 0, "Ethernet"), nic_role::storage);
}

// seed 002 §4.1.2: NUMA without GPUs, and -1, are management.
TEST(nic_roles, numa_gate) {
  auto c = classifier();
  EXPECT_EQ(role(c, "pxb", 2, "InfiniBand"), nic_role::management);
  EXPECT_EQ(role(c, "pxb", -1, "InfiniBand"), nic_role::management);
  auto why = c.classify({"pxb", 6, "InfiniBand", "MT4129"});
  EXPECT_NE(why.reason.find("NUMA node 6"), std::string::npos) << why.reason;
}

// seed 002 §4.2.2 step 1: the default-route NIC even with PCIe proximity.
TEST(nic_roles, default_route_device_is_management_first) {
  auto c = classifier("pxb");
  EXPECT_EQ(role(c, "pxb", 0, "InfiniBand"), nic_role::management);
  EXPECT_EQ(role(c, "pix", 1, "InfiniBand"), nic_role::compute);
  EXPECT_EQ(c.classify({"pxb", 0, "InfiniBand", ""}).reason, "carries the default route");
}

// seed 002 §4.2.4: BlueField in the all-SYS branch; IB or NODE win before it.
TEST(nic_roles, bluefield_only_in_the_all_sys_branch) {
  auto c = classifier();
  EXPECT_EQ(role(c, "sys", 0, "Ethernet", "MT41692"), nic_role::management);
  EXPECT_EQ(role(c, "sys", 0, "Ethernet", "MT41682"), nic_role::management);
  EXPECT_EQ(role(c, "sys", 0, "Ethernet", "MT41686"), nic_role::management);
  EXPECT_EQ(role(c, "sys", 0, "Ethernet", "MT99999"), nic_role::storage);
  EXPECT_EQ(role(c, "node", 0, "Ethernet", "MT41692"), nic_role::storage);
  EXPECT_EQ(role(c, "pxb", 0, "Ethernet", "MT41692"), nic_role::compute);
}

TEST(nic_roles, pci_card_drops_the_function) {
  EXPECT_EQ(pci_card("0000:47:00.1"), "0000:47:00");
  EXPECT_EQ(pci_card("0000:47:00.0"), "0000:47:00");
  EXPECT_EQ(pci_card("47:00.3"), "0000:47:00");
  EXPECT_EQ(pci_card("mlx5_0"), "");
}

TEST(nic_roles, peer_mode) {
  EXPECT_EQ(peer_mode({2, 2, 2, 1}), 2);
  EXPECT_EQ(peer_mode({1, 1, 0}), 1);
  EXPECT_EQ(peer_mode({2, 1}), 2); // tie: the larger
  EXPECT_EQ(peer_mode({0}), 0);
  EXPECT_EQ(peer_mode({}), 0);
}

// seed 002 §4.3.4: H100 OCI, compute dual-port and storage single-port.
TEST(nic_roles, homogeneity_compares_within_a_role) {
  std::vector<card_ports> cards;
  for (int i = 0; i < 8; ++i)
    cards.push_back({"c" + std::to_string(i), nic_role::compute, 2});
  cards.push_back({"s0", nic_role::storage, 1});
  cards.push_back({"s1", nic_role::storage, 1});
  for (const auto& v : check_card_homogeneity(cards))
    EXPECT_FALSE(v.anomalous) << v.card;
  cards[3].active_ports = 1;
  cards[9].active_ports = 0;
  for (const auto& v : check_card_homogeneity(cards)) {
    EXPECT_EQ(v.anomalous, v.card == "c3" || v.card == "s1") << v.card;
    if (v.card == "c3") {
      EXPECT_EQ(v.expected_ports, 2);
      EXPECT_EQ(v.active_ports, 1);
    }
    if (v.card == "s1") {
      EXPECT_EQ(v.expected_ports, 1);
    }
  }
}

// seed 002 §4.3.4: L40, one of two ports cabled on every card.
TEST(nic_roles, consistent_uncabled_ports_are_not_flagged) {
  std::vector<card_ports> cards = {{"a", nic_role::compute, 1},
                                   {"b", nic_role::compute, 1}};
  for (const auto& v : check_card_homogeneity(cards))
    EXPECT_FALSE(v.anomalous);
  cards[0].active_ports = 0;
  auto verdicts = check_card_homogeneity(cards);
  EXPECT_TRUE(verdicts[0].anomalous);
  EXPECT_FALSE(verdicts[1].anomalous);
}

TEST(nic_roles, role_names) {
  EXPECT_EQ(to_string(nic_role::management), "Management");
  EXPECT_EQ(to_string(nic_role::compute), "Compute");
  EXPECT_EQ(to_string(nic_role::storage), "Storage");
}

} // namespace
} // namespace vigil::agent
