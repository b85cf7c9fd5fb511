// What a node's agent knows of its GPUs from gpu_metadata.json, sent with
// every heartbeat (POST /v1/heartbeat, key "gpus") so the control plane can
// decide what may be reset alone from the hardware itself rather than from
// labels only GPU feature discovery sets (seed 001 "Scope of Support"):
//
//   "gpus": {"product":"NVIDIA A100-SXM4-80GB","count":8,"nvswitches":6,
//            "driverVersion":"575.57.08",
//            "devices":[{"index":0,"uuid":"GPU-…","pci":"0000:07:00.0"},…]}
//
// (the devices: which UUID sits at which PCI address, for the console's node
// page).
// Every key is optional; an unknown count is -1 (an older agent, or no
// metadata collected). CAF-free.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "messages/expected.hpp"

namespace vigil {

/// One GPU as nvidia-smi lists it.
struct agent_gpu {
  int index = -1;   ///< nvidia-smi's index; -1 unknown
  std::string uuid; ///< "GPU-455d8f70-…"
  std::string pci;  ///< "0000:07:00.0"; "" unknown

  friend bool operator==(const agent_gpu& a, const agent_gpu& b) {
    return a.index == b.index && a.uuid == b.uuid && a.pci == b.pci;
  }
};

struct agent_gpu_facts {
  std::string product; ///< nvidia-smi's name of the node's GPUs; "" unknown
  int gpu_count = -1;
  /// NVSwitches the GPUs' NVLinks reach: 0 on PCIe and NVLink-bridge boards,
  /// 4 or 6 on HGX/DGX baseboards, -1 unknown.
  int nvswitch_count = -1;
  std::string driver_version;          ///< "" unknown
  std::vector<agent_gpu> devices = {}; ///< empty: not reported (an older agent)

  friend bool operator==(const agent_gpu_facts& a, const agent_gpu_facts& b) {
    return a.product == b.product && a.gpu_count == b.gpu_count
           && a.nvswitch_count == b.nvswitch_count && a.driver_version == b.driver_version
           && a.devices == b.devices;
  }
};

/// More GPUs than any node has (an NVL72 rack is 72 over 18 nodes).
inline constexpr std::size_t max_agent_gpus = 1024;

nlohmann::json encode_agent_gpu_facts(const agent_gpu_facts& facts);

/// Failures name the key under "gpus" ("gpus.count: expected an integer ≥ 0",
/// "gpus.devices[2].uuid: expected a string"). At most max_agent_gpus devices.
expected<agent_gpu_facts> decode_agent_gpu_facts(const nlohmann::json& object);

} // namespace vigil
