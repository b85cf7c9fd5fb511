// gpu_metadata.json: what the topology collector learns about a node's GPUs
// and NICs, and what the XID and NIC monitors read back (seed 002 §12.2).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "messages/expected.hpp"

namespace vigil::agent {

/// One GPU as nvidia-smi reports it. numa_node is -1 when unknown.
struct gpu_info {
  int gpu_id = 0;
  std::string pci_address; ///< normalised "0000:0f:00.0", lower case
  int numa_node = -1;
  std::string uuid;          ///< "GPU-455d8f70-…", empty when unknown
  std::string serial_number; ///< empty when unknown
  std::string cpu_affinity;  ///< nvidia-smi's "0-55,112-167", or "N/A"

  friend bool operator==(const gpu_info& a, const gpu_info& b);
};

/// The file as a whole. nic_topology maps an InfiniBand device name
/// ("mlx5_0") to one topo-matrix level per GPU, in the order of `gpus`:
/// "X", "PIX", "PXB", "PHB", "NODE", "SYS" or "NV<n>" (seed 002 §12.2).
struct gpu_metadata {
  std::string version = "1.0";
  std::string node_name;
  std::vector<gpu_info> gpus;
  std::map<std::string, std::vector<std::string>> nic_topology;

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

/// The GPU whose PCI address matches (after normalisation), or nullptr.
const gpu_info* find_gpu_by_pci(const gpu_metadata& metadata, std::string_view pci);

} // namespace vigil::agent
