// What a drain reads from and sends to the API server, as pure functions: the
// node's pods (with the GPU-to-pod mapping of seed 000 §3.1), Eviction and
// DELETE requests, how their answers read, and the drain's journal rows.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "actors/control/rules/drain_plan.hpp"
#include "messages/expected.hpp"
#include "messages/gpu_allocations.hpp"
#include "runtime/kube/kube_api.hpp"

namespace vigil::control {

/// The pod annotation listing the GPUs a pod was allocated (seed 000 §3.1),
/// the fallback for pods the agent's PodResources report does not cover:
/// {"devices":[{"resourceName":"nvidia.com/gpu","deviceIds":["GPU-…"]}]}
/// (a bare devices array is accepted too).
constexpr const char* gpu_devices_annotation = "vigil.dev/gpu-devices";

/// The extended resource whose request marks a pod as holding GPUs.
constexpr const char* gpu_resource = "nvidia.com/gpu";

/// GET /api/v1/pods?fieldSelector=spec.nodeName=<node>.
kube::kube_request node_pods_request(const std::string& node);

/// The pods of a PodList (with their string labels, by which the drain knows
/// vigil's own Job pods). A pod whose devices annotation is unreadable gets
/// gpu_uuids nullopt (its GPUs are unknown, so a partial drain falls back to
/// full); a List that is not one fails naming what is wrong.
expected<std::vector<pod_info>> pods_from_list(const std::string& pod_list_json);

/// Seed 000 §3.1's GPU-to-pod mapping from the real sources: each pod that
/// `dra` (the node's ResourceClaims) lists with resolved GPUs gets them
/// (source "dra"), else each pod the node agent's PodResources `report`
/// lists (source "kubelet"); the annotation is the fallback for the others.
/// Returns why the agent's report could not be used ("" when it could), for
/// the drain's journal row.
std::string
apply_gpu_allocations(std::vector<pod_info>& pods,
                      const std::optional<gpu_allocations>& report,
                      const std::optional<gpu_allocations>& dra = std::nullopt);

/// GPU UUIDs of an annotation value; nullopt when it is not the format above.
std::optional<std::vector<std::string>>
gpu_uuids_from_annotation(const std::string& value);

/// POST pods/<name>/eviction (policy/v1 Eviction): the API server refuses it
/// with 429 while a PodDisruptionBudget allows no disruption. 429 is left to
/// the drain's own backoff, not retried inside the client.
kube::kube_request eviction_request(const pod_ref& pod);

/// DELETE pods/<name> (DeleteAfterTimeout once the namespace's timeout passed).
kube::kube_request pod_delete_request(const pod_ref& pod);

/// How the answer to an eviction or a deletion reads for drain_progress.
step_result classify(const kube::kube_result& result);

/// Journal row kind of a drain's progress: started, pods' outcomes, the end.
constexpr const char* drain_row = "drain";

/// The row written before the first eviction: the plan, why, what is skipped.
nlohmann::json drain_started_body(const drain_plan& plan, const std::string& key,
                                  bool dry_run);
/// The row written when the drain ends (succeeded or cancelled).
nlohmann::json drain_finished_body(const drain_progress& progress, const std::string& key,
                                   std::size_t evictions, std::size_t deletions);

} // namespace vigil::control
