// What `vigil replay` computes from a journal, as plain functions over its
// rows: the fleet at a moment (--at), and the decisions another policy
// would take on the same events (--what-if).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/control/remediation/remediation_plan.hpp"
#include "actors/control/rules/correlation_rules.hpp"
#include "actors/control/rules/quarantine_rules.hpp"
#include "runtime/journal/fleet_view.hpp"
#include "runtime/journal/journal_store.hpp"

namespace vigil {

/// The fleet as of the last of `rows` (all recorded at or before the moment):
/// {"at", "nodes": [{"name", "activeEvents": [...], "quarantine": <latest
/// quarantine row body>, "drain": <latest drain row>, "remediation": <latest
/// remediation row>, "timeline": ["#seq time kind summary", ...]}],
/// "fabricIncidents": [...]}. Nodes without rows are left out.
nlohmann::json fleet_at(const std::vector<journal_record>& rows, wall_time at);

/// The parts of a configuration that decide what happens to an event.
struct decision_policy {
  control::quarantine_policy quarantine;
  control::correlation_config correlation;
  control::remediation_options remediation;
};

/// What a policy decides for one journaled event, given the events before it.
struct event_decision {
  std::int64_t seq = 0;
  std::string node;
  std::string event; ///< summarise_row of the event
  /// "quarantine (rule fatal), drain partial:GPU-a, GPUReset",
  /// "not acted on: …", "healthy: releases the node", "repeat: counted once".
  std::string decision;
};

/// Replays the event rows in journal order through the pure rules: the fabric
/// rule (with its hold: a link down whose node joins an incident within
/// fabric_hold is the incident's), each node's correlation rules, quarantine
/// rules, drain planning and remediation planning. The journal does not hold
/// node labels: every GPU is taken to be resettable (an H100).
std::vector<event_decision> decide_events(const std::vector<journal_record>& rows,
                                          const decision_policy& policy);

struct decision_difference {
  std::int64_t seq = 0;
  std::string node, event, now, what_if;
};

/// The events whose decisions differ between the two policies.
std::vector<decision_difference> compare_policies(const std::vector<journal_record>& rows,
                                                  const decision_policy& now,
                                                  const decision_policy& what_if);

/// GPU time a namespace's jobs lost to faults (job attribution), from the
/// gpu_holders rows: each pod holding a failing GPU loses every GPU it held on
/// that node from the fault until the node's quarantine was released (a
/// quarantine row with "uncordon": true), or until `end` when it was not. A
/// pod counts once per quarantine however many faults hit it.
struct namespace_loss {
  std::string ns;
  double gpu_hours = 0;
  std::size_t pods = 0;   ///< distinct pods hit
  std::size_t faults = 0; ///< gpu_holders rows naming the namespace
  std::size_t open = 0;   ///< pods whose node was still quarantined at `end`
};

/// Sorted by GPU-hours, most first. Rows must be in journal order.
std::vector<namespace_loss> losses_by_namespace(const std::vector<journal_record>& rows,
                                                wall_time end);

} // namespace vigil
