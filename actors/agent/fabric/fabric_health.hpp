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

#include "actors/agent/fabric/fabric_manager.hpp"
#include "messages/expected.hpp"
#include "messages/health_event.hpp"
#include "messages/wall_time.hpp"

namespace vigil::agent {

inline constexpr std::string_view fabric_agent_name = "fabric-health-monitor";
inline constexpr std::string_view fabric_check_name = "GPUFabricHealth";
/// The nvidia-smi query of the fabric's registration: every driver with a
/// fabric has these fields.
inline constexpr std::string_view fabric_query_fields =
  "index,uuid,pci.bus_id,fabric.state,fabric.status";
/// The same with the fabric's health (`nvidia-smi -q`'s Fabric → Health:
/// Summary, Bandwidth, Route Recovery in progress, Route Unhealthy, Access
/// Timeout Recovery, Incorrect Configuration, Partition Assigned), which
/// newer drivers have (the
/// H200's driver 580 of the device session lists them). A driver without them
/// refuses the query ("is not a valid field"); fabric_monitor then asks for
/// fabric_query_fields.
inline constexpr std::string_view fabric_health_query_fields =
  "index,uuid,pci.bus_id,fabric.state,fabric.status,fabric.health.summary,"
  "fabric.health.bandwidth,fabric.health.route_recovery_in_progress,"
  "fabric.health.route_unhealthy,fabric.health.access_timeout_recovery,"
  "fabric.health.incorrect_configuration,fabric.health.partition_assigned";

/// One GPU's row: fabric.state is Not Supported, Not Started, In Progress or
/// Completed; fabric.status is Success or the NVML error that stopped it.
/// The health fields are "" when N/A or not asked for: summary Healthy,
/// Unhealthy or Limited Capacity; bandwidth Full or Degraded; the recoveries
/// and route_unhealthy True or False; incorrect_configuration None or what
/// is wrong (no partition, insufficient NVLinks, a wrong system GUID, …);
/// partition_assigned True or False (kept for the record, never judged: a
/// GPU outside any partition is an operator's choice).
struct fabric_row {
  int index = 0;
  std::string uuid;
  std::string pci;
  std::string state;  ///< "" when N/A
  std::string status; ///< "" when N/A
  std::string summary;
  std::string bandwidth;
  std::string route_recovery;
  std::string route_unhealthy;
  std::string access_timeout_recovery;
  std::string incorrect_configuration;
  std::string partition_assigned;
};

/// Reads `--query-gpu=<fabric_query_fields or fabric_health_query_fields>
/// --format=csv,noheader` (a header line is skipped too): 5 or 12 fields a
/// row. A row with another number of fields or a bad index fails naming its
/// line.
expected<std::vector<fabric_row>> parse_fabric_query(std::string_view csv);

/// Whether the node has an NVLink fabric to judge: a GPU that reports a
/// fabric state (not N/A, not Not Supported), or NVSwitches of its own.
bool has_fabric(const std::vector<fabric_row>& rows, const fabric_manager_state& manager);

/// What is wrong with one registered (Completed, Success) GPU's fabric by its
/// health fields, "" when nothing; `recovering` is set while the driver
/// recovers a route or an access timeout (not a fault yet: it may heal).
std::string fabric_health_problem(const fabric_row& row, bool& recovering);

class fabric_health {
public:
  /// A registration still In Progress or Not Started after `grace` is a
  /// fault (Fabric Manager is not running or cannot finish).
  fabric_health(std::string node, std::chrono::seconds grace = std::chrono::minutes(10));

  /// One reading. Nothing while no GPU has a fabric (a PCIe or single-GPU
  /// node). Otherwise the node's state when it changes (and at the first
  /// reading, so what an earlier run raised is cleared): unhealthy, fatal,
  /// RESTART_BM, naming each GPU whose status is not Success, whose
  /// registration or recovery is overdue, or whose fabric health is not
  /// good (fabric_health_problem); healthy once every GPU is Completed,
  /// Success and (where the driver says) healthy.
  /// `manager` is Fabric Manager's state: where the node's own NVSwitches
  /// need it and it is not running, that is a fault of its own (the first
  /// named), even while the GPUs still show a completed fabric.
  /// `nvlink_faults` are nvlink_shortfalls' lines: GPUs of a fabric that lost
  /// NVLinks their peers have, faults too.
  std::vector<health_event> observe(const std::vector<fabric_row>& rows, wall_time now,
                                    const fabric_manager_state& manager = {},
                                    const std::vector<std::string>& nvlink_faults = {});

private:
  std::string node_;
  std::chrono::seconds grace_;
  std::optional<wall_time> pending_since_; ///< some GPU not yet Completed, or recovering
  std::optional<bool> unhealthy_;          ///< what was last sent
  std::string signature_;                  ///< the faults last sent
};

} // namespace vigil::agent
