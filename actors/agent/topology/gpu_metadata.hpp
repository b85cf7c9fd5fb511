// gpu_metadata.json: what the topology collector learns about a node's GPUs
// and NICs, and what the XID and NIC monitors read back (seed 002 §12.2).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "messages/agent_gpu_facts.hpp"
#include "messages/expected.hpp"

namespace vigil::agent {

/// One NVLink of a GPU and what is at its far end: an NVSwitch (or a peer
/// GPU on boards without switches) and that device's link number, -1 when
/// unknown. The `nvlinks` entries of NVSentinel's metadata, same names.
struct nvlink_info {
  int link_id = 0;
  std::string remote_pci_address; ///< normalised, as pci_address
  int remote_link_id = -1;

  friend bool operator==(const nvlink_info& a, const nvlink_info& b);
};

/// One GPU as nvidia-smi reports it. numa_node is -1 when unknown.
struct gpu_info {
  int gpu_id = 0;
  std::string pci_address; ///< normalised "0000:0f:00.0", lower case
  int numa_node = -1;
  std::string uuid;                 ///< "GPU-455d8f70-…", empty when unknown
  std::string serial_number;        ///< empty when unknown
  std::string cpu_affinity;         ///< nvidia-smi's "0-55,112-167", or "N/A"
  std::string device_name;          ///< "NVIDIA H100 80GB HBM3"; empty when unknown
  std::vector<nvlink_info> nvlinks; ///< empty without NVLink (or unknown)

  friend bool operator==(const gpu_info& a, const gpu_info& b);
};

/// The file as a whole. NVSentinel's metadata collector writes the same
/// file without numa_node, cpu_affinity and (before its NIC monitor)
/// nic_topology, and with `nvswitches` and per-GPU `nvlinks`; both are read.
/// nic_topology maps an InfiniBand device name
/// ("mlx5_0") to one topo-matrix level per GPU, in the order of `gpus`:
/// "X", "PIX", "PXB", "PHB", "NODE", "SYS" or "NV<n>" (seed 002 §12.2).
struct gpu_metadata {
  std::string version = "1.0";
  std::string node_name;
  std::string driver_version; ///< "580.159.04"; empty when unknown
  std::vector<gpu_info> gpus;
  std::map<std::string, std::vector<std::string>> nic_topology;
  /// PCI addresses of the NVSwitches the GPUs' NVLinks reach (HGX/DGX
  /// baseboards); empty on PCIe and NVLink-bridge systems.
  std::vector<std::string> nvswitches;
  /// The NVLinks were read (`nvidia-smi nvlink -R`, or a file with an
  /// `nvswitches` key): an empty `nvswitches` then means none, not unknown.
  bool nvlinks_read = false;

  friend bool operator==(const gpu_metadata& a, const gpu_metadata& b);
};

/// "0000:0F:00.0", "0F:00.0", "00000000:0f:00" → "0000:0f:00.0": a 4-digit
/// domain, lower case, function .0 when absent. Returns "" when `text` is not
/// a PCI address.
std::string normalise_pci_address(std::string_view text);

/// Parses gpu_metadata.json. Failures name the field ("gpus[1].numa_node").
/// nic_topology is optional here; the NIC monitor insists on it (§12.2).
expected<gpu_metadata> decode_gpu_metadata(std::string_view json);

/// Pretty JSON with the field names of seed 002 §12.2.
std::string encode_gpu_metadata(const gpu_metadata& metadata);

/// Reads and decodes `path`; the failure names the file.
expected<gpu_metadata> load_gpu_metadata(const std::string& path);

/// What the agent tells the control plane of these GPUs with its heartbeat:
/// the first GPU's name, the count, the NVSwitches (-1 unless the NVLinks
/// were read) and the driver.
agent_gpu_facts gpu_facts_of(const gpu_metadata& metadata);

/// The GPU whose PCI address matches (after normalisation), or nullptr.
const gpu_info* find_gpu_by_pci(const gpu_metadata& metadata, std::string_view pci);

/// The GPUs behind an NVSwitch: those with an NVLink to `switch_pci`, and,
/// when `switch_link` is given, to that port of the switch. An SXid names the
/// switch and usually the port; the GPUs are what it takes down.
std::vector<const gpu_info*> gpus_behind_nvswitch(const gpu_metadata& metadata,
                                                  std::string_view switch_pci,
                                                  std::optional<int> switch_link);

} // namespace vigil::agent
