// `vigil demo` (issue #9): the real control plane, agents' parsers and
// janitor healing a simulated cluster. Without --serve, CAF's test
// coordinator runs every actor on one thread on a virtual clock, so the
// scripted scenario's hours pass in seconds and each run is the same.
#pragma once

#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/cli.hpp"
#include "runtime/demo/scenario.hpp"

namespace vigil::demo {

std::vector<option_spec> demo_option_specs();

int run_demo(command_context& ctx);

/// What one step's checks found.
struct step_result {
  std::string name;
  bool passed = true;
  std::string detail; ///< what happened, then each expectation that failed
};

/// A maintenance CR as the summary shows it.
struct remediation_view {
  std::string kind, name, node, gpu_uuid, outcome;
};

/// The cluster at one moment, as the step checks and the summary read it.
struct cluster_view {
  std::vector<remediation_view> remediations; ///< every CR, by kind then name
  nlohmann::json nodes =
    nlohmann::json::array(); ///< [{name, cordoned, cordonedByVigil, conditions}]
};

/// What changed during one step.
struct step_observation {
  std::vector<std::string> evicted;               ///< "namespace/pod"
  std::vector<remediation_view> new_remediations; ///< CRs created in the step
  cluster_view after;
  int fabric_incidents = 0;
  std::set<std::string> cordoned_during; ///< nodes vigil cordoned in the step
};

/// Compares one step's observation with its expectations (pure).
step_result check_step(const scenario_step& step, const step_observation& seen);

} // namespace vigil::demo
