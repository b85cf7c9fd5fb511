// The devices a node had at one boot, kept by the agent across reboots (its
// state directory is a hostPath), so that a GPU or NIC missing after a reboot
// is reported as a fault rather than taken for a recovery: a reboot that
// "succeeds" with a GPU off the bus has not fixed the node (seed 000 §4, the
// reboot rung of the escalation ladder).
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/agent/topology/gpu_metadata.hpp"
#include "messages/expected.hpp"
#include "messages/health_event.hpp"
#include "messages/wall_time.hpp"

namespace vigil::agent {

struct device_inventory {
  std::string boot_id;
  std::map<std::string, std::string> gpus; ///< UUID → PCI address
  std::set<std::string> nics;              ///< InfiniBand/RoCE device names

  bool empty() const { return gpus.empty() && nics.empty(); }
  friend bool operator==(const device_inventory& a, const device_inventory& b) {
    return a.boot_id == b.boot_id && a.gpus == b.gpus && a.nics == b.nics;
  }
};

/// The inventory a freshly collected gpu_metadata.json describes: its GPUs
/// with a UUID, and the NIC devices of its nic_topology.
device_inventory inventory_of(const gpu_metadata& metadata, std::string boot_id);

/// {"bootId":…,"gpus":{"GPU-…":"0000:18:00.0"},"nics":["mlx5_0",…]}
std::string encode_device_inventory(const device_inventory& inventory);
/// Failures name the field that is wrong.
expected<device_inventory> decode_device_inventory(const std::string& text);

/// The inventory saved at `path`; nullopt when there is none (first start),
/// a failure naming the file when it cannot be read or decoded.
expected<std::optional<device_inventory>> load_device_inventory(const std::string& path);
/// Replaces the file whole (write beside, rename).
status save_device_inventory(const std::string& path, const device_inventory& inventory);

/// The agent's check at start: when `now` is of another boot than `before`,
/// one fatal HealthEvent per GPU slot (PCI address; a new UUID in the same
/// slot is a replaced GPU, not a missing one) and, when fewer NICs are
/// present, per NIC name that `before` had and `now` has not (GPU: entities
/// GPU_UUID and PCI; NIC: entity NIC). A GPU or NIC that did not come back
/// from a reboot needs a new node: REPLACE_VM. Nothing when `before` is empty
/// (first start) or of the same boot (an agent restart says nothing about the
/// hardware).
std::vector<health_event> devices_missing_after_boot(const device_inventory& before,
                                                     const device_inventory& now,
                                                     const std::string& node,
                                                     wall_time at);

/// The inventory could not be taken after a reboot (nvidia-smi failed or timed
/// out): a non-fatal event, so that it is journaled and seen; the previous
/// boot's inventory is kept for the next start to compare with. (vigil's own
/// reboots are checked by their validation Job, which counts the GPUs.)
health_event inventory_unchecked(const std::string& node, const std::string& boot_id,
                                 const std::string& why, wall_time at);

/// The agent and check name of those events.
inline constexpr const char* inventory_agent = "vigil-agent";
inline constexpr const char* gpu_missing_check = "GpuMissingAfterReboot";
inline constexpr const char* nic_missing_check = "NicMissingAfterReboot";
inline constexpr const char* inventory_unchecked_check = "DeviceInventoryUnchecked";

} // namespace vigil::agent
