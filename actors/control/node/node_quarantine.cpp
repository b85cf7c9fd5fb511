// The node actor's quarantine (seed 000 §2, ARCHITECTURE.md §4 "Quarantine"):
// the level-based reconcile that converges cordon, taints, conditions and
// annotation with quarantine rules, asking the breaker before any new cordon.
// Journal first, then the Node's spec, then its status, then an Event.
#include <algorithm>
#include <functional>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/control/node/node_actor_internal.hpp"
#include "actors/control/remediation/remediation_plan.hpp"
#include "actors/gateway/kube_gateway_messages.hpp"
#include "actors/journal/journal_messages.hpp"
#include "actors/protocol/control_messages.hpp"
#include "runtime/backoff.hpp"
#include "runtime/logging.hpp"

namespace vigil::node_detail {

namespace {

using control::quarantine_decision;

// A decision adds a cordon or a taint that is not there yet: the breaker
// must agree first (seed 003 "Blast Radius Control"). Releasing never asks.
// What besides the active records bears on the quarantine.
control::quarantine_context context_of(const node_state& st) {
  control::quarantine_context context;
  context.remediation_holds = st.remediation->holds_quarantine();
  context.agent_silent_since = st.agent_silent_since;
  context.fabric_ports = st.fabric.ports();
  return context;
}

std::string event_reason(const quarantine_decision& d) {
  if (d.held_by_breaker)
    return "QuarantineHeld";
  if (starts_quarantine(d))
    return "Quarantined";
  const bool hard_taint_removed =
    std::any_of(d.remove_taints.begin(), d.remove_taints.end(), [](const auto& t) {
      return t.effect != control::taint_effect::prefer_no_schedule;
    });
  if (d.uncordon || (hard_taint_removed && !d.quarantined))
    return "QuarantineReleased";
  return "QuarantineUpdated";
}

// The journal row of a decision, written before anything is sent. Keyed by the
// Node's resourceVersion and the decision's content: a decision repeated on
// the same observation (a retry, a restart, dry-run) is stored once.
journal_record decision_row(const node_state& st, const quarantine_decision& d,
                            const std::string& summary) {
  nlohmann::json body = {{"decision", summary},
                         {"quarantined", d.quarantined},
                         {"cordon", d.cordon},
                         // admitted by the breaker, counted in its window
                         {"startsQuarantine", starts_quarantine(d)},
                         {"uncordon", d.uncordon},
                         {"heldByBreaker", d.held_by_breaker},
                         {"optedOut", d.opted_out},
                         {"activeEvents", st.active.size()},
                         {"annotation", d.annotation.value_or("")},
                         {"resourceVersion", st.node->resource_version},
                         {"dryRun", st.settings->dry_run}};
  journal_record row;
  row.recorded_at = st.time->wall_now();
  row.node = st.node_name;
  row.kind = quarantine_row;
  row.body = body.dump();
  row.idempotency_key = st.node_name + "/quarantine/" + st.node->resource_version + "/"
                        + std::to_string(std::hash<std::string>{}(row.body));
  return row;
}

// The current reconcile is over; run again if something arrived meanwhile,
// else see whether the converged node needs a drain.
void finish(node_actor* self) {
  auto& st = self->state;
  st.busy = false;
  if (st.again) {
    st.again = false;
    return reconcile(self);
  }
  consider_drain(self);
}

// A request failed: 409 means the Node moved on (re-read it), 404 that it is
// gone (wait for the watch to bring it back), anything else is retried.
void on_request_failure(node_actor* self, const kube::kube_error& err, const char* what) {
  auto& st = self->state;
  if (err.conflict()) {
    ++st.stats.conflicts;
    st.node.reset();
    st.busy = false;
    reconcile(self);
  } else if (err.not_found()) {
    logger()->warn("node {}: {} found no Node; waiting for it to appear", st.node_name,
                   what);
    st.node.reset();
    st.busy = false;
    st.again = false;
  } else {
    retry_later(self, std::string(what) + " failed: " + err.to_string());
  }
}

void fetch_node(node_actor* self) {
  auto& st = self->state;
  st.busy = true;
  self->request(st.gateway, caf::infinite, control::get_node_request(st.node_name))
    .then([=](const kube::kube_result& result) {
      if (!result.ok())
        return on_request_failure(self, result.error(), "GET");
      if (!take_node_body(self, result.response().body))
        return retry_later(self, "GET returned an unreadable Node");
      self->state.busy = false;
      reconcile(self);
    });
}

void post_event(node_actor* self, const quarantine_decision& d,
                const std::string& summary) {
  post_node_event(self, event_reason(d), summary, d.quarantined);
}

// Every request of the decision succeeded: say so, post its Event, go on.
void applied(node_actor* self, const quarantine_decision& d, const std::string& summary) {
  auto& st = self->state;
  logger()->info("node {}: applied: {}", st.node_name, summary);
  post_event(self, d, summary);
  st.backoff = {};
  finish(self);
}

void patch_status(node_actor* self, quarantine_decision d, std::string summary) {
  auto& st = self->state;
  auto request = control::status_patch_request(
    st.node_name, control::node_status_patch(d, st.time->wall_now()));
  if (!request)
    return applied(self, d, summary);
  self->request(st.gateway, caf::infinite, std::move(*request))
    .then([=](const kube::kube_result& result) {
      if (!result.ok())
        return on_request_failure(self, result.error(), "PATCH status");
      ++self->state.stats.patches;
      take_node_body(self, result.response().body);
      applied(self, d, summary);
    });
}

// Sends the decision: spec and annotations first (with the resourceVersion
// precondition), then the conditions, then a Kubernetes Event.
void send_decision(node_actor* self, quarantine_decision d, std::string summary) {
  auto& st = self->state;
  auto request =
    control::spec_patch_request(st.node_name, control::node_spec_patch(d, *st.node));
  if (!request)
    return patch_status(self, std::move(d), std::move(summary));
  self->request(st.gateway, caf::infinite, std::move(*request))
    .then([=](const kube::kube_result& result) {
      auto& st = self->state;
      if (!result.ok())
        return on_request_failure(self, result.error(), "PATCH");
      ++st.stats.patches;
      st.stats.cordons += d.cordon ? 1 : 0;
      st.stats.uncordons += d.uncordon ? 1 : 0;
      st.settings->counters->cordons += d.cordon ? 1 : 0;
      st.settings->counters->uncordons += d.uncordon ? 1 : 0;
      take_node_body(self, result.response().body);
      patch_status(self, d, summary);
    });
}

// Journal first, then act (ARCHITECTURE.md §2 "journal first").
void apply_decision(node_actor* self, quarantine_decision d) {
  auto& st = self->state;
  ++st.stats.reconciles;
  st.stats.held += d.held_by_breaker ? 1 : 0;
  st.settings->counters->quarantines_held += d.held_by_breaker ? 1 : 0;
  auto summary = control::describe(d);
  self
    ->request(st.journal, caf::infinite, append_atom::value, decision_row(st, d, summary))
    .then(
      [=](const append_outcome&) {
        auto& st = self->state;
        logger()->info("node {}: {}{}", st.node_name, summary,
                       st.settings->dry_run ? " (dry run: not applied)" : "");
        if (st.settings->dry_run)
          return finish(self);
        send_decision(self, d, summary);
      },
      [=](const caf::error& err) {
        retry_later(self,
                    "the decision could not be journaled (" + caf::to_string(err) + ")");
      });
}

} // namespace

void retry_later(node_actor* self, const std::string& what) {
  auto& st = self->state;
  ++st.stats.failures;
  st.busy = false;
  const auto delay =
    take_backoff(st.backoff, st.settings->retry_initial, st.settings->retry_max);
  logger()->warn("node {}: {}; retrying in {} ms", st.node_name, what,
                 std::chrono::duration_cast<std::chrono::milliseconds>(delay).count());
  if (!st.retry_armed) {
    st.retry_armed = true;
    self->delayed_send(self, delay, reconcile_atom::value);
  }
}

namespace {

bool take_observed(node_actor* self, expected<control::observed_node> observed) {
  auto& st = self->state;
  if (!observed) {
    logger()->error("node {}: unreadable Node from the API server: {}", st.node_name,
                    observed.error().to_string());
    return false;
  }
  st.node = std::move(*observed);
  return true;
}

// The labels a node actor reads: the opt-out, the breaker's pool and what
// tells about the node's GPUs (gpu_facts_from_labels). A GPU node carries
// 50-100 labels, GPU feature discovery's among them; keeping them all cost
// about 7 KiB a node (BENCHMARKS.md, "Nodes as a cluster has them").
control::label_filter labels_read(const node_settings& settings) {
  return [&settings](std::string_view key) {
    const auto& facts = control::gpu_fact_label::all;
    return key == settings.quarantine.opt_out_label
           || key == settings.remediation.pool_label
           || std::find(facts.begin(), facts.end(), key) != facts.end();
  };
}

} // namespace

bool take_node(node_actor* self, const nlohmann::json& node) {
  const auto& settings = *self->state.settings;
  return take_observed(self,
                       control::observe_node(node, settings.quarantine,
                                             settings.gpu_nodes, labels_read(settings)));
}

bool take_node_body(node_actor* self, const std::string& body) {
  const auto& settings = *self->state.settings;
  return take_observed(self, control::observe_node_body(body, settings.quarantine,
                                                        settings.gpu_nodes,
                                                        labels_read(settings)));
}

void reconcile(node_actor* self) {
  auto& st = self->state;
  if (st.awaiting_history)
    return; // the replay ends in a reconcile
  if (st.busy) {
    st.again = true;
    return;
  }
  if (!st.node)
    return fetch_node(self);
  auto decision = control::decide_quarantine(st.node->observation, st.active,
                                             st.settings->quarantine, context_of(st));
  if (decision.no_change(st.node->observation))
    return consider_drain(self);
  st.busy = true;
  if (!starts_quarantine(decision))
    return apply_decision(self, std::move(decision));
  self->request(st.breaker, caf::infinite, admit_atom::value, st.node_name)
    .then(
      [=](const std::string& refusal) {
        auto& st = self->state;
        if (refusal.empty())
          return apply_decision(self, decision);
        auto context = context_of(st);
        context.new_quarantine_allowed = false;
        auto held = control::decide_quarantine(st.node->observation, st.active,
                                               st.settings->quarantine, context);
        if (held.no_change(st.node->observation))
          return finish(self);
        logger()->warn("node {}: new quarantine refused by the breaker ({})",
                       st.node_name, refusal);
        apply_decision(self, std::move(held));
      },
      [=](const caf::error& err) {
        retry_later(self, "the breaker did not answer (" + caf::to_string(err) + ")");
      });
}

} // namespace vigil::node_detail
