#include "actors/agent/nic/nic_sysfs.hpp"

#include <fstream>

#include <gtest/gtest.h>

#include "tests/support/fake_sysfs.hpp"

namespace vigil::agent {
namespace {

using test::fake_nic;
using test::fake_sysfs;

bool mentions(const std::vector<nic_diagnostic>& diagnostics, const std::string& where,
              const std::string& what) {
  for (const auto& d : diagnostics)
    if (d.where.find(where) != std::string::npos
        && d.what.find(what) != std::string::npos)
      return true;
  return false;
}

// seed 002 §5.1: hca_type, fw_ver, board_id, ports with link_layer, state, phys_state.
TEST(nic_sysfs, reads_device_identity_and_ports) {
  fake_sysfs sys;
  fake_nic nic;
  nic.name = "mlx5_0";
  nic.pci = "0000:0c:00.0";
  nic.numa_node = 1;
  nic.hca_type = "MT4123";
  nic.fw_ver = "20.31.1014";
  nic.board_id = "MT_0000000010";
  nic.sriov_totalvfs = 16;
  nic.ports = {test::ib_port_state("1: DOWN", "3: Disabled", 1),
               test::ib_port_state("4: ACTIVE", "5: LinkUp", 2)};
  nic.ports[1].counters = {{"link_downed", 3}, {"rnr_nak_retry_err", 7}};
  sys.add_nic(nic);
  auto snap = read_nic_snapshot(sys.root());
  ASSERT_TRUE(snap.listed);
  EXPECT_TRUE(snap.diagnostics.empty()) << snap.diagnostics.front().to_string();
  ASSERT_EQ(snap.devices.size(), 1u);
  const auto& d = snap.devices[0];
  EXPECT_EQ(d.name, "mlx5_0");
  EXPECT_EQ(d.vendor, "mellanox");
  EXPECT_EQ(d.hca_type, "MT4123");
  EXPECT_EQ(d.fw_ver, "20.31.1014");
  EXPECT_EQ(d.board_id, "MT_0000000010");
  EXPECT_EQ(d.driver, "mlx5_core");
  EXPECT_EQ(d.pci_address, "0000:0c:00.0");
  EXPECT_EQ(d.numa_node, 1);
  EXPECT_TRUE(d.is_pf);
  EXPECT_FALSE(d.is_vf);
  EXPECT_EQ(d.status, device_read::complete);
  ASSERT_EQ(d.ports.size(), 2u);
  EXPECT_EQ(d.ports[0].number, 1u);
  EXPECT_EQ(d.ports[0].state, "1: DOWN");
  EXPECT_EQ(d.ports[0].physical_state, "3: Disabled");
  EXPECT_EQ(d.ports[0].link_layer, "InfiniBand");
  EXPECT_TRUE(d.ports[0].readable);
  EXPECT_EQ(d.ports[1].counters.at("link_downed"), 3u);
  EXPECT_EQ(d.ports[1].counters.at("rnr_nak_retry_err"), 7u);
  EXPECT_EQ(d.link_layer(), "InfiniBand");
}

// seed 002 §8.7: physfn marks a VF; its ports are not even read.
TEST(nic_sysfs, recognises_virtual_functions) {
  fake_sysfs sys;
  fake_nic pf;
  pf.name = "mlx5_0";
  pf.sriov_totalvfs = 1;
  sys.add_nic(pf);
  fake_nic vf;
  vf.name = "mlx5_18";
  vf.pci = "0000:0c:00.2";
  vf.physfn = "0000:0c:00.0";
  vf.ports = {test::ib_port_state("1: DOWN", "2: Polling")};
  sys.add_nic(vf);
  auto snap = read_nic_snapshot(sys.root());
  ASSERT_EQ(snap.devices.size(), 2u);
  EXPECT_TRUE(snap.devices[0].is_pf);
  EXPECT_EQ(snap.devices[1].name, "mlx5_18");
  EXPECT_TRUE(snap.devices[1].is_vf);
  EXPECT_FALSE(snap.devices[1].is_pf);
  EXPECT_TRUE(snap.devices[1].ports.empty());
}

// seed 002 §5.3: the mlx5_<n> name, else the mlx5_core driver link.
TEST(nic_sysfs, detects_the_vendor_by_name_or_driver) {
  fake_sysfs sys;
  fake_nic by_driver;
  by_driver.name = "ibp3s0";
  by_driver.pci = "0000:03:00.0";
  sys.add_nic(by_driver);
  fake_nic other;
  other.name = "rdmap0s6";
  other.pci = "0000:06:00.0";
  other.driver = "efa";
  sys.add_nic(other);
  fake_nic by_name;
  by_name.name = "mlx5_7";
  by_name.pci = "0000:07:00.0";
  by_name.driver = "";
  sys.add_nic(by_name);
  auto snap = read_nic_snapshot(sys.root());
  ASSERT_EQ(snap.devices.size(), 3u);
  EXPECT_EQ(snap.find("ibp3s0")->vendor, "mellanox");
  EXPECT_EQ(snap.find("mlx5_7")->vendor, "mellanox");
  EXPECT_EQ(snap.find("rdmap0s6")->vendor, "");
  EXPECT_EQ(snap.find("rdmap0s6")->driver, "efa");
}

// seed 002 §9: a RoCE device's interface and operstate through device/net.
TEST(nic_sysfs, reads_the_operstate_of_the_roce_netdev) {
  fake_sysfs sys;
  fake_nic nic;
  nic.name = "mlx5_1";
  nic.netdev = "rdma4";
  nic.operstate = "down";
  nic.ports = {test::roce_port("1: DOWN", "3: Disabled")};
  sys.add_nic(nic);
  auto snap = read_nic_snapshot(sys.root());
  ASSERT_EQ(snap.devices.size(), 1u);
  EXPECT_EQ(snap.devices[0].net_dev, "rdma4");
  EXPECT_EQ(snap.devices[0].operstate, "down");
  EXPECT_EQ(snap.devices[0].link_layer(), "Ethernet");
  sys.set_operstate("rdma4", "up");
  EXPECT_EQ(read_nic_snapshot(sys.root()).devices[0].operstate, "up");
}

// seed 002 §9.1: the GID table of its example (mlx5_0 port 1), with the
// unused entries a real port has between and after them.
TEST(nic_sysfs, reads_the_gid_table_of_a_roce_port) {
  fake_sysfs sys;
  fake_nic nic;
  nic.name = "mlx5_0";
  nic.netdev = "eth0";
  nic.ports = {test::roce_port("4: ACTIVE", "5: LinkUp")};
  sys.add_nic(nic);
  const std::string zeros = "0000:0000:0000:0000:0000:0000:0000:0000";
  sys.set_gid("mlx5_0", 1, 0, "fe80:0000:0000:0000:ba3f:d2ff:fec3:65c4", "IB/RoCE v1",
              "eth0");
  sys.set_gid("mlx5_0", 1, 1, "fe80:0000:0000:0000:ba3f:d2ff:fec3:65c4", "RoCE v2",
              "eth0");
  sys.set_gid("mlx5_0", 1, 2, "0000:0000:0000:0000:0000:ffff:0a33:ba20", "IB/RoCE v1",
              "eth0");
  sys.set_gid("mlx5_0", 1, 3, "0000:0000:0000:0000:0000:ffff:0a33:ba20", "RoCE v2",
              "eth0");
  sys.set_gid("mlx5_0", 1, 4, zeros);
  sys.set_gid("mlx5_0", 1, 10, zeros);
  std::vector<nic_diagnostic> diagnostics;
  auto table = read_gid_table(sys.root(), "mlx5_0", 1, diagnostics);
  ASSERT_TRUE(table.has_value());
  ASSERT_EQ(table->size(), 4u);
  EXPECT_EQ((*table)[0].type, "v1");
  EXPECT_EQ((*table)[1].type, "v2");
  EXPECT_EQ((*table)[0].ipv4, "");
  EXPECT_EQ((*table)[3].index, 3u);
  EXPECT_EQ((*table)[3].ipv4, "10.51.186.32");
  EXPECT_EQ((*table)[3].net_dev, "eth0");
  EXPECT_TRUE(gid_problems(*table).empty());
  EXPECT_TRUE(diagnostics.empty());

  // An IPv4 GID of type v1 only: RoCE v2 still cannot route.
  auto v1_only = *table;
  v1_only.pop_back();
  ASSERT_EQ(gid_problems(v1_only).size(), 1u);
  EXPECT_NE(gid_problems(v1_only)[0].find("no IPv4 RoCE v2 GID"), std::string::npos);
  // Only link-local GIDs: the same.
  table->erase(table->begin() + 2, table->end());
  ASSERT_EQ(gid_problems(*table).size(), 1u);
  EXPECT_NE(gid_problems(*table)[0].find("no IPv4 RoCE v2 GID"), std::string::npos);
  // No GID at all: queue pairs cannot be set up.
  EXPECT_NE(gid_problems({})[0].find("ENODATA (61)"), std::string::npos);

  // A port without a gids directory has no table; nothing to diagnose.
  EXPECT_FALSE(read_gid_table(sys.root(), "mlx5_9", 1, diagnostics).has_value());
  EXPECT_TRUE(diagnostics.empty());
}

TEST(nic_sysfs, ipv4_of_gid_decodes_only_mapped_addresses) {
  EXPECT_EQ(ipv4_of_gid("0000:0000:0000:0000:0000:ffff:ac10:0120"), "172.16.1.32");
  EXPECT_EQ(ipv4_of_gid("0000:0000:0000:0000:0000:FFFF:AC10:0120"), "");
  EXPECT_EQ(ipv4_of_gid("0000:0000:0000:0000:0000:ffff:AC10:0120"), "172.16.1.32");
  EXPECT_EQ(ipv4_of_gid("fe80:0000:0000:0000:ba3f:d2ff:fe7c:7570"), "");
  EXPECT_EQ(ipv4_of_gid("0000:0000:0000:0000:0000:ffff:zz10:0120"), "");
  EXPECT_EQ(ipv4_of_gid("0000:0000:0000:0000:0000:ffff:ac10"), "");
  EXPECT_EQ(ipv4_of_gid(""), "");
}

// The monitor's reader keeps what stays put; poll after poll it must see
// exactly what a full read sees, whatever changes underneath.
// seed 002 §9: a RoCE netdev created after the device was first read has an
// operstate the events should carry; the reader's periodic full read finds it.
TEST(nic_sysfs_reader, relearns_what_appears_on_a_device_that_stayed_put) {
  fake_sysfs sys;
  fake_nic roce;
  roce.name = "mlx5_1";
  roce.pci = "0000:0d:00.0";
  roce.ports = {test::roce_port("4: ACTIVE", "5: LinkUp")};
  sys.add_nic(roce);
  nic_sysfs_reader reader(sys.root(), 3);
  EXPECT_EQ(reader.read().find("mlx5_1")->net_dev, ""); // read 1: learned
  roce.netdev = "rdma4";
  sys.add_netdev(roce, fake_sysfs::pci_dir(roce.pci));
  EXPECT_EQ(reader.read().find("mlx5_1")->net_dev, ""); // read 2: what it learned
  auto relearned = reader.read();                       // read 3: in full
  EXPECT_EQ(relearned.find("mlx5_1")->net_dev, "rdma4");
  EXPECT_EQ(relearned.find("mlx5_1")->operstate,
            read_nic_snapshot(sys.root()).find("mlx5_1")->operstate);
  EXPECT_EQ(reader.read().find("mlx5_1")->net_dev, "rdma4"); // and keeps it
}

TEST(nic_sysfs_reader, sees_what_a_full_read_sees) {
  fake_sysfs sys;
  fake_nic ib;
  ib.name = "mlx5_0";
  ib.sriov_totalvfs = 4;
  ib.ports = {test::ib_port_state("4: ACTIVE", "5: LinkUp")};
  ib.ports[0].counters = {{"link_downed", 1}, {"rnr_nak_retry_err", 0}};
  sys.add_nic(ib);
  fake_nic roce;
  roce.name = "mlx5_1";
  roce.pci = "0000:0d:00.0";
  roce.netdev = "rdma4";
  roce.ports = {test::roce_port("4: ACTIVE", "5: LinkUp")};
  sys.add_nic(roce);
  fake_nic vf;
  vf.name = "mlx5_2";
  vf.pci = "0000:0c:00.2";
  vf.physfn = "0000:0c:00.0";
  sys.add_nic(vf);

  nic_sysfs_reader reader(sys.root());
  auto same = [&](const char* when) {
    auto cached = reader.read();
    auto full = read_nic_snapshot(sys.root());
    ASSERT_EQ(cached.listed, full.listed) << when;
    ASSERT_EQ(cached.devices.size(), full.devices.size()) << when;
    for (std::size_t i = 0; i < full.devices.size(); ++i) {
      const auto& a = cached.devices[i];
      const auto& b = full.devices[i];
      EXPECT_EQ(a.name, b.name) << when;
      EXPECT_EQ(a.status, b.status) << when << " " << b.name;
      EXPECT_EQ(a.pci_address, b.pci_address) << when << " " << b.name;
      EXPECT_EQ(a.hca_type, b.hca_type) << when;
      EXPECT_EQ(a.is_vf, b.is_vf) << when;
      EXPECT_EQ(a.is_pf, b.is_pf) << when;
      EXPECT_EQ(a.net_dev, b.net_dev) << when << " " << b.name;
      EXPECT_EQ(a.operstate, b.operstate) << when << " " << b.name;
      ASSERT_EQ(a.ports.size(), b.ports.size()) << when << " " << b.name;
      for (std::size_t p = 0; p < b.ports.size(); ++p) {
        EXPECT_EQ(a.ports[p].state, b.ports[p].state) << when << " " << b.name;
        EXPECT_EQ(a.ports[p].physical_state, b.ports[p].physical_state) << when;
        EXPECT_EQ(a.ports[p].link_layer, b.ports[p].link_layer) << when;
        EXPECT_EQ(a.ports[p].readable, b.ports[p].readable) << when;
        EXPECT_EQ(a.ports[p].counters, b.ports[p].counters) << when << " " << b.name;
      }
    }
  };
  same("first poll");
  EXPECT_EQ(reader.known(), 3u);
  same("nothing changed");
  sys.set_state("mlx5_0", 1, "1: DOWN", "3: Disabled");
  sys.set_counter("mlx5_0", 1, "link_downed", 2);
  sys.set_operstate("rdma4", "down");
  same("a port went down, its counter rose, an interface went down");
  sys.remove_nic("mlx5_1");
  same("a device vanished");
  EXPECT_EQ(reader.known(), 2u);
  roce.pci = "0000:0e:00.0"; // back, in another slot
  sys.add_nic(roce);
  same("the device came back elsewhere");
  same("and stayed");
  EXPECT_EQ(reader.known(), 3u);
}

TEST(nic_sysfs, finds_the_ib_device_behind_an_interface) {
  fake_sysfs sys;
  fake_nic nic;
  nic.name = "mlx5_0";
  nic.netdev = "eth0";
  nic.ports = {test::roce_port()};
  sys.add_nic(nic);
  EXPECT_EQ(find_ib_device_for_interface(sys.root(), "eth0"), "mlx5_0");
  EXPECT_EQ(find_ib_device_for_interface(sys.root(), "eno1"), "");
  EXPECT_EQ(find_ib_device_for_interface(sys.root(), ""), "");
  EXPECT_EQ(find_ib_device_for_interface(sys.root(), "../x"), "");
}

TEST(nic_sysfs, pci_address_falls_back_to_uevent) {
  fake_sysfs sys;
  fake_nic nic;
  nic.name = "mlx5_0";
  nic.pci = "0000:47:00.1";
  sys.add_nic(nic);
  // Replace the device link with one whose name is not an address.
  sys.remove("devices/pci0000:00/0000:00:01.0/0000:47:00.1/infiniband/mlx5_0/device");
  sys.mkdirs("devices/pci0000:00/0000:00:01.0/odd");
  sys.write("devices/pci0000:00/0000:00:01.0/odd/uevent", "PCI_SLOT_NAME=0000:47:00.1");
  sys.write("devices/pci0000:00/0000:00:01.0/odd/numa_node", "0");
  std::filesystem::create_directory_symlink("../../../odd",
                                            sys.path("class/infiniband/mlx5_0/device"));
  auto snap = read_nic_snapshot(sys.root());
  EXPECT_EQ(snap.devices[0].pci_address, "0000:47:00.1");
}

// Bad input is reported, never fatal to the read.
TEST(nic_sysfs, unexpected_values_become_diagnostics) {
  fake_sysfs sys;
  fake_nic nic;
  nic.name = "mlx5_0";
  nic.numa_text = "banana";
  nic.ports = {test::fake_port{}};
  nic.ports[0].link_layer = "Omni-Path";
  sys.add_nic(nic);
  sys.write(sys.port_dir("mlx5_0", 1) + "/counters/link_downed", "-3");
  sys.mkdirs(sys.port_dir("mlx5_0", 1) + "/../lots");
  auto snap = read_nic_snapshot(sys.root());
  ASSERT_EQ(snap.devices.size(), 1u);
  const auto& d = snap.devices[0];
  EXPECT_EQ(d.numa_node, -1);
  EXPECT_TRUE(mentions(snap.diagnostics, "numa_node", "banana"));
  EXPECT_TRUE(mentions(snap.diagnostics, "link_layer", "Omni-Path"));
  EXPECT_TRUE(mentions(snap.diagnostics, "link_downed", "-3"));
  EXPECT_TRUE(mentions(snap.diagnostics, "lots", "not a port number"));
  ASSERT_EQ(d.ports.size(), 1u);
  EXPECT_FALSE(d.ports[0].readable);
  EXPECT_EQ(d.ports[0].counters.count("link_downed"), 0u);
}

TEST(nic_sysfs, unreadable_state_file_makes_the_port_unreadable) {
  fake_sysfs sys;
  fake_nic nic;
  nic.name = "mlx5_0";
  sys.add_nic(nic);
  // A directory where the file should be: read() fails with EISDIR, even as root.
  sys.remove(sys.port_dir("mlx5_0", 1) + "/state");
  sys.mkdirs(sys.port_dir("mlx5_0", 1) + "/state");
  auto snap = read_nic_snapshot(sys.root());
  ASSERT_EQ(snap.devices.size(), 1u);
  EXPECT_EQ(snap.devices[0].status, device_read::complete);
  EXPECT_FALSE(snap.devices[0].ports[0].readable);
  EXPECT_TRUE(mentions(snap.diagnostics, "ports/1/state", "unreadable"));
}

TEST(nic_sysfs, missing_state_file_is_reported) {
  fake_sysfs sys;
  fake_nic nic;
  nic.name = "mlx5_0";
  sys.add_nic(nic);
  sys.remove(sys.port_dir("mlx5_0", 1) + "/phys_state");
  auto snap = read_nic_snapshot(sys.root());
  EXPECT_FALSE(snap.devices[0].ports[0].readable);
  EXPECT_TRUE(mentions(snap.diagnostics, "phys_state", "unreadable"));
}

// seed 002 §7: a device that goes while it is read is a candidate, not an error.
TEST(nic_sysfs, device_vanishing_mid_read_is_marked) {
  fake_sysfs sys;
  fake_nic nic;
  nic.name = "mlx5_0";
  sys.add_nic(nic);
  std::vector<nic_diagnostic> diagnostics;
  auto names = list_ib_devices(sys.root(), diagnostics);
  ASSERT_TRUE(names.has_value());
  ASSERT_EQ(names->size(), 1u);
  sys.remove_nic("mlx5_0");
  auto device = read_nic_device(sys.root(), "mlx5_0", diagnostics);
  EXPECT_EQ(device.status, device_read::vanished);
  EXPECT_TRUE(diagnostics.empty());
}

// A class directory that does not exist lists no device (the RDMA core is
// not loaded); one that cannot be read concludes nothing.
TEST(nic_sysfs, missing_class_directory_lists_no_device) {
  test::temp_dir empty;
  auto snap = read_nic_snapshot(empty.path());
  EXPECT_TRUE(snap.listed);
  EXPECT_TRUE(snap.devices.empty());
  EXPECT_TRUE(mentions(snap.diagnostics, "class/infiniband", "missing"));
}

TEST(nic_sysfs, unreadable_class_directory_is_not_listed) {
  test::temp_dir root;
  std::ofstream(root.path() + "/class") << "a file where the directory should be";
  auto snap = read_nic_snapshot(root.path());
  EXPECT_FALSE(snap.listed);
  EXPECT_TRUE(mentions(snap.diagnostics, "class/infiniband", "unreadable"));
}

TEST(nic_sysfs, reads_the_boot_id) {
  fake_sysfs sys;
  sys.write("boot_id", "  0f1e2d3c-aaaa-bbbb-cccc-000000000001 ");
  auto id = read_boot_id(sys.path("boot_id"));
  ASSERT_TRUE(id.has_value());
  EXPECT_EQ(*id, "0f1e2d3c-aaaa-bbbb-cccc-000000000001");
  auto missing = read_boot_id(sys.path("nope"));
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().where, sys.path("nope"));
  sys.write("empty", "");
  EXPECT_FALSE(read_boot_id(sys.path("empty")).has_value());
}

} // namespace
} // namespace vigil::agent
