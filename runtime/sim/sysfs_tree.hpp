// sysfs trees in a temporary directory, laid out as the kernel does:
// class/infiniband/<dev> and class/net/<if> are symlinks into devices/…/<pci>/,
// `device` links back to the PCI directory, VFs have physfn, PFs sriov_totalvfs.
// The simulated hosts of `vigil demo` and the NIC monitor tests
// (tests/support/fake_sysfs.hpp) write them; the real reader reads them.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

namespace vigil::demo {

/// A fresh directory under /tmp, removed with everything in it at the end.
class temp_dir {
public:
  /// Under $TMPDIR when set (the benchmark puts trees on tmpfs, which is
  /// closer to sysfs than a disk file system), else /tmp.
  temp_dir() {
    const char* base = std::getenv("TMPDIR");
    std::string name =
      std::string(base != nullptr && *base ? base : "/tmp") + "/vigil-nic-XXXXXX";
    if (::mkdtemp(name.data()) == nullptr)
      throw std::runtime_error("mkdtemp failed in " + name);
    path_ = name;
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  const std::string& path() const { return path_; }

private:
  std::string path_;
};

/// One port of a fake device.
struct fake_port {
  unsigned number = 1;
  std::string state = "4: ACTIVE";
  std::string phys_state = "5: LinkUp";
  std::string link_layer = "InfiniBand";
  std::map<std::string, std::uint64_t> counters; ///< Appendix A names
};

/// One fake InfiniBand/RoCE device (one PCI function).
struct fake_nic {
  std::string name; ///< "mlx5_0"
  std::string pci = "0000:0c:00.0";
  int numa_node = 0;
  std::string numa_text; ///< overrides numa_node when not empty
  std::string hca_type = "MT4129";
  std::string fw_ver = "28.39.1002";
  std::string board_id = "MT_0000000838";
  std::string driver = "mlx5_core";
  std::string physfn;      ///< PCI address of the parent PF: makes a VF
  int sriov_totalvfs = -1; ///< >= 0 writes device/sriov_totalvfs (a PF)
  std::string netdev;      ///< interface under device/net/ and class/net/
  std::string operstate = "up";
  std::vector<fake_port> ports = {fake_port{}};
};

/// Convenience: an Ethernet (RoCE) port.
inline fake_port roce_port(std::string state = "4: ACTIVE",
                           std::string phys_state = "5: LinkUp") {
  fake_port p;
  p.state = std::move(state);
  p.phys_state = std::move(phys_state);
  p.link_layer = "Ethernet";
  return p;
}

/// Convenience: an InfiniBand port.
inline fake_port ib_port_state(std::string state, std::string phys_state,
                               unsigned number = 1) {
  fake_port p;
  p.number = number;
  p.state = std::move(state);
  p.phys_state = std::move(phys_state);
  return p;
}

/// A sysfs tree in a temporary directory; root() plays the role of /sys.
class fake_sysfs {
public:
  fake_sysfs() {
    mkdirs("class/infiniband");
    mkdirs("class/net");
    mkdirs("bus/pci/drivers/mlx5_core");
  }

  const std::string& root() const { return dir_.path(); }
  std::string path(const std::string& rel) const { return root() + "/" + rel; }

  /// The PCI directory of a function, relative to root().
  static std::string pci_dir(const std::string& pci) {
    return "devices/pci0000:00/0000:00:01.0/" + pci;
  }

  void add_nic(const fake_nic& nic) {
    const auto pci = pci_dir(nic.pci);
    const auto ib = pci + "/infiniband/" + nic.name;
    mkdirs(ib);
    write(pci + "/numa_node",
          nic.numa_text.empty() ? std::to_string(nic.numa_node) : nic.numa_text);
    write(pci + "/uevent", "DRIVER=" + nic.driver + "\nPCI_SLOT_NAME=" + nic.pci + "\n");
    if (!nic.driver.empty()) {
      mkdirs("bus/pci/drivers/" + nic.driver);
      link("../../../../bus/pci/drivers/" + nic.driver, pci + "/driver");
    }
    if (!nic.physfn.empty())
      link("../" + nic.physfn, pci + "/physfn");
    if (nic.sriov_totalvfs >= 0)
      write(pci + "/sriov_totalvfs", std::to_string(nic.sriov_totalvfs));
    write(ib + "/hca_type", nic.hca_type);
    write(ib + "/fw_ver", nic.fw_ver);
    write(ib + "/board_id", nic.board_id);
    link("../../../" + nic.pci, ib + "/device");
    link("../../" + ib, "class/infiniband/" + nic.name);
    for (const auto& port : nic.ports)
      set_port(nic.name, port);
    if (!nic.netdev.empty())
      add_netdev(nic, pci);
  }

  /// Writes (or rewrites) a port's state, phys_state, link_layer and counters.
  void set_port(const std::string& device, const fake_port& port) {
    const auto dir = port_dir(device, port.number);
    mkdirs(dir + "/counters");
    mkdirs(dir + "/hw_counters");
    write(dir + "/state", port.state);
    write(dir + "/phys_state", port.phys_state);
    write(dir + "/link_layer", port.link_layer);
    for (const auto& [name, value] : port.counters)
      set_counter(device, port.number, name, value);
  }

  void set_state(const std::string& device, unsigned port, const std::string& state,
                 const std::string& phys_state) {
    write(port_dir(device, port) + "/state", state);
    write(port_dir(device, port) + "/phys_state", phys_state);
  }

  void set_counter(const std::string& device, unsigned port, const std::string& name,
                   std::uint64_t value) {
    const char* sub = name == "rnr_nak_retry_err" ? "/hw_counters/" : "/counters/";
    write(port_dir(device, port) + sub + name, std::to_string(value));
  }

  void set_operstate(const std::string& netdev, const std::string& value) {
    write("class/net/" + netdev + "/operstate", value);
  }

  /// The device falls off the bus: its PCI directory and class links go.
  void remove_nic(const std::string& device) {
    const auto target = std::filesystem::canonical(path("class/infiniband/" + device));
    std::filesystem::remove(path("class/infiniband/" + device));
    std::filesystem::remove_all(target.parent_path().parent_path());
    for (const auto& entry : std::filesystem::directory_iterator(path("class/net")))
      if (!std::filesystem::exists(entry.path())) // dangling now
        std::filesystem::remove(entry.path());
  }

  /// Writes a file relative to root(), creating directories (through links).
  void write(const std::string& rel, const std::string& text) {
    auto full = std::filesystem::path(path(rel));
    std::filesystem::create_directories(full.parent_path());
    std::ofstream out(full, std::ios::trunc);
    out << text << "\n";
    if (!out)
      throw std::runtime_error("cannot write " + full.string());
  }

  /// One entry of a port's GID table (seed 002 §9.1); `type` as the kernel
  /// writes it ("IB/RoCE v1", "RoCE v2"), `ndev` the interface ("" leaves it out).
  void set_gid(const std::string& device, unsigned port, unsigned index,
               const std::string& gid, const std::string& type = "RoCE v2",
               const std::string& ndev = "") {
    const auto dir = port_dir(device, port);
    const auto name = std::to_string(index);
    mkdirs(dir + "/gids");
    mkdirs(dir + "/gid_attrs/types");
    mkdirs(dir + "/gid_attrs/ndevs");
    write(dir + "/gids/" + name, gid + "\n");
    write(dir + "/gid_attrs/types/" + name, type + "\n");
    if (!ndev.empty())
      write(dir + "/gid_attrs/ndevs/" + name, ndev + "\n");
  }

  void remove(const std::string& rel) { std::filesystem::remove_all(path(rel)); }

  void mkdirs(const std::string& rel) { std::filesystem::create_directories(path(rel)); }

  std::string port_dir(const std::string& device, unsigned port) const {
    return "class/infiniband/" + device + "/ports/" + std::to_string(port);
  }

  /// Gives `nic` (at PCI directory `pci`) its netdev, also after the fact
  /// (a RoCE interface created later).
  void add_netdev(const fake_nic& nic, const std::string& pci) {
    const auto net = pci + "/net/" + nic.netdev;
    mkdirs(net);
    write(net + "/operstate", nic.operstate);
    link("../../../" + nic.pci, net + "/device");
    link("../../" + net, "class/net/" + nic.netdev);
  }

private:
  void link(const std::string& target, const std::string& rel) {
    std::filesystem::create_directory_symlink(target, path(rel));
  }

  temp_dir dir_;
};

/// A /proc/net/route table whose default route leaves through `iface`.
inline std::string route_table_with_default(const std::string& iface) {
  return "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\t"
         "IRTT\n"
         + iface
         + "\t00000000\t0100000A\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
           "ib0\t0000100A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
}

} // namespace vigil::demo
