// Scenarios of `vigil demo`: what happens to the simulated cluster, step by
// step, and what vigil is expected to have done after each step. YAML,
// documented in runtime/sim/SCENARIOS.md; the built-in scenario is one such
// file compiled in.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "messages/expected.hpp"

namespace vigil::demo {

/// One thing that happens to the cluster, `at` after its step starts.
struct scenario_action {
  enum class kind { xid, nic_down, nic_up, nic_flap, fail_reset, fail_validation };
  kind what = kind::xid;
  std::chrono::seconds at{0};
  std::vector<int> nodes;         ///< 1-based node numbers
  int gpu = 0;                    ///< xid, fail_reset
  std::vector<int> codes;         ///< xid: the XIDs, logged together
  int nic = 0;                    ///< nic_*: mlx5_<nic>, port 1
  int times = 1;                  ///< nic_flap: down/up cycles
  std::chrono::seconds every{20}; ///< nic_flap: between transitions
};

struct expected_remediation {
  std::string kind; ///< GPUReset, RebootNode, TerminateNode
  int node = 0;
  std::optional<int> gpu;
  std::string outcome; ///< the CR's status.phase at the step's end; "" = any
};

/// Checked at the end of the step. Unset parts are not checked.
struct step_expectations {
  /// Exactly these workload pods ("namespace/name") were evicted in the step.
  std::optional<std::vector<std::string>> evicted;
  /// Exactly these CRs were created in the step.
  std::optional<std::vector<expected_remediation>> remediations;
  std::map<int, bool> cordoned;        ///< node → cordoned at the step's end
  std::optional<int> quarantined;      ///< nodes cordoned by vigil at the step's end
  std::optional<int> fabric_incidents; ///< journaled in the step
  /// Exactly these nodes were cordoned by vigil at some moment of the step
  /// (from the journal's quarantine rows: a cordon undone before the step's
  /// end still counts).
  std::optional<std::vector<int>> cordoned_during;
};

struct scenario_step {
  std::string name;
  std::vector<scenario_action> actions;
  std::chrono::seconds run_for{std::chrono::minutes{10}}; ///< virtual time given to it
  step_expectations expect;
};

/// How long a simulated Job runs: drawn uniformly in [low, high].
struct duration_range {
  std::chrono::seconds low, high;
};

struct scenario {
  std::string name;
  int nodes = 16;
  std::uint64_t seed = 1;
  duration_range reset_job{std::chrono::minutes{1}, std::chrono::minutes{5}};
  duration_range reboot_job{std::chrono::minutes{10}, std::chrono::minutes{30}};
  std::vector<scenario_step> steps;
};

/// What the command line sets over a scenario's own `nodes:` and `seed:`
/// (`vigil demo --nodes N --seed S`).
struct scenario_overrides {
  std::optional<int> nodes;
  std::optional<std::uint64_t> seed;
};

/// Parses a scenario; failures name the key ("steps[2].do[0].xid.gpu: …").
/// Nodes and GPUs are checked against the cluster's size, the override's
/// when there is one.
expected<scenario> parse_scenario(const std::string& yaml_text,
                                  const scenario_overrides& overrides = {});

/// The built-in scenario's YAML text.
const std::string& builtin_scenario_yaml();

/// "90s", "20m", "1h", "1h30m" → seconds; nullopt when malformed.
std::optional<std::chrono::seconds> parse_duration(const std::string& text);

} // namespace vigil::demo
