// The kubelet's PodResources answer as vigil's gpu_allocations (seed 000
// §3.1): which container of which pod holds which GPU. Pure: the gRPC call is
// pod_resources_client's. Resources that are not GPUs are skipped (counted);
// a device id that names no GPU (a MIG device, a malformed id) is kept as
// unresolved, so the control plane treats that pod's GPUs as unknown and
// falls back to a full drain rather than miss it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "actors/agent/podresources/podresources_v1.pb.h"
#include "actors/agent/topology/gpu_metadata.hpp"
#include "messages/gpu_allocations.hpp"

namespace vigil::agent {

/// Resource names that are GPUs: exact names, or prefixes ending in '*'
/// ("nvidia.com/mig-*" for the MIG strategy "mixed").
struct gpu_resource_names {
  std::vector<std::string> patterns{"nvidia.com/gpu", "nvidia.com/mig-*"};
  bool matches(std::string_view resource) const;
};

/// Parses "a,b*,c" (blanks around names ignored); fails naming an empty entry.
expected<gpu_resource_names> parse_gpu_resource_names(std::string_view list);

/// A device plugin id as a GPU UUID: "GPU-<hex and dashes>" as it is; a
/// decimal index through gpu_metadata (deviceIDStrategy=index); "" otherwise.
std::string gpu_uuid_of_device_id(std::string_view id, const gpu_metadata& metadata);

/// What was left out of a conversion, for the log and /metrics.
struct allocation_read_notes {
  std::size_t other_resources = 0;     ///< container devices of non-GPU resources
  std::vector<std::string> unresolved; ///< "ns/pod/container: id" per device id
};

/// The GPU devices of every container in `list`, in the kubelet's order.
gpu_allocations gpu_allocations_from(const v1::ListPodResourcesResponse& list,
                                     const std::string& node, wall_time observed,
                                     const gpu_metadata& metadata,
                                     const gpu_resource_names& resources,
                                     allocation_read_notes& notes);

/// The GPU UUIDs among a GetAllocatableResources answer's devices.
std::vector<std::string> allocatable_gpus(const v1::AllocatableResourcesResponse& answer,
                                          const gpu_metadata& metadata,
                                          const gpu_resource_names& resources);

} // namespace vigil::agent
