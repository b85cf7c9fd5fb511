// The Node object as the node actor reads and writes it: what vigil observes
// (cordon, taints, labels, its conditions, its ownership marks) and the
// patches that converge it to a quarantine_decision. Pure code; the actor
// sends the requests through the gateway.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "actors/control/rules/label_selector.hpp"
#include "actors/control/rules/node_conditions.hpp"
#include "actors/control/rules/quarantine_rules.hpp"
#include "messages/expected.hpp"
#include "messages/wall_time.hpp"
#include "runtime/kube/kube_api.hpp"

namespace vigil::control {

/// Annotations vigil keeps on a Node (ARCHITECTURE.md §4: "vigil marks nodes
/// it cordoned and never uncordons a node someone else cordoned").
namespace node_annotation {
/// "true" while the cordon is vigil's own.
constexpr const char* cordoned = "vigil.dev/cordoned";
/// JSON array of the taints vigil added: [{"key","value","effect"}].
constexpr const char* owned_taints = "vigil.dev/owned-taints";
/// The active unhealthy events (encode_quarantine_annotation).
constexpr const char* quarantine = "vigil.dev/quarantine";
} // namespace node_annotation

/// What the node actor knows of its Node between watch notifications.
struct observed_node {
  node_observation observation;
  std::string resource_version;
  bool gpu_node = false; ///< matches the fleet's GPU-node selector label
  /// Every condition of the Node (Ready, node-problem-detector's, …), for
  /// judge_node_conditions.
  std::vector<kube_condition> conditions;
};

/// Which of a Node's labels an observation keeps; an empty filter keeps
/// every one. Every label counts for `gpu_nodes` either way.
using label_filter = std::function<bool(std::string_view key)>;

/// Reads a Node object (a watch event's, parsed once by the gateway's watch
/// decoder).
/// Conditions are read for the types `policy` manages only, labels for the
/// GPU-node selector and then kept as `keep` says. What is not a Node fails
/// naming what is missing.
expected<observed_node> observe_node(const nlohmann::json& node,
                                     const quarantine_policy& policy,
                                     const label_selector& gpu_nodes = {},
                                     const label_filter& keep = {});
/// The same from a response body; a body that is not JSON fails too.
expected<observed_node> observe_node_body(const std::string& body,
                                          const quarantine_policy& policy,
                                          const label_selector& gpu_nodes = {},
                                          const label_filter& keep = {});

/// The merge patch for metadata and spec: cordon, the whole taint list (taints
/// are replaced whole by the API server, so the patch carries the observed
/// taints minus remove_taints plus add_taints), the ownership marks and the
/// quarantine annotation. It names metadata.resourceVersion, so a Node changed
/// since it was observed answers 409 and nothing is overwritten. Empty when
/// the decision changes nothing there.
std::string node_spec_patch(const quarantine_decision& decision,
                            const observed_node& node);

/// The strategic merge patch of status.conditions (merged by type) for the
/// status subresource; empty when no condition changes.
std::string node_status_patch(const quarantine_decision& decision, wall_time now);

/// PATCH requests for both, in the order to send them (spec first).
std::optional<kube::kube_request> spec_patch_request(const std::string& node,
                                                     const std::string& patch);
std::optional<kube::kube_request> status_patch_request(const std::string& node,
                                                       const std::string& patch);
kube::kube_request get_node_request(const std::string& node);

/// A core/v1 Event about the Node (reason "Quarantined", "Uncordoned", …),
/// posted in `ns` so `kubectl describe node` shows vigil's decisions.
kube::kube_request node_event_request(const std::string& node, const std::string& ns,
                                      const std::string& reason,
                                      const std::string& message, bool warning,
                                      wall_time now, std::uint64_t sequence);

/// A one-line account of what a decision does, for logs, journal rows and
/// Events: "cordon; taint vigil.dev/gpu-fault=true:NoSchedule; GPUHealthy=False".
std::string describe(const quarantine_decision& decision);

} // namespace vigil::control
