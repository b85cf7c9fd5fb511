#include "actors/control/ingest/ingest_actor.hpp"

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/journal/journal_messages.hpp"
#include "actors/protocol/atoms.hpp"
#include "actors/protocol/control_messages.hpp"
#include "runtime/logging.hpp"

namespace vigil {

namespace {

// Answers once: when every append is in, or at the deadline.
void answer(ingest_actor* self, std::uint64_t id) {
  auto& st = self->state;
  auto i = st.pending.find(id);
  if (i == st.pending.end())
    return;
  auto& p = *i->second;
  if (!p.answered) {
    p.answered = true;
    for (const auto& r : p.results)
      st.stats.unavailable += r.status == control::item_status::unavailable ? 1 : 0;
    p.request.reply(
      control::build_ingest_reply(p.results, st.settings.retry_after_seconds));
  }
  if (p.remaining == 0)
    st.pending.erase(i);
}

void append(ingest_actor* self, std::uint64_t id, std::size_t index) {
  auto& st = self->state;
  auto pending = st.pending.at(id);
  const auto& event = *pending->request.items[index].event;
  self
    ->request(st.journal, caf::infinite, append_atom::value,
              event_row(event, st.time->wall_now()))
    .then(
      [=](const append_outcome& outcome) {
        auto& st = self->state;
        auto& result = pending->results[index];
        if (!pending->answered)
          result.status = outcome.duplicate ? control::item_status::duplicate
                                            : control::item_status::accepted;
        if (outcome.duplicate) {
          ++st.stats.duplicates;
        } else {
          ++st.stats.journaled;
          // Routed even when the request was already answered 503: it is
          // stored, so a resent copy will be a duplicate and must not be lost.
          self->send(st.fleet, route_atom::value, *pending->request.items[index].event,
                     outcome.seq);
        }
        if (--pending->remaining == 0)
          answer(self, id);
      },
      [=](const caf::error& err) {
        // Refused (overloaded) or failed: nothing stored, the sender retries.
        component_logger("ingest")->warn("event {} not journaled: {}",
                                         pending->results[index].id, caf::to_string(err));
        if (--pending->remaining == 0)
          answer(self, id);
      });
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

caf::behavior ingest(ingest_actor* self, ingest_settings settings, caf::actor journal,
                     caf::actor fleet, std::shared_ptr<const clock> time) {
  auto& st = self->state;
  st.settings = settings;
  st.standby = settings.await_leadership;
  st.journal = std::move(journal);
  st.fleet = std::move(fleet);
  st.time = std::move(time);
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
      for (std::size_t i = 0; i < items.size(); ++i)
        if (items[i].event)
          append(self, id, i);
      self->delayed_send(self, st.settings.deadline, deadline_atom::value, id);
    },
    [=](deadline_atom, std::uint64_t id) { answer(self, id); },
    [=](stats_atom) {
      const auto& s = self->state.stats;
      return nlohmann::json{{"requests", s.requests},
                            {"received", s.received},
                            {"rejected", s.rejected},
                            {"journaled", s.journaled},
                            {"duplicates", s.duplicates},
                            {"unavailable", s.unavailable},
                            {"pending", self->state.pending.size()},
                            {"mailboxDepth", self->mailbox().size()}}
        .dump();
    },
  };
}

} // namespace vigil
