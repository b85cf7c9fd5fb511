#include "actors/control/console/console_feed.hpp"

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/journal/journal_messages.hpp"
#include "actors/protocol/control_messages.hpp"

namespace vigil {

namespace {

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
  st.clients.emplace(id, feed_client{std::move(stream), std::move(filter), 0});
}

// One chunk per stream per batch: its rows, after a count of what it missed.
void publish(console_feed_actor* self, const std::vector<journal_record>& rows) {
  auto& st = self->state;
  st.rows += rows.size();
  std::vector<std::string> events;
  events.reserve(rows.size());
  for (const auto& row : rows)
    events.push_back(console::sse_row(row));
  for (auto& [id, client] : st.clients) {
    std::string chunk;
    std::uint64_t matched = 0;
    for (std::size_t i = 0; i < rows.size(); ++i)
      if (client.filter.matches(rows[i])) {
        chunk += events[i];
        ++matched;
      }
    if (matched == 0)
      continue;
    if (client.stream->pending_bytes() > st.config.max_pending_bytes) {
      client.skipped += matched;
      st.skipped += matched;
      continue;
    }
    if (client.skipped > 0)
      chunk = console::sse_skipped(client.skipped) + chunk;
    client.skipped = 0;
    if (client.stream->send(std::move(chunk)))
      st.sent += matched;
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
    [=](feed_keepalive_atom) {
      for (auto& [id, client] : self->state.clients)
        if (client.stream->pending_bytes() == 0)
          client.stream->send(": keepalive\n\n");
      self->delayed_send(self, self->state.config.keepalive, feed_keepalive_atom::value);
    },
    [=](summary_atom) {
      const auto& st = self->state;
      return nlohmann::json{{"streams", st.clients.size()},
                            {"rows", st.rows},
                            {"sent", st.sent},
                            {"skipped", st.skipped},
                            {"mailboxDepth", self->mailbox().size()}}
        .dump();
    },
  };
}

} // namespace vigil
