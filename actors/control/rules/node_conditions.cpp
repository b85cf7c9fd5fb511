#include "actors/control/rules/node_conditions.hpp"

#include <algorithm>

namespace vigil::control {

condition_verdict judge_node_conditions(const std::vector<kube_condition>& conditions,
                                        wall_time now,
                                        const node_condition_settings& settings) {
  condition_verdict out;
  for (const auto& c : conditions) {
    if (c.type == "Ready" && settings.not_ready_after.count() > 0) {
      condition_finding f{not_ready_check, false, "", "", c.since};
      if (c.status != "True") {
        const auto due = c.since.value_or(now) + settings.not_ready_after;
        if (now >= due) {
          f.unhealthy = true;
          f.code = c.status.empty() ? "Unknown" : c.status;
          f.message = "Ready is " + f.code
                      + (c.reason.empty() ? "" : " (" + c.reason + ")") + " for "
                      + std::to_string(settings.not_ready_after.count())
                      + " s or more: the node stopped talking"
                      + (c.message.empty() ? "" : ": " + c.message);
        } else {
          out.recheck_at = due;
          continue; // not yet: neither raised nor cleared
        }
      } else {
        f.message = "Ready";
      }
      out.findings.push_back(std::move(f));
      continue;
    }
    if (std::find(settings.problem_types.begin(), settings.problem_types.end(), c.type)
        == settings.problem_types.end())
      continue;
    condition_finding f{c.type, c.status == "True", c.reason, c.message, c.since};
    if (f.unhealthy && f.code.empty())
      f.code = c.type;
    out.findings.push_back(std::move(f));
  }
  return out;
}

health_event condition_event(const std::string& node, const condition_finding& finding,
                             const node_condition_settings& settings, wall_time now) {
  health_event e;
  e.agent = node_conditions_agent;
  e.component_class = "Node";
  e.check_name = finding.check;
  e.node_name = node;
  e.is_healthy = !finding.unhealthy;
  e.message = finding.message;
  e.generated = now;
  if (finding.unhealthy) {
    e.is_fatal = true;
    e.error_codes = {finding.code};
    e.action = finding.check == not_ready_check ? settings.not_ready_action
                                                : settings.problem_action;
  }
  e.id = "node-condition/" + node + "/" + finding.check + "/"
         + (finding.since ? format_rfc3339(*finding.since) : std::string("-")) + "/"
         + (finding.unhealthy ? "unhealthy" : "healthy");
  return e;
}

} // namespace vigil::control
