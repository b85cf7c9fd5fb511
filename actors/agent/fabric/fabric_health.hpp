// NVLink fabric health on NVSwitch systems (HGX, NVL72): each GPU's fabric
// registration as the driver reports it (`nvidia-smi --query-gpu=fabric.state,
// fabric.status`, which Fabric Manager completes at start). A broken fabric
// behind GPUs that each look healthy is a node fault: the repair is a Fabric
// Manager restart, then a reboot, never a per-GPU reset. Plain code; the
// agent's fabric_monitor polls and forwards.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "messages/expected.hpp"
#include "messages/health_event.hpp"
#include "messages/wall_time.hpp"

namespace vigil::agent {

inline constexpr std::string_view fabric_agent_name = "fabric-health-monitor";
inline constexpr std::string_view fabric_check_name = "GPUFabricHealth";
/// The nvidia-smi query whose CSV parse_fabric_query reads.
inline constexpr std::string_view fabric_query_fields =
  "index,uuid,pci.bus_id,fabric.state,fabric.status";

/// One GPU's row: fabric.state is Not Supported, Not Started, In Progress or
/// Completed; fabric.status is Success or the NVML error that stopped it.
struct fabric_row {
  int index = 0;
  std::string uuid;
  std::string pci;
  std::string state;  ///< "" when N/A
  std::string status; ///< "" when N/A
};

/// Reads `--query-gpu=index,uuid,pci.bus_id,fabric.state,fabric.status
/// --format=csv,noheader` (a header line is skipped too). A row with the
/// wrong number of fields or a bad index fails naming its line.
expected<std::vector<fabric_row>> parse_fabric_query(std::string_view csv);

class fabric_health {
public:
  /// A registration still In Progress or Not Started after `grace` is a
  /// fault (Fabric Manager is not running or cannot finish).
  fabric_health(std::string node, std::chrono::seconds grace = std::chrono::minutes(10));

  /// One reading. Nothing while no GPU has a fabric (a PCIe or single-GPU
  /// node). Otherwise the node's state when it changes (and at the first
  /// reading, so what an earlier run raised is cleared): unhealthy, fatal,
  /// RESTART_BM, naming each GPU whose status is not Success or whose
  /// registration is overdue; healthy once every GPU is Completed/Success.
  std::vector<health_event> observe(const std::vector<fabric_row>& rows, wall_time now);

private:
  std::string node_;
  std::chrono::seconds grace_;
  std::optional<wall_time> pending_since_; ///< some GPU not yet Completed
  std::optional<bool> unhealthy_;          ///< what was last sent
  std::string signature_;                  ///< the faults last sent
};

} // namespace vigil::agent
