// Which pod holds which GPU on a node, as the node's agent reads it from the
// kubelet's PodResources API and reports it to the control plane on
// POST /v1/allocations (seed 000 §3.1: a partial drain evicts only the pods
// holding the failing GPU). CAF-free; the JSON below is the wire format:
//
//   {"nodeName":"gpu-node-1","observedAt":"2026-11-25T10:00:00Z",
//    "source":"kubelet-podresources","available":true,
//    "allocations":[{"namespace":"team-a","pod":"train-0","container":"main",
//                    "resourceName":"nvidia.com/gpu","gpuUuids":["GPU-…"],
//                    "unresolvedDeviceIds":["MIG-…"]}]}
//
// "available": false (with "error") says the kubelet could not be asked, so
// the control plane knows why it has no mapping.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "messages/expected.hpp"
#include "messages/wall_time.hpp"

namespace vigil {

/// One container's devices of one GPU resource.
struct gpu_allocation {
  std::string ns;
  std::string pod;
  std::string container;
  std::string resource; ///< e.g. "nvidia.com/gpu"
  std::vector<std::string> gpu_uuids;
  /// Device ids the agent could not turn into a GPU UUID (MIG devices,
  /// malformed ids): the pod's GPUs are then not fully known.
  std::vector<std::string> unresolved;
};

struct gpu_allocations {
  std::string node;
  wall_time observed{};
  std::string source = "kubelet-podresources";
  bool available = true; ///< false: the kubelet could not be asked; see error
  std::string error;
  std::vector<gpu_allocation> allocations;
};

std::string encode_gpu_allocations(const gpu_allocations& report);

/// Fails naming the first field that is missing or of the wrong type.
expected<gpu_allocations> decode_gpu_allocations(std::string_view json);

/// The GPUs the pod ns/name holds: nullopt when the report does not list the
/// pod, or lists a device of it that is not resolved to a GPU UUID.
std::optional<std::vector<std::string>>
gpus_held_by(const gpu_allocations& report, std::string_view ns, std::string_view pod);

/// A pod holding one of a fault's GPUs, with every GPU it holds on the node
/// (a job on it loses them all): what the journal keeps for attribution.
struct gpu_holder {
  std::string ns;
  std::string pod;
  std::vector<std::string> gpus; ///< sorted
};

/// The pods holding any of `gpu_uuids`, sorted by namespace and name.
std::vector<gpu_holder> gpu_holders(const gpu_allocations& report,
                                    const std::vector<std::string>& gpu_uuids);

} // namespace vigil
