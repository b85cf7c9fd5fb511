// The fabric_monitor actor: asks nvidia-smi for each GPU's NVLink fabric
// registration and health and for the NVLinks' status every interval, looks
// for Fabric Manager where the node's NVSwitches need it, and hands
// fabric_health's and gpu_presence's events to the forwarder. nvidia-smi blocks (and may
// hang: it is killed after a timeout), so spawn it detached.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/agent/agent_figures.hpp"
#include "actors/agent/fabric/fabric_health.hpp"
#include "actors/agent/fabric/gpu_presence.hpp"
#include "actors/agent/topology/topology_collector.hpp"
#include "actors/agent/xid/xid_catalog.hpp"
#include "runtime/clock.hpp"

namespace vigil {

struct fabric_monitor_config {
  std::string node;
  std::string nvidia_smi = "nvidia-smi";
  std::chrono::milliseconds interval{60000};
  std::chrono::seconds grace{600}; ///< registration may take this long
  /// The host's /sys and /proc, where Fabric Manager's NVSwitches and its
  /// process are looked for (fabric_manager.hpp).
  std::string sysfs_root = "/sys";
  std::string proc_root = "/proc";
  /// The GPUs the node is known to have (its gpu_metadata): one gone from
  /// nvidia-smi's answer is a fault even when it was never listed since the
  /// agent started.
  std::vector<agent::known_gpu> known_gpus;
  /// Gives a GPU gone XID 79's action; may be null.
  std::shared_ptr<const agent::xid_catalog> catalog;
};

struct fabric_monitor_state {
  std::optional<agent::fabric_health> health;
  std::optional<agent::gpu_presence> presence;
  agent::command_runner run;
  caf::actor forwarder;
  std::string last_problem;      ///< logged once until it changes
  std::string last_link_problem; ///< the NVLink status's, likewise
  /// Ask for the fabric's health too, until the driver refuses those fields.
  bool ask_health = true;
  agent::monitor_figures figures;
  static inline const char* name = "fabric_monitor";
};

using fabric_monitor_actor = caf::stateful_actor<fabric_monitor_state>;

/// `run` executes the query (agent::timed_command_runner in the agent, a fake
/// in tests): with the fabric's health first, the registration alone once
/// the driver refuses the health fields. A query that fails is logged once
/// and counted as malformed; where the driver failed (a hung nvidia-smi, exit
/// 9, 10, 15 or 255) gpu_presence turns repeated failures into a node fault,
/// and a GPU gone from the answer into a fault of that GPU.
caf::behavior fabric_monitor(fabric_monitor_actor* self, fabric_monitor_config config,
                             agent::command_runner run, caf::actor forwarder,
                             std::shared_ptr<const clock> wall);

} // namespace vigil
