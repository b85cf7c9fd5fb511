// A scenario played on a virtual clock: the simulated cluster, the real
// control plane and janitor, and the simulator, all on CAF's test
// coordinator, so a scenario's hours pass in seconds and every run is the
// same. `vigil demo` and its tests run scenarios through here.
#pragma once

#include <iosfwd>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "messages/expected.hpp"
#include "runtime/config.hpp"
#include "runtime/sim/scenario.hpp"

namespace vigil::demo {

struct demo_options {
  bool json_output = false; ///< no timeline on `out`
  std::string journal_url;  ///< "" is a SQLite file in a new temporary directory
};

/// Plays every step of `plan` under `base`, printing the timeline to `out`
/// unless json_output. Returns the summary JSON (steps, remediations,
/// evictions, nodes, events, passed).
expected<nlohmann::json> run_virtual(const vigil_config& base, const scenario& plan,
                                     const demo_options& options, std::ostream& out);

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
