// Whether NVIDIA Fabric Manager runs where it must (seed 003: Fabric Manager
// misconfiguration and events; seed 001: Ampere NVSwitch systems need it):
// on HGX/DGX baseboards whose NVSwitches sit on the node (A100, H100,
// H200: the nvidia-nvswitch driver binds them), nv-fabricmanager programs the
// switches; without it the GPUs' fabric never completes, or new CUDA work
// fails once it exits. NVL5 systems (GB200) have no local NVSwitch and no
// Fabric Manager on the node: nothing is expected there. Read from the host's
// /sys and /proc (the agent mounts both), no D-Bus, no systemd.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace vigil::agent {

/// The process name the Fabric Manager daemon runs under. /proc/<pid>/comm
/// holds at most 15 characters, so it reads "nv-fabricmanage".
inline constexpr std::string_view fabric_manager_process = "nv-fabricmanager";

struct fabric_manager_state {
  std::size_t nvswitches = 0; ///< NVSwitches bound to nvidia-nvswitch on this node
  bool running = false;       ///< an nv-fabricmanager process exists
  /// Fabric Manager is expected (local NVSwitches) and not running.
  bool missing() const { return nvswitches > 0 && !running; }
};

/// NVSwitch PCI functions bound to the nvidia-nvswitch driver under
/// `sysfs_root` (its bus/pci/drivers/nvidia-nvswitch entries named like a
/// PCI address). 0 when the driver or the directory is absent.
std::size_t local_nvswitches(const std::string& sysfs_root);

/// Whether a process whose /proc/<pid>/comm is `name` (cut to the kernel's
/// 15 characters) runs under `proc_root`. Unreadable entries are skipped.
bool process_running(const std::string& proc_root, std::string_view name);

/// Both, for one reading of fabric_monitor.
fabric_manager_state read_fabric_manager(const std::string& sysfs_root,
                                         const std::string& proc_root);

} // namespace vigil::agent
