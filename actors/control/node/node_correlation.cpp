// The node actor's side of correlation (seed 002 §6, ARCHITECTURE.md §3):
// repeats dropped, each event through the gpu or nic_port actor it concerns
// (spawned on first use, linked), rule firings counted and journaled, events
// applied to the node's active set, and port-downs a fabric incident covers
// dropped.
#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/control/gpu/gpu_actor.hpp"
#include "actors/control/nic_port/nic_port_actor.hpp"
#include "actors/control/node/correlation_messages.hpp"
#include "actors/control/node/node_actor_internal.hpp"
#include "actors/journal/journal_messages.hpp"
#include "actors/protocol/control_messages.hpp"
#include "runtime/logging.hpp"

namespace vigil::node_detail {

namespace {

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

// What the rules' outcome makes of the event (events_in_order): a drop that
// fell due before it, the event (escalated or not), then what the rules
// derived. A firing is logged, counted and, when live (not replayed),
// journaled. The verdicts follow from journaled events in event time, so a
// replay reaches them again; the correlation row records why they happened.
std::vector<health_event> correlated(node_actor* self, const health_event& event,
                                     const control::correlation_outcome& outcome,
                                     bool live) {
  auto out = control::events_in_order(event, outcome);
  if (!live)
    return out;
  // In `out`: the drops due first, then the event, then what was derived.
  const auto at_event = outcome.due.size();
  for (std::size_t i = 0; i < at_event; ++i)
    journal_firing(self, "nic-drop", out[i], out[i].message);
  if (outcome.escalate && !event.is_healthy)
    journal_firing(self, outcome.rule, out[at_event], outcome.message);
  else if (!outcome.rule.empty() && !outcome.derived.empty())
    journal_firing(self, outcome.rule, out[at_event + 1], outcome.message);
  return out;
}

} // namespace

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
  auto on_outcome = [=](control::correlation_outcome& outcome) {
    then(correlated(self, event, outcome, live));
  };
  auto on_error = [=](const caf::error& err) {
    // Not reached while linked (its crash ends this actor too).
    logger()->warn("node {}: {} did not answer ({}); event {} taken as it is",
                   self->state.node_name, subject.key, caf::to_string(err), event.id);
    then({event});
  };
  auto answer =
    self->request(entity_actor(self, subject), caf::infinite, correlate_atom::value,
                  event, static_cast<std::int64_t>(at.time_since_epoch().count()), live);
  // A live event's turn is kept by the node (node_state::correlating): an
  // await would leave every message behind it in the mailbox to be looked at
  // again after each answer, so a batch of K events for one node cost K²
  // (RELIABILITY.md "Load"). A replay is one message, and nothing may run
  // between its events.
  if (live)
    answer.then(on_outcome, on_error);
  else
    answer.await(on_outcome, on_error);
  return std::nullopt;
}

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
    // A port the fabric took down, or brought back: the fabric condition and
    // its soft taint follow.
    const bool fabric_changed = st.fabric.observe(e);
    changed = changed || outcome.changed || fabric_changed;
  }
  return changed;
}

std::size_t drop_port_downs(node_actor* self) {
  auto& st = self->state;
  std::vector<control::active_record> covered;
  for (auto& r : st.active.records())
    if (control::explained_by_fabric(r))
      covered.push_back(std::move(r));
  st.fabric.incident(covered);
  auto dropped = st.active.remove_if(control::explained_by_fabric);
  // Its NIC port actors are dynamically typed, which a typed actor can tell
  // only anonymously; they do not answer.
  for (const auto& [port, actor] : st.ports)
    caf::anon_send(actor, fabric_atom::value);
  return dropped;
}

} // namespace vigil::node_detail
