#include "actors/control/node/node_actor.hpp"

#include <algorithm>
#include <functional>
#include <optional>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/control/gpu/gpu_actor.hpp"
#include "actors/control/nic_port/nic_port_actor.hpp"
#include "actors/control/node/correlation_messages.hpp"
#include "actors/control/node/node_remediation.hpp"
#include "actors/gateway/kube_gateway_messages.hpp"
#include "actors/journal/journal_messages.hpp"
#include "messages/control_messages.hpp"
#include "runtime/backoff.hpp"
#include "runtime/logging.hpp"

namespace vigil {

namespace {

using control::quarantine_decision;

std::shared_ptr<spdlog::logger> logger() {
  return component_logger("node");
}

// A decision adds a cordon or a taint that is not there yet: the breaker
// must agree first (issue #7 item 4). Releasing never asks.
bool starts_quarantine(const quarantine_decision& d) {
  return d.cordon || !d.add_taints.empty();
}

std::string event_reason(const quarantine_decision& d) {
  if (d.held_by_breaker)
    return "QuarantineHeld";
  if (d.cordon || !d.add_taints.empty())
    return "Quarantined";
  if (d.uncordon || (!d.remove_taints.empty() && !d.quarantined))
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

void reconcile(node_actor* self);
void consider_drain(node_actor* self);

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

// A failed request: try again after a doubling delay, never in a tight loop.
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

// Reads a Node from a response body into the observation.
bool take_node(node_actor* self, const std::string& json) {
  auto& st = self->state;
  auto observed =
    control::observe_node(json, st.settings->quarantine, st.settings->gpu_nodes);
  if (!observed) {
    logger()->error("node {}: unreadable Node from the API server: {}", st.node_name,
                    observed.error().to_string());
    return false;
  }
  st.node = std::move(*observed);
  return true;
}

void fetch_node(node_actor* self) {
  auto& st = self->state;
  st.busy = true;
  self->request(st.gateway, caf::infinite, control::get_node_request(st.node_name))
    .then([=](const kube::kube_result& result) {
      if (!result.ok())
        return on_request_failure(self, result.error(), "GET");
      if (!take_node(self, result.response().body))
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
      take_node(self, result.response().body);
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
      take_node(self, result.response().body);
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

void reconcile(node_actor* self) {
  auto& st = self->state;
  if (st.busy) {
    st.again = true;
    return;
  }
  if (!st.node)
    return fetch_node(self);
  const bool holds = st.remediation->holds_quarantine();
  auto decision =
    control::decide_quarantine(st.node->observation, st.active, st.settings->quarantine,
                               true, holds, st.agent_silent_since);
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
        auto held = control::decide_quarantine(
          st.node->observation, st.active, st.settings->quarantine, false,
          st.remediation->holds_quarantine(), st.agent_silent_since);
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

// The drain the active events want once vigil's quarantine is in place: the
// node is cordoned (by anyone; in dry run, would be) and not opted out.
std::optional<control::drain_request> wanted_drain(const node_state& st) {
  if (!st.node || st.active.empty())
    return std::nullopt;
  const auto& observed = st.node->observation;
  if (!observed.unschedulable && !st.settings->dry_run)
    return std::nullopt;
  auto opt_out = observed.labels.find(st.settings->quarantine.opt_out_label);
  if (opt_out != observed.labels.end() && opt_out->second == "true")
    return std::nullopt;
  return control::drain_wanted(st.active.records(), st.remediation->needs_full_drain());
}

void post_drain_event(node_actor* self, const std::string& reason,
                      const std::string& message) {
  auto& st = self->state;
  if (!st.settings->dry_run && !st.settings->drain->dry_run)
    post_node_event(self, reason, message, false);
}

void start_drain(node_actor* self, control::drain_request request) {
  auto& st = self->state;
  auto key = control::drain_key(request);
  st.drain_permit_pending = true;
  // issue #7 item 4: no new drain starts while the breaker is tripped.
  self->request(st.breaker, caf::infinite, permit_atom::value, st.node_name)
    .then(
      [=](const std::string& refusal) {
        auto& st = self->state;
        st.drain_permit_pending = false;
        if (!refusal.empty()) {
          ++st.stats.drains_held;
          ++st.settings->counters->drains_held;
          logger()->warn("node {}: drain {} held: {}", st.node_name, key, refusal);
          if (st.drain_hold_posted != key) {
            st.drain_hold_posted = key;
            post_drain_event(self, "DrainHeldByBreaker",
                             "drain " + key + " held: " + refusal);
          }
          if (!st.retry_armed) {
            st.retry_armed = true;
            self->delayed_send(self, st.settings->retry_max, reconcile_atom::value);
          }
          return;
        }
        if (st.drain || !wanted_drain(st)) // things moved on while asking
          return consider_drain(self);
        ++st.stats.drains_started;
        ++st.settings->counters->drains_started;
        st.settings->counters->drains_started_partial += key == "full" ? 0 : 1;
        st.drain_key = key;
        st.drain_hold_posted.clear();
        st.drain_cancelling = false;
        auto settings = st.settings->drain;
        if (st.settings->dry_run && !settings->dry_run) { // global dry run
          auto dry = std::make_shared<drain_settings>(*settings);
          dry->dry_run = true;
          settings = std::move(dry);
        }
        st.drain = self->spawn<caf::linked>(vigil::drain, st.node_name, request,
                                            std::move(settings), st.gateway, st.journal,
                                            caf::actor_cast<caf::actor>(self), st.time);
        post_drain_event(self, "DrainStarted", "drain " + key + " started");
      },
      [=](const caf::error& err) {
        self->state.drain_permit_pending = false;
        retry_later(self, "the breaker did not answer (" + caf::to_string(err) + ")");
      });
}

// seed 000 §3.1: what this quarantine has drained; a full drain covers all.
void note_drained(node_state& st, const std::string& key) {
  st.drained_key = key;
  if (st.drain_history != control::drain_history::full_done)
    st.drain_history = key == "full" ? control::drain_history::full_done
                                     : control::drain_history::partial_done;
}

// A released quarantine starts the next one with nothing drained.
void forget_drains(node_state& st) {
  st.drain_history = control::drain_history::none;
  st.drained_key.clear();
}

// Level-based like the quarantine: compares the drain the active events want
// with the running one. seed 000 §3.1: after a completed full drain nothing
// more is drained in this quarantine; a completed drain is not repeated.
// seed 000 §3.2: a release cancels the running drain.
void converge_drain(node_actor* self) {
  auto& st = self->state;
  if (st.active.empty())
    forget_drains(st);
  auto wanted = wanted_drain(st);
  if (st.drain) {
    if (st.drain_cancelling)
      return;
    std::string why;
    if (!wanted)
      why = "quarantine released";
    else if (auto key = control::drain_key(*wanted); key != st.drain_key)
      why = "superseded by drain " + key;
    if (!why.empty()) {
      st.drain_cancelling = true;
      self->send(st.drain, cancel_atom::value, why);
    }
    return;
  }
  if (!wanted || st.drain_history == control::drain_history::full_done
      || control::drain_key(*wanted) == st.drained_key)
    return;
  wanted->history = st.drain_history;
  start_drain(self, std::move(*wanted));
}

// After the quarantine converged: the drain, then (once drained) the
// remediations (seed 000 §3, §4).
void consider_drain(node_actor* self) {
  auto& st = self->state;
  if (st.busy || st.drain_permit_pending)
    return;
  converge_drain(self);
  node_remediation_steps::consider(self);
}

void on_drained(node_actor* self, const std::string& key, const std::string& outcome,
                std::uint64_t evictions) {
  auto& st = self->state;
  st.drain = nullptr;
  st.drain_cancelling = false;
  st.stats.evictions += evictions;
  auto& counters = *st.settings->counters;
  counters.evictions += evictions;
  if (outcome == "cancelled") {
    ++st.stats.drains_cancelled;
    ++counters.drains_cancelled;
    post_drain_event(self, "DrainCancelled", "drain " + key + " cancelled");
  } else {
    ++(outcome == "succeeded" ? st.stats.drains_succeeded : st.stats.drains_skipped);
    ++(outcome == "succeeded" ? counters.drains_succeeded : counters.drains_skipped);
    note_drained(st, key);
    if (outcome == "succeeded")
      post_drain_event(self, "Drained",
                       "drain " + key + " completed (" + std::to_string(evictions)
                         + " pods evicted)");
    else
      post_drain_event(self, "DrainSkipped",
                       "drain " + key + ": nothing evicted (" + outcome + ")");
  }
  consider_drain(self);
}

void journal_firing(node_actor* self, const std::string& rule, const health_event& event,
                    const std::string& message) {
  auto& st = self->state;
  ++st.stats.rule_firings;
  auto& counters = *st.settings->counters;
  ++counters.rule_firings;
  if (rule == "repeated-xid")
    ++counters.rule_firings_repeated_xid;
  else if (rule == "nic-flap")
    ++counters.rule_firings_nic_flap;
  else if (rule == "nic-drop")
    ++counters.rule_firings_nic_drop;
  logger()->warn("node {}: rule {} fired on event {}: {}", st.node_name, rule, event.id,
                 message);
  journal_record row;
  row.recorded_at = st.time->wall_now();
  row.node = st.node_name;
  row.kind = correlation_row;
  row.body = nlohmann::json{
    {"rule", rule},
    {"eventId", event.id},
    {"recommendedAction", to_string(event.action)},
    {"message",
     message}}.dump();
  row.idempotency_key = st.node_name + "/correlation/" + event.id + "/" + rule;
  // Its Event once it is journaled (journal first), and once only.
  auto event_text = rule + ": " + message + " → " + std::string(to_string(event.action));
  self->request(st.journal, caf::infinite, append_atom::value, std::move(row))
    .then(
      [=](const append_outcome& stored) {
        if (!stored.duplicate && !self->state.settings->dry_run)
          post_node_event(self, "CorrelationRuleFired", event_text, true);
      },
      [=](const caf::error& err) {
        logger()->warn("node {}: rule firing not journaled: {}", self->state.node_name,
                       caf::to_string(err));
      });
}

// The gpu or nic_port actor an event concerns, spawned on first use.
caf::actor entity_actor(node_actor* self, const control::correlation_subject& subject) {
  auto& st = self->state;
  const bool is_gpu = subject.what == control::correlation_subject::kind::gpu;
  auto& slot = (is_gpu ? st.gpus : st.ports)[subject.key];
  if (!slot)
    slot =
      is_gpu
        ? self->spawn<caf::linked>(vigil::gpu, subject.key, st.settings->correlation)
        : self->spawn<caf::linked>(vigil::nic_port, st.node_name, subject.key,
                                   st.settings->correlation, self->address(), st.time);
  return slot;
}

// What the rules' outcome makes of the event: the event (escalated or not)
// first, then what the rules derived. A firing is logged, counted and, when
// live (not replayed), journaled. The escalation follows from journaled
// events in event time, so a replay reaches it again; the correlation row
// records why it happened.
std::vector<health_event> correlated(node_actor* self, const health_event& event,
                                     control::correlation_outcome outcome, bool live) {
  std::vector<health_event> out{event};
  if (outcome.escalate && !event.is_healthy) {
    auto& escalated = out.front();
    escalated.action = *outcome.escalate;
    escalated.message = outcome.message + " (" + event.message + ")";
    if (live)
      journal_firing(self, outcome.rule, escalated, outcome.message);
  } else if (!outcome.rule.empty() && !outcome.derived.empty() && live) {
    journal_firing(self, outcome.rule, outcome.derived.front(), outcome.message);
  }
  for (auto& derived : outcome.derived)
    out.push_back(std::move(derived));
  return out;
}

using correlated_handler = std::function<void(std::vector<health_event>)>;

// issue #7 item 6: the correlation rules may escalate the event's action and
// derive events of their own. A repeat, or an event no GPU or port history
// concerns, comes back at once; otherwise nullopt, and `then` gets the events
// when the entity's actor has answered (awaited: nothing else runs first).
std::optional<std::vector<health_event>> correlate(node_actor* self,
                                                   const health_event& event, bool live,
                                                   correlated_handler then) {
  auto& st = self->state;
  const auto at = event.generated.value_or(st.time->wall_now());
  if (!st.dedup.admit(event, at))
    return std::vector<health_event>{event};
  const auto subject = control::subject_of(event);
  if (subject.what == control::correlation_subject::kind::none)
    return std::vector<health_event>{event};
  self
    ->request(entity_actor(self, subject), caf::infinite, correlate_atom::value, event,
              static_cast<std::int64_t>(at.time_since_epoch().count()))
    .await(
      [=](control::correlation_outcome& outcome) {
        then(correlated(self, event, std::move(outcome), live));
      },
      [=](const caf::error& err) {
        // Not reached while linked (its crash ends this actor too).
        logger()->warn("node {}: {} did not answer ({}); event {} taken as it is",
                       self->state.node_name, subject.key, caf::to_string(err), event.id);
        then({event});
      });
  return std::nullopt;
}

// Applies events to the active set; true when it changed.
bool apply_events(node_actor* self, const std::vector<health_event>& events) {
  auto& st = self->state;
  bool changed = false;
  for (const auto& e : events) {
    auto outcome = st.active.apply(e, st.settings->quarantine);
    if (!outcome.ignored.empty()) {
      ++st.stats.ignored;
      logger()->debug("node {}: event {} not acted on: {}", st.node_name, e.id,
                      outcome.ignored);
    }
    changed = changed || outcome.changed;
  }
  return changed;
}

// A fabric incident covers this node's NIC port-downs (issue #7 item 6): drop
// their records, and let the drop rule know the fabric explains them.
std::size_t drop_port_downs(node_actor* self) {
  auto& st = self->state;
  auto dropped = st.active.remove_if(control::explained_by_fabric);
  for (const auto& [port, actor] : st.ports)
    self->send(actor, fabric_atom::value);
  return dropped;
}

// A restart's replay (replay_atom): the journaled events in order, each
// through the correlation rules, with the drain and fabric marks among them.
struct replay_job {
  std::vector<health_event> events;
  std::vector<replay_mark> marks;
  std::size_t next_mark = 0;
};

void take_marks(node_actor* self, replay_job& job, std::size_t applied) {
  auto& st = self->state;
  for (; job.next_mark < job.marks.size()
         && job.marks[job.next_mark].after_events <= applied;
       ++job.next_mark) {
    const auto& mark = job.marks[job.next_mark];
    if (mark.what == replay_mark::kind::fabric)
      drop_port_downs(self);
    else if (!st.active.empty()) // a drain of the quarantine still active
      note_drained(st, mark.key);
  }
}

void replay_applied(node_actor* self, replay_job& job, std::size_t i,
                    const std::vector<health_event>& events) {
  apply_events(self, events);
  if (self->state.active.empty())
    forget_drains(self->state);
  take_marks(self, job, i + 1);
}

// Replays from event i on; an event awaiting its entity's actor resumes the
// replay from its answer (a fresh stack: no recursion over the events).
void replay_from(node_actor* self, std::shared_ptr<replay_job> job, std::size_t i) {
  for (; i < job->events.size(); ++i) {
    auto resume = [=](std::vector<health_event> events) {
      replay_applied(self, *job, i, events);
      replay_from(self, job, i + 1);
    };
    auto now = correlate(self, job->events[i], false, resume);
    if (!now)
      return;
    replay_applied(self, *job, i, *now);
  }
  reconcile(self);
}

std::string summary_of(const node_state& st) {
  nlohmann::json active = nlohmann::json::array();
  for (const auto& r : st.active.records())
    active.push_back({{"check", r.check_name},
                      {"entityType", r.subject.type},
                      {"entityValue", r.subject.value},
                      {"rule", r.rule}});
  nlohmann::json out = {{"node", st.node_name},
                        {"active", active},
                        {"observed", st.node.has_value()},
                        {"busy", st.busy},
                        {"events", st.stats.events},
                        {"reconciles", st.stats.reconciles},
                        {"patches", st.stats.patches},
                        {"conflicts", st.stats.conflicts},
                        {"failures", st.stats.failures},
                        {"cordons", st.stats.cordons},
                        {"uncordons", st.stats.uncordons},
                        {"held", st.stats.held},
                        {"draining", st.drain ? st.drain_key : std::string{}},
                        {"drainedKey", st.drained_key},
                        {"drainsStarted", st.stats.drains_started},
                        {"drainsSucceeded", st.stats.drains_succeeded},
                        {"drainsCancelled", st.stats.drains_cancelled},
                        {"drainsSkipped", st.stats.drains_skipped},
                        {"drainsHeld", st.stats.drains_held},
                        {"evictions", st.stats.evictions},
                        {"ruleFirings", st.stats.rule_firings},
                        {"gpuActors", st.gpus.size()},
                        {"nicPortActors", st.ports.size()},
                        {"remediation", node_remediation_steps::summary(st)}};
  if (st.node) {
    out["unschedulable"] = st.node->observation.unschedulable;
    out["cordonOwned"] = st.node->observation.cordon_owned;
  }
  return out.dump();
}

} // namespace

void post_node_event(node_actor* self, const std::string& reason,
                     const std::string& message, bool warning) {
  auto& st = self->state;
  auto request =
    control::node_event_request(st.node_name, st.settings->events_namespace, reason,
                                message, warning, st.time->wall_now(), ++st.decisions);
  self->request(st.gateway, caf::infinite, std::move(request))
    .then([=](const kube::kube_result& result) {
      if (!result.ok())
        logger()->warn("node {}: Event not posted: {}", self->state.node_name,
                       result.error().to_string());
    });
}

caf::behavior node(node_actor* self, std::string name,
                   std::shared_ptr<const node_settings> settings, caf::actor gateway,
                   caf::actor journal, caf::actor breaker,
                   std::shared_ptr<const clock> time) {
  auto& st = self->state;
  st.node_name = std::move(name);
  st.settings = std::move(settings);
  st.gateway = std::move(gateway);
  st.journal = std::move(journal);
  st.breaker = std::move(breaker);
  st.time = std::move(time);
  st.dedup = control::event_deduplicator(st.settings->correlation);
  st.remediation.emplace(st.node_name, node_remediation_steps::config_of(*st.settings));
  return {
    [=](route_atom, const health_event& event, std::int64_t) {
      ++self->state.stats.events;
      // issue #7 item 7: how far behind this node's mailbox is.
      auto& high = self->state.settings->counters->node_mailbox_high;
      const std::uint64_t depth = self->mailbox().size();
      for (auto seen = high.load();
           depth > seen && !high.compare_exchange_weak(seen, depth);) {
      }
      if (event.is_healthy)
        node_remediation_steps::on_healthy_event(self, event);
      auto apply = [=](const std::vector<health_event>& events) {
        if (apply_events(self, events))
          reconcile(self);
      };
      if (auto now = correlate(self, event, true, apply))
        apply(*now);
    },
    [=](replay_atom, std::vector<health_event>& events, std::vector<replay_mark>& marks) {
      auto job = std::make_shared<replay_job>();
      job->events = std::move(events);
      job->marks = std::move(marks);
      take_marks(self, *job, 0);
      replay_from(self, job, 0);
    },
    [=](nicdrop_atom, const health_event& dropped) {
      journal_firing(self, "nic-drop", dropped, dropped.message);
      if (apply_events(self, {dropped}))
        reconcile(self);
    },
    [=](fabric_atom) {
      auto& st = self->state;
      auto dropped = drop_port_downs(self);
      // At most one Event per fabric window: an incident that grows tells
      // its nodes again, and they have said it already.
      const auto now = st.time->wall_now();
      if (!st.settings->dry_run
          && (!st.fabric_event_posted
              || now - *st.fabric_event_posted
                   >= st.settings->correlation.fabric_window)) {
        st.fabric_event_posted = now;
        post_node_event(self, "FabricIncident",
                        "NIC ports down on many nodes at once: a fabric incident; this "
                        "node is not quarantined for its NIC port-downs",
                        true);
      }
      if (dropped > 0) {
        logger()->info(
          "node {}: {} NIC port records dropped: a fabric incident covers them",
          st.node_name, dropped);
        reconcile(self);
      }
    },
    [=](observe_atom, const std::string& node_json) {
      if (take_node(self, node_json))
        reconcile(self);
    },
    [=](reconcile_atom) {
      self->state.retry_armed = false;
      reconcile(self);
    },
    [=](agent_quiet_atom, bool silent, std::int64_t since_ns) {
      auto& st = self->state;
      if (silent == st.agent_silent_since.has_value())
        return;
      if (silent)
        st.agent_silent_since = wall_time{std::chrono::nanoseconds{since_ns}};
      else
        st.agent_silent_since.reset();
      if (!st.settings->dry_run)
        post_node_event(self, silent ? "AgentSilent" : "AgentReporting",
                        silent ? "vigil's agent on this node stopped reporting; "
                                 "its faults go unseen (no remediation follows)"
                               : "vigil's agent on this node reports again",
                        silent);
      reconcile(self);
    },
    [=](summary_atom) {
      auto summary = nlohmann::json::parse(summary_of(self->state));
      summary["mailboxDepth"] = self->mailbox().size(); // only the actor may read it
      return summary.dump();
    },
    [=](attempts_atom, const std::vector<remediation_attempt>& attempts) {
      for (const auto& a : attempts)
        self->state.remediation->remember_attempt(a.action, a.gpu_uuid, a.at);
    },
    [=](rstart_atom) {
      node_remediation_steps::on_timer(self, control::remediation_timer::start);
    },
    [=](rpoll_atom) {
      node_remediation_steps::on_timer(self, control::remediation_timer::poll);
    },
    [=](rverify_atom) {
      node_remediation_steps::on_timer(self, control::remediation_timer::verify);
    },
    [=](drained_atom, const std::string& key, const std::string& outcome,
        std::uint64_t evictions, std::uint64_t deletions) {
      self->state.settings->counters->pod_deletions += deletions;
      on_drained(self, key, outcome, evictions);
    },
  };
}

} // namespace vigil
