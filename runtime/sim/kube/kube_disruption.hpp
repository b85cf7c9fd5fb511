// PodDisruptionBudget arithmetic as the disruption controller does it: which
// pods count as healthy and how many voluntary disruptions a budget allows.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/sim/kube/kube_object_store.hpp"

namespace vigil::kube {

/// The pod's Ready condition is "True".
bool pod_is_ready(const json& pod);
/// Ready and not being deleted: what a budget counts as healthy.
bool pod_is_healthy(const json& pod);
/// Succeeded or Failed: such pods need no budget to go.
bool pod_is_finished(const json& pod);

/// The numbers of a PDB's status.
struct disruption_budget_status {
  std::int64_t expected_pods = 0;
  std::int64_t current_healthy = 0;
  std::int64_t desired_healthy = 0;
  std::int64_t disruptions_allowed = 0;
};

/// The status the disruption controller computes for `pdb` over the pods its
/// selector picks. minAvailable and maxUnavailable take integers or "N%"
/// (rounded up); finished pods are not expected. nullopt and `why` when the
/// spec is malformed.
std::optional<disruption_budget_status>
compute_disruption_status(const json& pdb, const std::vector<const json*>& selected_pods,
                          std::string& why);

/// The PDB's new status object: the numbers, observedGeneration and the
/// DisruptionAllowed condition (its lastTransitionTime kept while its status
/// holds). A failed computation allows no disruption (reason SyncFailed).
json disruption_status_object(const json& pdb,
                              const std::optional<disruption_budget_status>& computed,
                              const std::string& why, const std::string& now_timestamp);

} // namespace vigil::kube
