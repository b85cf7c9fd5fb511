// What a GPU node's own conditions say, as HealthEvents vigil raises itself:
// a node that stops talking (Ready False or Unknown for not_ready_after:
// medik8s NodeHealthCheck's default rule, seed 003) is recommended a reboot,
// and node-problem-detector's problem conditions (True = a problem) become
// events of their type. Level-based: the conditions now, against what the
// node actor already holds, give the events to raise or clear.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "messages/health_event.hpp"
#include "messages/wall_time.hpp"

namespace vigil::control {

/// The agent name of the events vigil raises from Node conditions.
inline constexpr const char* node_conditions_agent = "vigil-control";
inline constexpr const char* not_ready_check = "NodeNotReady";

/// Config `control.not_ready_after` and `control.node_problem_conditions`.
struct node_condition_settings {
  /// Ready False or Unknown this long → NodeNotReady; zero: never.
  std::chrono::seconds not_ready_after{300};
  recommended_action not_ready_action = recommended_action::restart_bm;
  /// node-problem-detector's permanent conditions (its default configs).
  std::vector<std::string> problem_types = {
    "KernelDeadlock",         "ReadonlyFilesystem",    "XfsShutdown",
    "FrequentKubeletRestart", "FrequentDockerRestart", "FrequentContainerdRestart",
    "CorruptDockerOverlay2",  "KubeletUnhealthy"};
  /// The recommendedAction of a problem condition: it quarantines (the event
  /// is fatal) and leaves the repair to a person unless configured.
  recommended_action problem_action = recommended_action::none;
};

/// A Node condition as the API server has it.
struct kube_condition {
  std::string type;
  std::string status; ///< "True", "False", "Unknown"
  std::string reason;
  std::string message;
  std::optional<wall_time> since; ///< lastTransitionTime
};

/// One check's state from the conditions.
struct condition_finding {
  std::string check; ///< NodeNotReady, or the problem condition's type
  bool unhealthy = false;
  std::string code; ///< Ready's status ("False", "Unknown") or the reason
  std::string message;
  std::optional<wall_time> since;
};

struct condition_verdict {
  std::vector<condition_finding> findings; ///< one per check the node shows
  /// When NodeNotReady will be due if nothing changes (arm a timer for it).
  std::optional<wall_time> recheck_at;
};

/// Judges the conditions at `now`. A Ready condition that is not "True" since
/// `since` is unhealthy once `since + not_ready_after` has passed (no since:
/// from now); before that it is pending (recheck_at). A problem type is
/// unhealthy while "True". Conditions of other types are not findings.
condition_verdict judge_node_conditions(const std::vector<kube_condition>& conditions,
                                        wall_time now,
                                        const node_condition_settings& settings);

/// The event for a finding, raised by vigil itself: componentClass "Node",
/// no entities (the whole node), fatal when unhealthy (NodeNotReady with
/// not_ready_action, a problem with problem_action). Its id is fixed by the
/// node, the check, the transition time and the state, so raising it again
/// (a restart, a repeated watch event) is a duplicate in the journal.
health_event condition_event(const std::string& node, const condition_finding& finding,
                             const node_condition_settings& settings, wall_time now);

} // namespace vigil::control
