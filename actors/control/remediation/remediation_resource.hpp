// The maintenance custom resources as the node actor creates and reads them
// (seed 000 §4.1): GPUReset, RebootNode and TerminateNode of
// group vigil.dev/v1alpha1, cluster-scoped, and the operator's own kinds for
// CUSTOM events (remediation.custom_actions). Pure code; the actor sends the
// requests through the gateway.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "actors/control/remediation/remediation_plan.hpp"
#include "actors/control/remediation/remediation_state.hpp"
#include "messages/expected.hpp"
#include "messages/wall_time.hpp"
#include "runtime/kube/kube_api.hpp"

namespace vigil::control {

/// Journal row kind of every remediation step (requested, skipped, created,
/// finished, verified, escalated, deferred, cleared).
constexpr const char* remediation_row = "remediation";

/// The collection of a plan's CR: vigil's own kinds, or the custom kind the
/// plan carries; nullopt for plans that create no CR.
std::optional<kube::api_resource> maintenance_resource(const remediation_plan& plan);

/// The CR's name: "<kind>-<node>-<hash>" where the hash covers the equivalence
/// group and the source event, so creating it again after a restart answers
/// 409 AlreadyExists instead of remediating twice. At most 253 characters.
std::string maintenance_cr_name(std::string_view node, const remediation_plan& plan,
                                std::string_view event_id);

/// The CR body: spec.nodeName, spec.gpuUUIDs (exactly one: GPUReset, and a
/// custom CR whose event names a GPU), spec.reason, spec.sourceEventId,
/// spec.customAction (custom only); labels naming node and group.
std::string maintenance_cr_body(const std::string& name, std::string_view node,
                                const remediation_plan& plan, std::string_view event_id);

/// POST and GET of the plan's CR; the plan must have one (maintenance_resource).
kube::kube_request create_cr_request(const remediation_plan& plan,
                                     const std::string& body);
kube::kube_request get_cr_request(const remediation_plan& plan, const std::string& name);

/// Where a CR stands, from its status.
struct cr_progress {
  std::string phase; ///< status.phase, "Pending" when there is no status yet
  bool terminal = false;
  bool succeeded = false;
  std::string failure_reason; ///< status.failureReason of a failed CR
  std::string message;        ///< the newest condition's message, for the journal
  /// status.startedAt: when the janitor began (a RebootNode: before the
  /// reboot, so what was reported earlier predates the new boot).
  std::optional<wall_time> started_at;
};

/// Reads a CR's JSON; a body that is not an object with metadata fails naming
/// what is missing. Phases Succeeded and Failed are terminal. A CR with no
/// phase (an operator's controller may follow the Job convention instead) is
/// done when a condition of type Complete or Failed has status True.
expected<cr_progress> read_cr_progress(std::string_view cr_json);

/// Merge patch of the Node's latestFaultRemediationState annotation; an empty
/// state removes it (seed 000 §4.2: the release removes the annotation).
kube::kube_request remediation_annotation_request(const std::string& node,
                                                  const remediation_state& state);

} // namespace vigil::control
