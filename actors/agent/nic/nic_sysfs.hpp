// Reads one snapshot of the node's InfiniBand/RoCE devices from a sysfs tree
// (seed 002 §5, §8, §9, §11.1). Never throws; read problems become diagnostics.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "messages/expected.hpp"

namespace vigil::agent {

/// A diagnostic: `where` is the sysfs path, `what` the problem.
using nic_diagnostic = failure;

/// The Appendix A counters the monitor reads, by sysfs file name.
const std::vector<std::string>& nic_counter_names();

/// One port as read in one poll (seed 002 §11.1 IBPort).
struct ib_port {
  unsigned number = 0;
  std::string state;          ///< raw sysfs value, "4: ACTIVE"
  std::string physical_state; ///< raw sysfs value, "5: LinkUp"
  std::string link_layer;     ///< "InfiniBand" or "Ethernet"
  /// False when state, phys_state or link_layer could not be read.
  bool readable = true;
  /// Appendix A counters that exist for this port (counters/ and hw_counters/).
  std::map<std::string, std::uint64_t> counters;
};

/// How far reading one device got.
enum class device_read {
  complete, ///< everything that exists was read (ports may still be unreadable)
  vanished, ///< the device directory disappeared while it was being read
};

/// One device under /sys/class/infiniband (seed 002 §11.1 Device).
struct nic_device {
  std::string name;        ///< "mlx5_0", "ibp3s0"
  std::string vendor;      ///< "mellanox" (seed 002 §5.3), or "" when unsupported
  std::string hca_type;    ///< "MT4129"; "MT41692" is a BlueField-3
  std::string fw_ver;      ///< "28.39.1002"
  std::string board_id;    ///< "MT_0000000838"
  std::string driver;      ///< basename of device/driver, "mlx5_core"
  std::string pci_address; ///< normalised "0000:0c:00.0"; "" when unknown
  int numa_node = -1;      ///< device/numa_node; -1 when unknown or unreadable
  bool is_vf = false;      ///< device/physfn exists (seed 002 §8.7 method 1)
  bool is_pf = false;      ///< device/sriov_totalvfs exists (seed 002 §8.7 method 2)
  std::string net_dev;     ///< first entry of device/net/ (seed 002 §9), or ""
  std::string operstate;   ///< that interface's operstate, "" when unknown
  std::vector<ib_port> ports;
  device_read status = device_read::complete;

  /// The link layer of the first readable port, "" when none could be read.
  std::string link_layer() const;
};

/// Everything one poll saw. `listed` is false when /sys/class/infiniband
/// itself could not be read: then nothing can be concluded about devices.
/// A directory that does not exist is listed, with no devices.
struct nic_snapshot {
  bool listed = false;
  std::vector<nic_device> devices; ///< sorted by name, VFs included (is_vf)
  std::vector<nic_diagnostic> diagnostics;

  const nic_device* find(std::string_view name) const;
};

/// Reads `<sysfs_root>/class/infiniband` and every device in it.
nic_snapshot read_nic_snapshot(const std::string& sysfs_root);

/// What stays put while a device stays at its PCI address: its identity
/// (seed 002 §5), SR-IOV role (§8), netdev (§9), ports with their link
/// layers, and where each Appendix A counter lives.
struct known_nic_device {
  nic_device identity; ///< ports carry link layers only
  std::map<unsigned, std::map<std::string, std::string>>
    counter_files; ///< port → counter → path
};

/// Reads snapshots poll after poll, as the NIC monitor does (seed 002 §3.4):
/// the first poll reads each device in full; later polls read only what
/// changes (port state, phys_state, counters, the netdev's operstate) and
/// check the device is still where it was (its directory and PCI link). A
/// device whose PCI link changed is read in full again; one that vanished or
/// was not listed is forgotten. Every `relearn_every` reads everything is
/// read in full, so what appears on a device that stayed put (a RoCE netdev
/// created later, a port or counter file) is seen within that many polls.
/// Same snapshots as read_nic_snapshot, a fraction of the system calls.
class nic_sysfs_reader {
public:
  explicit nic_sysfs_reader(std::string sysfs_root, unsigned relearn_every = 60)
    : root_(std::move(sysfs_root)),
      relearn_every_(relearn_every > 0 ? relearn_every : 1) {}
  nic_snapshot read();
  std::size_t known() const { return known_.size(); }

private:
  std::string root_;
  unsigned relearn_every_;
  unsigned reads_ = 0;
  std::map<std::string, known_nic_device> known_;
};

/// Names in `<sysfs_root>/class/infiniband`, sorted; nullopt when unreadable.
std::optional<std::vector<std::string>>
list_ib_devices(const std::string& sysfs_root, std::vector<nic_diagnostic>& diagnostics);

/// Reads one device; problems are appended to `diagnostics`.
nic_device read_nic_device(const std::string& sysfs_root, const std::string& name,
                           std::vector<nic_diagnostic>& diagnostics);

/// The InfiniBand device behind a network interface (seed 002 §4.2 default
/// route step): `<sysfs_root>/class/net/<iface>/device/infiniband/<dev>`, else
/// the device whose device/net/ holds `iface`; "" when there is none.
std::string find_ib_device_for_interface(const std::string& sysfs_root,
                                         const std::string& iface);

/// One valid entry of a port's GID table (seed 002 §9.1).
struct gid_entry {
  unsigned index = 0;
  std::string gid;     ///< "fe80:0000:0000:0000:ba3f:d2ff:fec3:65c4"
  std::string ipv4;    ///< "10.51.186.32" for an IPv4-mapped GID, else ""
  std::string type;    ///< "v1" (IB/RoCE v1), "v2" (RoCE v2), or "" when unknown
  std::string net_dev; ///< gid_attrs/ndevs/<index>, "" when absent
};

/// seed 002 §9.1: the valid GIDs of `<sysfs_root>/class/infiniband/<device>/
/// ports/<port>/gids/` (an all-zero or unreadable entry is unused), with their
/// types and network devices, by index. nullopt when there is no table, or
/// when it cannot be listed (then a diagnostic says why). Read at events only: a RoCE
/// port has 255 entries, too many for every poll.
std::optional<std::vector<gid_entry>>
read_gid_table(const std::string& sysfs_root, const std::string& device, unsigned port,
               std::vector<nic_diagnostic>& diagnostics);

/// "10.51.186.32" for an IPv4-mapped GID (::ffff:a.b.c.d), else "".
std::string ipv4_of_gid(std::string_view gid);

/// seed 002 §9.1's diagnostic value, for a RoCE (Ethernet) port: an empty
/// table (queue-pair setup fails with ENODATA, error 61), or no IPv4 GID of
/// type RoCE v2 (RoCE v2 traffic cannot be routed). Empty when neither
/// applies. A GID type mismatch between peers needs both ends: one node
/// cannot see it.
std::vector<std::string> gid_problems(const std::vector<gid_entry>& table);

/// Reads a whole small file; the failure names the file and the errno text.
expected<std::string> read_small_file(const std::string& path);

/// The kernel boot ID, trimmed; the failure names the file.
expected<std::string> read_boot_id(const std::string& path);

} // namespace vigil::agent
