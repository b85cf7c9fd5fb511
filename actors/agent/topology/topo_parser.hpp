// Parsers for nvidia-smi's `topo -m` matrix and `--query-gpu` CSV, and their
// merge into gpu_metadata.json's contract (seed 002 §12.2).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "actors/agent/topology/gpu_metadata.hpp"
#include "messages/expected.hpp"

namespace vigil::agent {

/// One GPU row of `nvidia-smi topo -m`.
struct topo_gpu_row {
  std::string name;                ///< "GPU0"
  std::vector<std::string> levels; ///< one per device column: "X", "NV18", "PIX", …
  std::string cpu_affinity;        ///< "0-55,112-167", "N/A", or "" when absent
  std::string numa_affinity;       ///< "0", "N/A", or ""
  std::string gpu_numa_id;         ///< "2" on GB200, "N/A", or ""
};

/// The matrix as printed. `columns` are the device columns in header order
/// ("GPU0"…, "NIC0"… or, from older drivers, "mlx5_0"…).
struct topo_matrix {
  std::vector<std::string> columns;
  std::vector<topo_gpu_row> gpus;               ///< in row order
  std::map<std::string, std::string> nic_names; ///< legend: "NIC0" → "mlx5_0"

  /// The legend's device name for a column ("NIC3" → "mlx5_3"); the column
  /// name itself when the legend lacks it.
  std::string device_name(const std::string& column) const;
};

/// Parses `nvidia-smi topo -m` output: ANSI escapes are dropped; a header
/// wrapped over several lines is joined; "CPU Affinity", "NUMA Affinity" and
/// "GPU NUMA ID" are optional; the "NIC Legend" section maps NICn to devices.
/// Fails (naming the line) when there is no header or no GPU row, or a GPU
/// row has fewer levels than there are device columns.
expected<topo_matrix> parse_topo_matrix(std::string_view text);

/// The fields the collector asks `nvidia-smi --query-gpu=` for, in order.
/// The first four are the seed's; name and driver_version were added later,
/// so saved outputs with four fields still read.
inline constexpr std::string_view gpu_query_fields =
  "index,uuid,pci.bus_id,serial,name,driver_version";

/// One line of `nvidia-smi --query-gpu=<gpu_query_fields> --format=csv,noheader`.
/// "[N/A]" and "N/A" become "".
struct gpu_query_row {
  int index = 0;
  std::string uuid;
  std::string pci_address; ///< normalised, "0000:03:00.0"
  std::string serial;
  std::string name;           ///< "NVIDIA H100 80GB HBM3"; "" in four-field rows
  std::string driver_version; ///< "580.159.04"; "" in four-field rows
};

/// Fails naming the line ("line 3: …") for a row without four or six fields,
/// a non-numeric index or an unreadable PCI address.
expected<std::vector<gpu_query_row>> parse_gpu_query_csv(std::string_view text);

/// `nvidia-smi nvlink -R` (remote link info): for each GPU index, its NVLinks
/// ("Link 3: Remote Device 00000008:00:00.0: Link 29"). GPUs without active
/// links are absent. Lines it does not know are skipped; a link line before
/// any "GPU n:" header is ignored. Never fails: an empty map is "no NVLinks".
std::map<int, std::vector<nvlink_info>> parse_nvlink_remotes(std::string_view text);

/// Gives each GPU its NVLinks (by index) and sets `nvswitches` to the far
/// ends that are not GPUs of this node, sorted: on an NVLink-bridge board
/// the far end is a peer GPU, on HGX/DGX an NVSwitch.
void attach_nvlinks(gpu_metadata& metadata,
                    const std::map<int, std::vector<nvlink_info>>& links);

/// gpu_metadata for `node_name`: GPUs in index order from the query (with
/// their names; the first driver version given is the node's); from
/// the matrix row GPU<index>: numa_node (NUMA Affinity when a single number,
/// else -1) and cpu_affinity; nic_topology keyed by the legend's device name,
/// one level per GPU in that order. Fails when a queried GPU has no row.
expected<gpu_metadata> build_gpu_metadata(std::string node_name,
                                          const std::vector<gpu_query_row>& gpus,
                                          const topo_matrix& matrix);

} // namespace vigil::agent
