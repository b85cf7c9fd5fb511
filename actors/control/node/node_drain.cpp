// The node actor's drain (seed 000 §3): once the quarantine is in place it
// runs the drain its active events want as a linked drain actor, one at a
// time; a different drain supersedes (cancels) the running one, a release
// cancels it. The breaker must permit every new drain.
#include <caf/all.hpp>

#include "actors/control/node/node_actor_internal.hpp"
#include "actors/control/node/node_remediation.hpp"
#include "actors/protocol/control_messages.hpp"
#include "runtime/logging.hpp"

namespace vigil::node_detail {

namespace {

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
  // seed 003 "Blast Radius Control": no new drain starts while the breaker is
  // tripped.
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
        st.drain = self->spawn<caf::linked>(
          vigil::drain, st.node_name, request, st.allocations, std::move(settings),
          st.gateway, st.journal, caf::actor_cast<drain_owner>(self), st.time);
        post_drain_event(self, "DrainStarted", "drain " + key + " started");
      },
      [=](const caf::error& err) {
        self->state.drain_permit_pending = false;
        retry_later(self, "the breaker did not answer (" + caf::to_string(err) + ")");
      });
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
      caf::anon_send(st.drain, cancel_atom::value, why); // dynamically typed: no reply
    }
    return;
  }
  if (!wanted || st.drain_history == control::drain_history::full_done
      || control::drain_key(*wanted) == st.drained_key)
    return;
  wanted->history = st.drain_history;
  start_drain(self, std::move(*wanted));
}

} // namespace

void note_drained(node_state& st, const std::string& key) {
  st.drained_key = key;
  if (st.drain_history != control::drain_history::full_done)
    st.drain_history = key == "full" ? control::drain_history::full_done
                                     : control::drain_history::partial_done;
}

void forget_drains(node_state& st) {
  st.drain_history = control::drain_history::none;
  st.drained_key.clear();
}

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
    // seed 000 §3.1 counts a drain within its quarantine. One that ends after
    // the quarantine was released (its cancel crossed the drain's end) drained
    // for an episode that is over: remembered, it would keep the node's next
    // quarantine from draining before remediation. A replay skips its row the
    // same way (take_marks).
    if (!st.active.empty())
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

} // namespace vigil::node_detail
