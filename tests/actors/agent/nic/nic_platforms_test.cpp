// The platforms seed 002 validates against (§4.1.3, §4.2.4, §4.3.4, §8.6),
// rebuilt as fake sysfs trees: roles, baselines and one failure each.
#include "actors/agent/nic/nic_monitor_core.hpp"

#include <gtest/gtest.h>

#include "tests/actors/agent/nic/nic_test_support.hpp"

namespace vigil::agent {
namespace {

using test::fake_nic;
using namespace test_support;

class nic_platform : public nic_fixture {
protected:
  /// One PCI function with one port; `layer` "InfiniBand" or "Ethernet".
  void add(const std::string& name, const std::string& pci, int numa,
           const std::string& layer, std::vector<std::string> topo,
           const std::string& hca = "MT4129", const std::string& netdev = "") {
    fake_nic nic;
    nic.name = name;
    nic.pci = pci;
    nic.numa_node = numa;
    nic.hca_type = hca;
    nic.sriov_totalvfs = 16;
    nic.netdev = netdev.empty() && layer == "Ethernet" ? "en" + name : netdev;
    nic.ports = {layer == "Ethernet" ? test::roce_port() : test::fake_port{}};
    sys.add_nic(nic);
    metadata.nic_topology[name] = std::move(topo);
  }

  /// "PXB" for GPU `paired`, "SYS" elsewhere.
  std::vector<std::string> pxb_to(size_t paired) const {
    std::vector<std::string> row(metadata.gpus.size(), "SYS");
    row.at(paired) = "PXB";
    return row;
  }

  /// `level` to the GPUs on `numa`, "SYS" to the others.
  std::vector<std::string> level_on_numa(const std::string& level, int numa) const {
    std::vector<std::string> row;
    for (const auto& g : metadata.gpus)
      row.push_back(g.numa_node == numa ? level : "SYS");
    return row;
  }

  std::vector<std::string> all(const std::string& level) const {
    return std::vector<std::string>(metadata.gpus.size(), level);
  }

  std::map<nic_role, int> role_counts(const nic_poll_result& r) const {
    std::map<nic_role, int> out{
      {nic_role::management, 0}, {nic_role::compute, 0}, {nic_role::storage, 0}};
    for (const auto& [name, cls] : r.roles)
      ++out[cls.role];
    return out;
  }

  nic_role role_of(const std::string& name) const { return last.roles.at(name).role; }

  void expect_roles(int management, int compute, int storage) {
    auto counts = role_counts(last);
    EXPECT_EQ(counts[nic_role::management], management);
    EXPECT_EQ(counts[nic_role::compute], compute);
    EXPECT_EQ(counts[nic_role::storage], storage);
  }

  static char hex(int i) { return "0123456789abcdef"[i & 15]; }
  static std::string bus(int b, int fn = 0) {
    return std::string("0000:") + hex(b >> 4) + hex(b) + ":00." + std::to_string(fn);
  }

  size_t count_healthy(const std::vector<health_event>& events) const {
    size_t n = 0;
    for (const auto& e : events)
      n += e.is_healthy ? 1 : 0;
    return n;
  }
};

// A100 OCI RoCE: 4-socket AMD, 8 GPUs on NUMA 1/3/5/7, 18 PFs. mlx5_0 (NUMA 0)
// and mlx5_13 (NUMA 6) are management; 16 dual-function cards' NICs are compute.
class a100_oci : public nic_platform {
protected:
  void SetUp() override {
    nic_platform::SetUp();
    for (int g = 0; g < 8; ++g)
      metadata.gpus.push_back(gpu(g, 1 + 2 * (g / 2)));
    add("mlx5_0", bus(0x01), 0, "Ethernet", all("SYS"));
    add("mlx5_13", bus(0xc1), 6, "Ethernet", all("SYS"));
    int k = 0;
    for (int n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 15, 16, 17}) {
      const size_t g = static_cast<size_t>(k / 2);
      add("mlx5_" + std::to_string(n), bus(0x20 + (k / 2) * 0x10, k % 2),
          metadata.gpus[g].numa_node, "Ethernet", pxb_to(g));
      ++k;
    }
  }
};

TEST_F(a100_oci, two_management_sixteen_compute) {
  start();
  poll();
  expect_roles(2, 16, 0);
  EXPECT_EQ(role_of("mlx5_0"), nic_role::management);
  EXPECT_EQ(role_of("mlx5_13"), nic_role::management);
  EXPECT_NE(last.roles.at("mlx5_13").reason.find("NUMA node 6"), std::string::npos);
  ASSERT_EQ(last.events.size(), 16u) << describe(last.events);
  EXPECT_EQ(count_healthy(last.events), 16u);
  EXPECT_EQ(last.events[0].check_name, "EthernetStateCheck");
  EXPECT_EQ(last.events[0].message,
            "RoCE port mlx5_1 port 1: healthy (ACTIVE, LinkUp, operstate up)");
}

TEST_F(a100_oci, management_nic_failure_is_not_reported) {
  start();
  poll();
  sys.set_state("mlx5_0", 1, "1: DOWN", "3: Disabled");
  sys.set_operstate("enmlx5_0", "down");
  EXPECT_TRUE(poll().events.empty()) << describe(last.events);
  sys.set_state("mlx5_5", 1, "1: DOWN", "3: Disabled");
  sys.set_operstate("enmlx5_5", "down");
  auto r = poll();
  ASSERT_EQ(r.events.size(), 1u) << describe(r.events);
  EXPECT_EQ(r.events[0].check_name, "EthernetStateCheck");
  EXPECT_EQ(r.events[0].message,
            "RoCE port mlx5_5 port 1: state DOWN, phys_state Disabled, operstate down");
  EXPECT_EQ(r.events[0].metadata.at("operstate"), "down");
}

// H100 OCI: 2-socket, 8 GPUs, 16 compute NICs on 8 dual-function cards (PXB)
// and 2 single-port storage cards (NODE to all GPUs).
class h100_oci : public nic_platform {
protected:
  void SetUp() override {
    nic_platform::SetUp();
    for (int g = 0; g < 8; ++g)
      metadata.gpus.push_back(gpu(g, g / 4));
    int k = 0;
    for (int n = 0; n < 18; ++n) {
      const auto name = "mlx5_" + std::to_string(n);
      if (n == 2 || n == 11) {
        add(name, bus(n == 2 ? 0x1a : 0x9a), n == 2 ? 0 : 1, "Ethernet", all("NODE"));
        continue;
      }
      const size_t g = static_cast<size_t>(k / 2);
      add(name, bus(0x20 + (k / 2) * 0x10, k % 2), metadata.gpus[g].numa_node, "Ethernet",
          pxb_to(g));
      ++k;
    }
  }
};

TEST_F(h100_oci, sixteen_compute_two_storage) {
  start();
  poll();
  expect_roles(0, 16, 2);
  EXPECT_EQ(role_of("mlx5_2"), nic_role::storage);
  EXPECT_EQ(role_of("mlx5_11"), nic_role::storage);
  EXPECT_EQ(last.events.size(), 18u);
  EXPECT_EQ(count_healthy(last.events), 18u);
}

// seed 002 §4.3.4: each role against its own mode.
TEST_F(h100_oci, card_homogeneity_per_role_on_first_poll) {
  sys.set_state("mlx5_1", 1, "1: DOWN", "2: Polling");  // compute card 0x20: 1 of 2
  sys.set_state("mlx5_11", 1, "1: DOWN", "2: Polling"); // storage card: 0 of 1
  start();
  auto r = poll();
  std::vector<std::string> fatal;
  for (const auto& e : r.events)
    if (e.is_fatal)
      fatal.push_back(e.message);
  EXPECT_EQ(fatal,
            (std::vector<std::string>{
              "RoCE port mlx5_1 port 1: state DOWN, phys_state Polling, operstate up",
              "RoCE port mlx5_11 port 1: state DOWN, phys_state Polling, operstate up",
              "Card 0000:20:00 (Compute) has 1 active ports, expected 2 (peer mode)",
              "Card 0000:9a:00 (Storage) has 0 active ports, expected 1 (peer mode)"}))
    << describe(r.events);
  auto card = about(r.events, "mlx5_0").back();
  EXPECT_EQ(card.entities, (std::vector<entity>{{"NIC", "mlx5_0"}, {"NIC", "mlx5_1"}}));
}

// L40S OCI: 4 PCIe GPUs, 6 Ethernet PFs, NODE to local GPUs: all storage.
class l40s_oci : public nic_platform {
protected:
  void SetUp() override {
    nic_platform::SetUp();
    metadata.gpus = {gpu(0, 0), gpu(1, 0), gpu(2, 1), gpu(3, 1)};
    for (int n = 0; n < 6; ++n)
      add("mlx5_" + std::to_string(n), bus(0x30 + n * 0x10), n / 3, "Ethernet",
          level_on_numa("NODE", n / 3));
  }
};

TEST_F(l40s_oci, six_storage) {
  start();
  poll();
  expect_roles(0, 0, 6);
  EXPECT_EQ(count_healthy(last.events), 6u);
  sys.set_state("mlx5_4", 1, "1: DOWN", "3: Disabled");
  auto r = poll();
  ASSERT_EQ(r.events.size(), 1u) << describe(r.events);
  EXPECT_EQ(r.events[0].metadata.at("role"), "Storage");
}

// seed 002 §3.2: INIT on Ethernet is a sub-second transient, not reported.
TEST_F(l40s_oci, ethernet_init_is_not_reported) {
  start();
  poll();
  sys.set_state("mlx5_1", 1, "2: INIT", "5: LinkUp");
  EXPECT_TRUE(poll().events.empty()) << describe(last.events);
  sys.set_state("mlx5_1", 1, "4: ACTIVE", "5: LinkUp");
  EXPECT_TRUE(poll().events.empty()) << describe(last.events);
  sys.set_state("mlx5_1", 1, "3: ARMED", "5: LinkUp");
  poll();
  sys.set_state("mlx5_1", 1, "1: DOWN", "3: Disabled");
  auto r = poll();
  ASSERT_EQ(r.events.size(), 1u) << describe(r.events);
  EXPECT_TRUE(r.events[0].is_fatal);
}

// On-prem L40S: 8 PCIe GPUs, 1 Ethernet NIC with the default route, 4 IB NICs,
// all NODE to local GPUs.
class onprem_l40s : public nic_platform {
protected:
  void SetUp() override {
    nic_platform::SetUp();
    for (int g = 0; g < 8; ++g)
      metadata.gpus.push_back(gpu(g, g / 4));
    add("mlx5_0", bus(0x11), 0, "Ethernet", level_on_numa("NODE", 0), "MT4129", "eth0");
    for (int n = 1; n <= 4; ++n)
      add("mlx5_" + std::to_string(n), bus(0x20 + n * 0x10), (n - 1) / 2, "InfiniBand",
          level_on_numa("NODE", (n - 1) / 2));
    sys.write("route", test::route_table_with_default("eth0"));
  }
};

TEST_F(onprem_l40s, link_layer_splits_compute_from_storage) {
  start(); // no default route known
  poll();
  expect_roles(0, 4, 1);
  EXPECT_EQ(role_of("mlx5_0"), nic_role::storage);
  EXPECT_EQ(role_of("mlx5_1"), nic_role::compute);
}

TEST_F(onprem_l40s, default_route_nic_is_management) {
  const auto route_device = resolve_default_route_device(sys.root(), sys.path("route"));
  EXPECT_EQ(route_device, "mlx5_0");
  start(std::nullopt, route_device);
  poll();
  expect_roles(1, 4, 0);
  EXPECT_EQ(last.roles.at("mlx5_0").reason, "carries the default route");
  EXPECT_EQ(last.events.size(), 4u);
  sys.set_state("mlx5_0", 1, "1: DOWN", "3: Disabled");
  EXPECT_TRUE(poll().events.empty()) << describe(last.events);
}

// GB200 NVL4: Grace, 4 GPUs, everything SYS; 4 ConnectX-7 IB and 2 BlueField-3
// Ethernet, named by PCI location (vendor from the mlx5_core driver link).
class gb200 : public nic_platform {
protected:
  void SetUp() override {
    nic_platform::SetUp();
    metadata.gpus = {gpu(0, 0), gpu(1, 0), gpu(2, 1), gpu(3, 1)};
    add("ibp3s0", "0000:03:00.0", 0, "InfiniBand", all("SYS"));
    add("ibP2p3s0", "0002:03:00.0", 0, "InfiniBand", all("SYS"));
    add("ibP16p3s0", "0010:03:00.0", 1, "InfiniBand", all("SYS"));
    add("ibP18p3s0", "0012:03:00.0", 1, "InfiniBand", all("SYS"));
    add("roceP6p3s0", "0006:03:00.0", 0, "Ethernet", all("SYS"), "MT41692",
        "enP6p3s0f0np0");
    add("roceP22p3s0", "0016:03:00.0", 1, "Ethernet", all("SYS"), "MT41692");
  }
};

TEST_F(gb200, bluefield_dpus_are_management) {
  start();
  poll();
  expect_roles(2, 4, 0);
  EXPECT_EQ(role_of("roceP6p3s0"), nic_role::management);
  EXPECT_EQ(last.roles.at("roceP22p3s0").reason, "BlueField DPU (MT41692)");
  EXPECT_EQ(role_of("ibp3s0"), nic_role::compute);
  ASSERT_EQ(last.events.size(), 4u) << describe(last.events);
  EXPECT_EQ(last.events[0].message, "Port ibP16p3s0 port 1: healthy (ACTIVE, LinkUp)");
  sys.set_state("ibP2p3s0", 1, "1: DOWN", "3: Disabled");
  sys.set_state("roceP22p3s0", 1, "1: DOWN", "3: Disabled");
  auto r = poll();
  ASSERT_EQ(r.events.size(), 1u) << describe(r.events);
  EXPECT_EQ(r.events[0].entities[0].value, "ibP2p3s0");
}

TEST_F(gb200, default_route_on_a_dpu_gives_the_same_roles) {
  sys.write("route", test::route_table_with_default("enP6p3s0f0np0"));
  start(std::nullopt, resolve_default_route_device(sys.root(), sys.path("route")));
  poll();
  expect_roles(2, 4, 0);
  EXPECT_EQ(last.roles.at("roceP6p3s0").reason, "carries the default route");
}

// seed 002 §8.6: 34 devices, 18 PFs (mlx5_0 the host's management NIC) and 16
// unassigned VFs that are DOWN by design.
class thirty_four_devices : public nic_platform {
protected:
  void SetUp() override {
    nic_platform::SetUp();
    for (int g = 0; g < 8; ++g)
      metadata.gpus.push_back(gpu(g, g / 4));
    add("mlx5_0", bus(0x11), 0, "Ethernet", level_on_numa("NODE", 0), "MT4129", "eth0");
    for (int n = 1; n < 18; ++n)
      add("mlx5_" + std::to_string(n), bus(0x20 + n * 0x08), (n - 1) / 9, "Ethernet",
          pxb_to(static_cast<size_t>((n - 1) % 8)));
    for (int v = 0; v < 16; ++v) {
      fake_nic vf;
      vf.name = "mlx5_" + std::to_string(18 + v);
      const int parent = 1 + v;
      vf.pci = bus(0x20 + parent * 0x08, 1 + v % 7);
      vf.physfn = bus(0x20 + parent * 0x08);
      vf.numa_node = (parent - 1) / 9;
      vf.ports = {test::roce_port("1: DOWN", "3: Disabled")};
      sys.add_nic(vf);
    }
    sys.write("route", test::route_table_with_default("eth0"));
  }
};

TEST_F(thirty_four_devices, vfs_down_raise_no_alarm) {
  start(std::nullopt, resolve_default_route_device(sys.root(), sys.path("route")));
  auto r = poll();
  EXPECT_EQ(read_nic_snapshot(sys.root()).devices.size(), 34u);
  expect_roles(1, 17, 0);
  EXPECT_EQ(r.roles.count("mlx5_18"), 0u);
  ASSERT_EQ(r.events.size(), 17u) << describe(r.events);
  EXPECT_EQ(count_healthy(r.events), 17u);
  EXPECT_EQ(poller->state()->known_devices.size(), 17u);
  EXPECT_TRUE(poll().events.empty()) << describe(last.events);
  // A VF assigned to a VM comes up, and later goes back down: nothing either way.
  sys.set_state("mlx5_20", 1, "4: ACTIVE", "5: LinkUp");
  EXPECT_TRUE(poll().events.empty()) << describe(last.events);
  sys.set_state("mlx5_20", 1, "1: DOWN", "3: Disabled");
  EXPECT_TRUE(poll().events.empty()) << describe(last.events);
}

} // namespace
} // namespace vigil::agent
