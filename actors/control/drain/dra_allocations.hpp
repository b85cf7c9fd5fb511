// Seed 000 §3.1's GPU-to-pod mapping on clusters that allocate GPUs with
// Dynamic Resource Allocation, read by the control plane without the agent:
// a ResourceClaim's status.allocation.devices.results name (driver, pool,
// device); the node's ResourceSlices give each device's attributes, among
// them the GPU UUID; status.reservedFor names the pods using the claim.
// resource.k8s.io/v1 first, v1beta1 where v1 is not served (v1beta1 keeps
// device attributes under devices[].basic). Pure: the drain actor asks.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "messages/expected.hpp"
#include "messages/gpu_allocations.hpp"
#include "runtime/kube/kube_api.hpp"

namespace vigil::control {

/// The resource.k8s.io versions tried, newest first.
inline constexpr std::string_view dra_versions[] = {"v1", "v1beta1"};

/// GET /apis/resource.k8s.io/<version>/namespaces/<ns>/resourceclaims: the
/// claims of one namespace whose pods on the node claim resources. Never the
/// whole cluster's: a drain's cost must not grow with the cluster (issue 22;
/// thousands of drains in a mass event each listed every claim).
kube::kube_request resource_claims_request(std::string_view version,
                                           const std::string& ns);

/// GET …/resourceslices?fieldSelector=spec.nodeName=<node>.
kube::kube_request resource_slices_request(std::string_view version,
                                           const std::string& node);

/// The GPU UUID attribute of a slice's device: "uuid" or "<domain>/uuid"
/// (NVIDIA's DRA driver publishes "uuid"), a string.
std::string device_gpu_uuid(const nlohmann::json& device);

/// The pods holding this node's DRA devices, as gpu_allocations (source
/// "dra", resource "dra:<driver>"). Devices of the claim that are in this
/// node's slices count; a device there without a UUID is unresolved, so
/// that pod's GPUs are unknown. `claim_lists`: one ResourceClaimList per
/// namespace read. Fails naming a body that is not a List.
expected<gpu_allocations> dra_gpu_allocations(const std::vector<std::string>& claim_lists,
                                              const std::string& slice_list_json,
                                              const std::string& node);

} // namespace vigil::control
