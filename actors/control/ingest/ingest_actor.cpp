#include "actors/control/ingest/ingest_actor.hpp"

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/journal/journal_messages.hpp"
#include "actors/protocol/atoms.hpp"
#include "actors/protocol/control_messages.hpp"
#include "runtime/logging.hpp"

namespace vigil {

namespace {

void refresh_gate(ingest_actor* self);

// Answers once: when every append is in, or at the deadline.
void answer(ingest_actor* self, std::uint64_t id) {
  auto& st = self->state;
  auto i = st.pending.find(id);
  if (i == st.pending.end())
    return;
  auto& p = *i->second;
  if (!p.answered) {
    p.answered = true;
    std::uint64_t unavailable = 0;
    for (const auto& r : p.results)
      unavailable += r.status == control::item_status::unavailable ? 1 : 0;
    st.stats.unavailable += unavailable;
    // A 503 brings the whole request back: what of it is stored will be
    // answered from memory (the rest is remembered as it commits, in settle).
    if (unavailable > 0)
      for (const auto& r : p.results)
        if (r.status == control::item_status::accepted
            || r.status == control::item_status::duplicate)
          st.resent.remember(r.id);
    p.request.reply(
      control::build_ingest_reply(p.results, st.settings.retry_after_seconds));
  }
  if (p.remaining == 0)
    st.pending.erase(i);
}

// Counts events not journaled and warns at most once per interval: under an
// outage or overload a line per event would add a log storm to the trouble.
void note_refusal(ingest_actor* self, std::uint64_t events, const std::string& reason) {
  auto& st = self->state;
  auto& tally = st.refusals;
  tally.events += events;
  tally.last_reason = reason;
  const auto now = st.time->now();
  if (tally.last_warning && now - *tally.last_warning < st.settings.refusal_log_interval)
    return;
  component_logger("ingest")->warn(
    "{} events not journaled since the last such message (answered 503; the agents "
    "resend them): {}",
    tally.events, tally.last_reason);
  tally.events = 0;
  tally.last_warning = now;
}

// The journal answered the append of `event_id`: every request waiting on it
// learns the outcome. The first waiter's event is the one stored; a resent
// copy waiting beside it is a duplicate.
void settle(ingest_actor* self, const std::string& event_id,
            const append_outcome* outcome, const caf::error* error) {
  auto& st = self->state;
  auto found = st.in_flight.find(event_id);
  if (found == st.in_flight.end())
    return;
  auto waiters = std::move(found->second.waiters);
  st.in_flight.erase(found);
  if (outcome != nullptr && outcome->duplicate) {
    ++st.stats.duplicates;
  } else if (outcome != nullptr) {
    ++st.stats.journaled;
    // Routed even when the request was already answered 503: it is stored,
    // so a resent copy will be a duplicate and must not be lost.
    const auto& first = waiters.front();
    self->send(st.fleet, route_atom::value,
               *first.request->request.items[first.index].event, outcome->seq);
  } else {
    // Refused (overloaded) or failed: nothing stored, the sender retries.
    ++st.stats.refused;
    note_refusal(self, 1, caf::to_string(*error));
  }
  for (std::size_t i = 0; i < waiters.size(); ++i) {
    auto& pending = *waiters[i].request;
    if (outcome != nullptr && !pending.answered)
      pending.results[waiters[i].index].status = outcome->duplicate || i > 0
                                                   ? control::item_status::duplicate
                                                   : control::item_status::accepted;
    else if (outcome != nullptr) // stored after its request was answered 503
      st.resent.remember(event_id);
    if (--pending.remaining == 0)
      answer(self, waiters[i].request_id);
  }
  refresh_gate(self);
}

// Journals item `index` of request `id`, or, when an append of the same event
// id is in flight (an agent resending after a 503), waits on that one: the
// journal's queue never holds two copies of an event.
void append(ingest_actor* self, const std::shared_ptr<pending_ingest>& pending,
            std::uint64_t id, std::size_t index) {
  auto& st = self->state;
  auto& event = *pending->request.items[index].event;
  auto [entry, fresh] = st.in_flight.try_emplace(event.id);
  entry->second.waiters.push_back({pending, id, index});
  if (!fresh) {
    ++st.stats.coalesced;
    return;
  }
  // An event without its sender's time happened, for the rules, when it
  // came: journaled and routed with that time, a restart's replay judges it
  // at the same moment the live node actor did (not at the restart).
  if (!event.generated)
    event.generated = st.time->wall_now();
  entry->second.started = st.time->now();
  st.append_order.emplace_back(entry->second.started, event.id);
  self
    ->request(st.journal, caf::infinite, append_atom::value,
              event_row(event, st.time->wall_now()))
    .then([=, event_id = event.id](
            const append_outcome& outcome) { settle(self, event_id, &outcome, nullptr); },
          [=, event_id = event.id](const caf::error& error) {
            settle(self, event_id, nullptr, &error);
          });
}

// The appends in flight, and how long the oldest has waited.
control::append_pressure pressure(ingest_actor* self) {
  auto& st = self->state;
  auto& order = st.append_order;
  auto answered = [&](const std::pair<steady_time, std::string>& front) {
    auto i = st.in_flight.find(front.second);
    return i == st.in_flight.end() || i->second.started != front.first;
  };
  while (!order.empty() && answered(order.front()))
    order.pop_front();
  control::append_pressure p;
  p.in_flight = st.in_flight.size();
  if (!order.empty())
    p.oldest_age = st.time->now() - order.front().first;
  return p;
}

// Tells the HTTP handler whether one more new event would be shed now, by
// both limits: the count, and the oldest append's age (judged when ingest
// last heard of the journal or of a request, which is often while it is
// busy; a request it finds past the age is shed here and shuts the gate).
void refresh_gate(ingest_actor* self) {
  auto& st = self->state;
  if (!st.settings.gate)
    return;
  st.settings.gate->shedding.store(
    !control::admit_request(pressure(self), 1, st.settings.admission),
    std::memory_order_relaxed);
}

// The request is answered 503 at once, nothing appended: the journal has
// enough in flight (admit_request).
void shed(ingest_actor* self, std::uint64_t id, pending_ingest& pending) {
  auto& st = self->state;
  std::uint64_t events = 0;
  for (auto& r : pending.results)
    if (r.status == control::item_status::unavailable) {
      r.error = "the journal is behind; retry after the Retry-After";
      ++events;
    }
  st.stats.shed += events;
  pending.remaining = 0;
  const auto p = pressure(self);
  const auto ms = [](std::chrono::nanoseconds d) {
    return std::to_string(
      std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
  };
  const auto& limits = st.settings.admission;
  note_refusal(self, events,
               "shed: " + std::to_string(p.in_flight) + " appends in flight (limit "
                 + std::to_string(limits.max_in_flight)
                 + ", ingest.max_pending_events), the oldest waiting " + ms(p.oldest_age)
                 + " ms"
                 + (limits.max_oldest_age == std::chrono::nanoseconds::max()
                      ? std::string()
                      : " (limit " + ms(limits.max_oldest_age) + " ms)"));
  answer(self, id);
  refresh_gate(self); // past the age limit, the next requests go unread
}

} // namespace

journal_record event_row(const health_event& event, wall_time now) {
  journal_record row;
  row.recorded_at = now;
  row.node = event.node_name;
  row.kind = "event";
  row.idempotency_key = event.id;
  row.body = encode_health_event(event);
  return row;
}

caf::behavior ingest(ingest_actor* self, ingest_settings settings, journal_handle journal,
                     caf::actor fleet, std::shared_ptr<const clock> time) {
  auto& st = self->state;
  st.settings = settings;
  st.standby = settings.await_leadership;
  st.journal = std::move(journal);
  st.fleet = std::move(fleet);
  st.time = std::move(time);
  st.resent = control::resent_ids{settings.remembered_resends};
  return {
    [=](leader_atom, bool leading) { self->state.standby = !leading; },
    [=](ingest_atom, ingest_request& request) {
      auto& st = self->state;
      ++st.stats.requests;
      auto id = ++st.next_id;
      auto pending = std::make_shared<pending_ingest>();
      pending->request = std::move(request);
      const auto& items = pending->request.items;
      st.stats.received += items.size();
      for (const auto& item : items) {
        control::item_result r;
        r.line = item.line;
        if (item.event && st.standby) {
          r.id = item.event->id;
          r.status = control::item_status::unavailable;
          r.error = "this replica is not the leader; retry";
          ++st.stats.unavailable;
        } else if (item.event && st.resent.contains(item.event->id)) {
          r.id = item.event->id;
          r.status = control::item_status::duplicate; // stored: the journal said so
          ++st.stats.duplicates;
          ++st.stats.resent_stored;
        } else if (item.event) {
          r.id = item.event->id;
          r.status = control::item_status::unavailable; // until the journal says
          ++pending->remaining;
        } else {
          r.status = control::item_status::rejected;
          r.error = item.error;
          ++st.stats.rejected;
        }
        pending->results.push_back(std::move(r));
      }
      st.pending.emplace(id, pending);
      if (pending->remaining == 0)
        return answer(self, id);
      std::size_t new_appends = 0;
      auto waits_on_journal = [&](std::size_t i) {
        return items[i].event
               && pending->results[i].status == control::item_status::unavailable;
      };
      for (std::size_t i = 0; i < items.size(); ++i)
        new_appends +=
          waits_on_journal(i) && st.in_flight.count(items[i].event->id) == 0 ? 1 : 0;
      if (!control::admit_request(pressure(self), new_appends, st.settings.admission))
        return shed(self, id, *pending);
      for (std::size_t i = 0; i < items.size(); ++i)
        if (waits_on_journal(i))
          append(self, pending, id, i);
      refresh_gate(self);
      self->delayed_send(self, st.settings.deadline, deadline_atom::value, id);
    },
    [=](deadline_atom, std::uint64_t id) { answer(self, id); },
    [=](stats_atom) {
      const auto& s = self->state.stats;
      return nlohmann::json{
        {"requests", s.requests},
        {"received", s.received},
        {"rejected", s.rejected},
        {"journaled", s.journaled},
        {"duplicates", s.duplicates},
        {"unavailable", s.unavailable},
        {"shed", s.shed},
        {"requestsShedUnread",
         self->state.settings.gate ? self->state.settings.gate->shed_requests.load() : 0},
        {"coalesced", s.coalesced},
        {"resentStored", s.resent_stored},
        {"refused", s.refused},
        {"pending", self->state.pending.size()},
        {"appendsInFlight", self->state.in_flight.size()},
        {"mailboxDepth", self->mailbox().size()},
        {"messages",
         self->messages().summary(self->system(), message_stats::clock::now())}}
        .dump();
    },
  };
}

} // namespace vigil
