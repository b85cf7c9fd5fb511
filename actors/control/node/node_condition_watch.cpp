// The node actor's own HealthEvents from its Node's conditions (seed 003:
// nodes that stop talking; node-problem-detector's conditions). The rule is
// control::judge_node_conditions; here they are journaled and routed back to
// this actor, so a restart rebuilds them from the journal like any event.
#include <caf/all.hpp>

#include "actors/control/ingest/ingest_actor.hpp"
#include "actors/control/node/node_actor_internal.hpp"
#include "actors/journal/journal_messages.hpp"
#include "actors/protocol/control_messages.hpp"
#include "runtime/logging.hpp"

namespace vigil::node_detail {

namespace {

bool holds(const node_state& st, const std::string& check) {
  for (const auto& r : st.active.records())
    if (r.agent == control::node_conditions_agent && r.check_name == check)
      return true;
  return false;
}

void raise(node_actor* self, health_event event) {
  auto& st = self->state;
  if (!st.conditions_raised.insert(event.id).second)
    return;
  logger()->info("node {}: {} {} ({})", st.node_name, event.check_name,
                 event.is_healthy ? "cleared" : "raised", event.message);
  self
    ->request(st.journal, caf::infinite, append_atom::value,
              event_row(event, st.time->wall_now()))
    .then(
      [=](const append_outcome&) {
        self->state.conditions_raised.erase(event.id);
        self->send(self, route_atom::value, event, std::int64_t{0});
      },
      [=](const caf::error& err) {
        self->state.conditions_raised.erase(event.id);
        logger()->error("node {}: {} not journaled ({}); judged again at the next "
                        "Node update",
                        self->state.node_name, event.check_name, caf::to_string(err));
      });
}

} // namespace

void check_conditions(node_actor* self) {
  auto& st = self->state;
  if (!st.node || !st.node->gpu_node)
    return;
  const auto now = st.time->wall_now();
  const auto& settings = st.settings->conditions;
  auto verdict = control::judge_node_conditions(st.node->conditions, now, settings);
  // A node rebooting or being replaced by vigil's own CR is NotReady on
  // purpose: that CR's verification judges it, not this rule.
  const bool remediating = st.remediation && st.remediation->holds_quarantine();
  for (const auto& finding : verdict.findings) {
    if (finding.unhealthy && remediating && finding.check == control::not_ready_check)
      continue;
    if (finding.unhealthy != holds(st, finding.check))
      raise(self, control::condition_event(st.node_name, finding, settings, now));
  }
  if (verdict.recheck_at && verdict.recheck_at != st.condition_check_at) {
    st.condition_check_at = verdict.recheck_at;
    self->delayed_send(self, *verdict.recheck_at - now, condition_check_atom::value);
  }
}

} // namespace vigil::node_detail
