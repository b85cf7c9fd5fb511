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

/// One line of `nvidia-smi --query-gpu=index,uuid,pci.bus_id,serial
/// --format=csv,noheader`. "[N/A]" and "N/A" become "".
struct gpu_query_row {
  int index = 0;
  std::string uuid;
  std::string pci_address; ///< normalised, "0000:03:00.0"
  std::string serial;
};

/// Fails naming the line ("line 3: …") for a row without four fields, a
/// non-numeric index or an unreadable PCI address.
expected<std::vector<gpu_query_row>> parse_gpu_query_csv(std::string_view text);

/// gpu_metadata for `node_name`: GPUs in index order from the query; from
/// the matrix row GPU<index>: numa_node (NUMA Affinity when a single number,
/// else -1) and cpu_affinity; nic_topology keyed by the legend's device name,
/// one level per GPU in that order. Fails when a queried GPU has no row.
expected<gpu_metadata> build_gpu_metadata(std::string node_name,
                                          const std::vector<gpu_query_row>& gpus,
                                          const topo_matrix& matrix);

} // namespace vigil::agent
