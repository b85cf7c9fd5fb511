// The console's view of the fleet (the actor introspection console): pure
// functions from the actors' summaries and the journal's rows to the JSON of
// /api/v1/ and the Server-Sent Events of /api/v1/stream. No CAF here; the
// console feed actor and the endpoints wire them.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "messages/expected.hpp"
#include "messages/wall_time.hpp"
#include "runtime/journal/journal_store.hpp"

namespace vigil::console {

/// What a node's tile says, most pressing first: a fabric incident, a
/// person needed, a remediation, a drain, a quarantine, a cordon vigil did
/// not make, an opted-out node, healthy. "unknown": no summary came.
enum class tile_state {
  fabric_incident,
  waiting_for_person,
  remediating,
  draining,
  quarantined,
  cordoned_by_others,
  opted_out,
  healthy,
  unknown,
};

std::string_view to_string(tile_state state);

struct node_tile {
  std::string name;
  std::string pool; ///< the breaker's pool label's value; "" none
  tile_state state = tile_state::unknown;
  std::string detail; ///< "GPUReset vigil-reset-…: following", "2 active events"
  std::size_t active = 0;
};

/// A node actor's summary (node_actor's summary_of) as a tile.
node_tile tile_of(const nlohmann::json& node_summary);

/// GET /api/v1/fleet: tiles sorted by name, counts per state, and the
/// fleet-wide figures (the fleet's, breaker's and journal's summaries as given).
nlohmann::json fleet_page(const std::vector<node_tile>& tiles,
                          const nlohmann::json& fleet, const nlohmann::json& breaker,
                          const nlohmann::json& journal);

/// GET /api/v1/actors: one row per actor, deepest mailbox first: the named
/// actors under the supervisor (`names[i]` answered `summaries[i]`), then each
/// node actor (under the fleet) with how many GPU and NIC port actors it
/// supervises, then the actors node `expanded` supervises (`children`, each
/// its own answer: gpu, nic_port, drain). Rows: name, kind, parent,
/// mailboxDepth, detail, and the mailbox figures where the actor has them.
nlohmann::json actor_table(const std::vector<std::string>& names,
                           const std::vector<nlohmann::json>& summaries,
                           const std::vector<nlohmann::json>& node_summaries,
                           const std::string& expanded = {},
                           const std::vector<nlohmann::json>& children = {});

/// GET /api/v1/actors' query: `node` (optional), the node whose own actors
/// to list too. Fails naming any other key.
expected<std::string> parse_actors_request(std::string_view query);

/// A journal row as the console shows it: seq, time, node, kind, the check
/// of an event row, a one-line summary, and the body as JSON.
nlohmann::json row_json(const journal_record& row);

/// Which rows a stream or journal read wants; empty fields match anything.
struct row_filter {
  std::string node;
  std::string kind;  ///< "event", "quarantine", "drain", "remediation", …
  std::string check; ///< an event's checkName
  bool matches(const journal_record& row) const;
};

/// The query of /api/v1/stream, /api/v1/journal and /api/v1/history: node,
/// kind, check; since (a seq), from and to (RFC 3339; `at` is `to`) and
/// limit. An unknown key, a bad number or time fails naming it.
struct journal_request {
  row_filter filter;
  std::int64_t after_seq = 0;
  std::optional<wall_time> from, to;
  std::size_t limit = 500;
};
expected<journal_request> parse_journal_request(std::string_view query);

/// GET /api/v1/trace's query: node (required), seconds (1–300, default 10)
/// and max (1–10,000 messages, default 1,000). Fails naming the key.
struct trace_request {
  std::string node;
  std::uint32_t seconds = 10;
  std::uint32_t max_messages = 1000;
};
expected<trace_request> parse_trace_request(std::string_view query);

/// One row as a Server-Sent Event ("id: seq", "event: row", "data: {…}").
std::string sse_row(const journal_record& row);
/// Said in the stream instead of `skipped` rows a slow client could not take.
std::string sse_skipped(std::uint64_t skipped);

/// "%2F" and "+" decoded; a bad escape is kept as it is.
std::string url_decode(std::string_view text);

} // namespace vigil::console
