// The console's live stream (GET /api/v1/stream, Server-Sent Events): one
// actor subscribed to the journal writes each committed row to every open
// stream whose filter wants it. It never waits on a client and never slows
// the journal: a stream with more than `max_pending_bytes` not yet written,
// or sent `max_rows_per_second` rows this second already, skips rows and says
// how many when it has room again. A row is turned into text only when some
// stream is sent it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/control/console/console_view.hpp"
#include "actors/journal/journal_messages.hpp"
#include "actors/supervisor/message_stats.hpp"
#include "runtime/http/http_server.hpp"

namespace vigil {

/// (feed_open_atom, shared_ptr<http::body_stream>, console::row_filter): a
/// client's stream, to be fed from now on until it closes.
using feed_open_atom = caf::atom_constant<caf::atom("feedopen")>;
/// (feed_closed_atom, id): the stream's connection closed.
using feed_closed_atom = caf::atom_constant<caf::atom("feedclosed")>;
/// (feed_keepalive_atom): a comment to every stream, so idle proxies keep it.
using feed_keepalive_atom = caf::atom_constant<caf::atom("feedkeep")>;
/// (feed_refill_atom): each second, every stream's row budget is refilled.
using feed_refill_atom = caf::atom_constant<caf::atom("feedrefill")>;

struct console_feed_config {
  std::size_t max_pending_bytes = 1 << 20; ///< per stream, then rows are skipped
  std::chrono::seconds keepalive{15};      ///< 0: none
  std::size_t max_streams = 64;            ///< more are refused (503)
  /// Rows per second one stream is sent at most; past it the rows are skipped
  /// and counted (a person reads a few rows a second; a burst of 20,000 must
  /// not cost the journal's cores, issue 18). 0: no limit.
  std::uint64_t max_rows_per_second = 2500;
};

struct feed_client {
  std::shared_ptr<http::body_stream> stream;
  console::row_filter filter;
  std::uint64_t skipped = 0; ///< rows not sent since the last one that was
  std::uint64_t budget = 0;  ///< rows it may still be sent this second
};

struct console_feed_state {
  console_feed_config config;
  std::map<std::uint64_t, feed_client> clients;
  std::uint64_t next_id = 1;
  std::uint64_t rows = 0;    ///< committed rows seen
  std::uint64_t sent = 0;    ///< rows written to some stream
  std::uint64_t skipped = 0; ///< rows a slow stream did not get
  bool refill_armed = false;
  static inline const char* name = "console_feed";
};

using console_feed_actor =
  caf::stateful_actor<console_feed_state, observed<caf::event_based_actor>>;

/// Subscribes to `journal` at once. (summary_atom) → its figures as JSON.
/// A stream over max_streams is ended with an error event at once.
caf::behavior console_feed(console_feed_actor* self, console_feed_config config,
                           journal_handle journal);

} // namespace vigil

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::shared_ptr<vigil::http::body_stream>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(vigil::console::row_filter)
