#include "actors/control/console/console_feed.hpp"

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/journal/journal_messages.hpp"
#include "actors/protocol/control_messages.hpp"

namespace vigil {

namespace {

// Each second every stream may again be sent max_rows_per_second rows; the
// timer runs only while a stream is open.
void arm_refill(console_feed_actor* self) {
  auto& st = self->state;
  if (st.refill_armed || st.clients.empty() || st.config.max_rows_per_second == 0)
    return;
  st.refill_armed = true;
  self->delayed_send(self, std::chrono::seconds(1), feed_refill_atom::value);
}

void open_stream(console_feed_actor* self, std::shared_ptr<http::body_stream> stream,
                 console::row_filter filter) {
  auto& st = self->state;
  if (st.clients.size() >= st.config.max_streams) {
    stream->send(
      "event: refused\ndata: {\"error\":\"too many console streams open\"}\n\n");
    stream->end();
    return;
  }
  const auto id = st.next_id++;
  // The connection's close arrives as a message, so the map is only ever
  // touched by this actor.
  stream->on_close([self = caf::actor_cast<caf::actor>(self), id] {
    caf::anon_send(self, feed_closed_atom::value, id);
  });
  st.clients.emplace(id, feed_client{std::move(stream), std::move(filter), 0,
                                     st.config.max_rows_per_second});
  arm_refill(self);
}

// One chunk per stream per batch: its rows, after a count of what it missed.
// A row becomes text only when the first stream is sent it, so rows no
// stream takes (filtered out, over a budget, or for a stalled client) cost
// only the filter.
void publish(console_feed_actor* self, const std::vector<journal_record>& rows) {
  auto& st = self->state;
  st.rows += rows.size();
  std::vector<std::string> events(rows.size());
  auto event = [&](std::size_t i) -> const std::string& {
    if (events[i].empty())
      events[i] = console::sse_row(rows[i]);
    return events[i];
  };
  const bool limited = st.config.max_rows_per_second > 0;
  for (auto& [id, client] : st.clients) {
    std::vector<std::size_t> wanted;
    for (std::size_t i = 0; i < rows.size(); ++i)
      if (client.filter.matches(rows[i]))
        wanted.push_back(i);
    if (wanted.empty())
      continue;
    if (client.stream->pending_bytes() > st.config.max_pending_bytes) {
      client.skipped += wanted.size();
      st.skipped += wanted.size();
      continue;
    }
    // Over its budget for this second, a stream gets the newest rows it may.
    std::size_t first = 0;
    if (limited && wanted.size() > client.budget)
      first = wanted.size() - client.budget;
    client.skipped += first;
    st.skipped += first;
    if (first == wanted.size())
      continue;
    std::string chunk;
    if (client.skipped > 0)
      chunk = console::sse_skipped(client.skipped);
    for (std::size_t k = first; k < wanted.size(); ++k)
      chunk += event(wanted[k]);
    const auto sent = wanted.size() - first;
    if (limited)
      client.budget -= sent;
    client.skipped = 0;
    if (client.stream->send(std::move(chunk)))
      st.sent += sent;
  }
}

} // namespace

caf::behavior console_feed(console_feed_actor* self, console_feed_config config,
                           journal_handle journal) {
  self->state.config = config;
  self->send(journal, subscribe_atom::value, caf::actor_cast<journal_subscriber>(self));
  if (config.keepalive.count() > 0)
    self->delayed_send(self, config.keepalive, feed_keepalive_atom::value);
  return {
    [=](feed_open_atom, std::shared_ptr<http::body_stream>& stream,
        console::row_filter& filter) {
      open_stream(self, std::move(stream), std::move(filter));
    },
    [=](committed_atom, const std::vector<journal_record>& rows) { publish(self, rows); },
    [=](feed_closed_atom, std::uint64_t id) { self->state.clients.erase(id); },
    [=](feed_refill_atom) {
      auto& st = self->state;
      st.refill_armed = false;
      for (auto& [id, client] : st.clients)
        client.budget = st.config.max_rows_per_second;
      arm_refill(self);
    },
    [=](feed_keepalive_atom) {
      for (auto& [id, client] : self->state.clients)
        if (client.stream->pending_bytes() == 0)
          client.stream->send(": keepalive\n\n");
      self->delayed_send(self, self->state.config.keepalive, feed_keepalive_atom::value);
    },
    [=](summary_atom) {
      const auto& st = self->state;
      auto out = self->figures();
      out.update(nlohmann::json{{"streams", st.clients.size()},
                                {"rows", st.rows},
                                {"sent", st.sent},
                                {"skipped", st.skipped},
                                {"maxRowsPerSecond", st.config.max_rows_per_second}});
      return out.dump();
    },
  };
}

} // namespace vigil
