// The control plane's POST /v1/events without its I/O: splitting and
// validating a request body, event ids, the bearer token, and the reply.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "messages/expected.hpp"
#include "messages/health_event.hpp"

namespace vigil::control {

struct ingest_limits {
  std::size_t max_body_bytes = 8 * 1024 * 1024; ///< whole request body; default 8 MiB
  /// One NDJSON line or one array element's JSON text; default 64 KiB.
  std::size_t max_line_bytes = 65536;
  std::size_t max_events_per_request = 10000; ///< documents, valid or not
  decode_limits event;                        ///< bounds on one HealthEvent
};

/// One document of a request, numbered from 1 in request order: the physical
/// line number for NDJSON (so an operator can find it), element index + 1 for
/// a JSON array.
struct ingest_item {
  std::size_t line = 0;
  std::optional<health_event> event; ///< set when valid; its id is never empty
  /// Set when invalid: "line 3: nodeName: missing or empty" (NDJSON) or
  /// "element 2: …" (array); decode_health_event's reason after the prefix.
  std::string error;
};

/// The `where` of parse_ingest_body's whole-request failures, one per HTTP status
/// (see request_failure_status).
inline constexpr std::string_view content_type_where = "Content-Type"; ///< 415
inline constexpr std::string_view body_size_where = "body size";       ///< 413
inline constexpr std::string_view event_count_where = "event count";   ///< 413
inline constexpr std::string_view body_where = "body"; ///< 400: no events, bad array

/// Splits and decodes a request body. A body whose first non-blank byte is '['
/// is a JSON array; one JSON object spread over lines (pretty-printed: its first
/// line is not JSON alone) is one event; otherwise NDJSON (blank lines
/// skipped, "\r\n" tolerated); a
/// leading UTF-8 byte-order mark is ignored. Content-Type "application/json",
/// "application/x-ndjson", "application/jsonl" (parameters ignored) or absent.
/// Whole-request failures: body over max_body_bytes, wrong content type, an array
/// that is not valid JSON, more than max_events_per_request documents, none at
/// all. Per-document problems (over max_line_bytes, invalid JSON, failing
/// decode_health_event) are per-item errors and never stop the other items.
/// An array element is decoded from its own text as sent, not re-serialised, so
/// duplicate keys are caught as in NDJSON and no DOM of the whole body is built.
/// Valid events without an id get derive_event_id's.
expected<std::vector<ingest_item>> parse_ingest_body(std::string_view body,
                                                     std::string_view content_type,
                                                     const ingest_limits& limits);

/// HTTP status for a failure of parse_ingest_body: 415, 413 or 400.
int request_failure_status(const failure& request_failure);

/// A stable id for an event without one: "ingest-" and the FNV-1a 64-bit hash,
/// as 16 hex digits, of its canonical encoding (encode_health_event, with the id
/// left out), so a re-sent copy, in any key spelling, is a duplicate. Entity,
/// error-code and metadata order is part of the event and of the hash.
std::string derive_event_id(const health_event& event);

/// The token of an Authorization header "Bearer <token>" (scheme
/// case-insensitive, spaces and tabs around it ignored); nullopt otherwise.
std::optional<std::string> bearer_token(std::string_view authorization_header);

/// Checks an Authorization header "Bearer <token>" (scheme case-insensitive,
/// spaces around the token ignored) in time that depends on the presented
/// token's length only. An empty expected token means authentication is
/// disabled: always true.
bool bearer_token_matches(std::string_view authorization_header,
                          std::string_view expected_token);

/// Per-item outcome after the journal answered.
enum class item_status { accepted, duplicate, rejected, unavailable };

std::string_view to_string(item_status status);

struct item_result {
  std::size_t line = 0;
  std::string id; ///< written to the reply when not empty
  item_status status = item_status::rejected;
  std::string error; ///< written to the reply when not empty
};

struct ingest_reply {
  int http_status = 200;
  std::optional<int> retry_after_seconds; ///< the Retry-After header, when set
  std::string body;                       ///< JSON; Content-Type application/json
};

/// The reply to a request that got as far as the journal. Body:
/// {"accepted":A,"duplicates":D,"rejected":R,"unavailable":U,"results":[
///  {"line":1,"id":"…","status":"accepted"},{"line":2,"status":"rejected","error":"…"}]},
/// one result per document in request order (the agent matches them by position).
/// Status: 503 with Retry-After (at least 1 s) when any item is unavailable: the
/// sender resends the whole request, and ids make that safe. Else 400 when no item
/// was accepted or duplicate (every item rejected). Else 200, also when some items
/// were rejected: the valid ones are journaled and must not be resent, and a 4xx
/// would make a sender drop or retry the whole request.
ingest_reply build_ingest_reply(const std::vector<item_result>& results,
                                int retry_after_seconds);

/// What ingest knows of the journal appends it is waiting on.
struct append_pressure {
  std::size_t in_flight = 0;              ///< appends not yet answered
  std::chrono::nanoseconds oldest_age{0}; ///< how long the oldest has waited
};

/// How much ingest lets wait on the journal.
struct admission_limits {
  std::size_t max_in_flight = 32768; ///< ingest.max_pending_events: bounds memory
  /// The oldest append may have waited this long: past it, appends started
  /// now would not commit before their request's deadline, so the agent would
  /// get a 503 after the work was done anyway, resend, and the journal would
  /// do it again. `vigil control` sets half the deadline; it is judged at the
  /// gate too, before a body is parsed (RELIABILITY.md "The age limit at the
  /// gate"). Off when max() (the default here, for tests of the count).
  std::chrono::nanoseconds max_oldest_age = std::chrono::nanoseconds::max();
};

/// Admission (issue #21 item 4): whether a request that would start
/// `new_appends` journal appends may. Past either limit it is answered 503 at
/// once with nothing appended, which keeps the journal's queue to what it
/// commits within the deadline: acknowledgements keep flowing while the
/// database is slow, instead of every request timing out behind a queue of
/// resends. A request that starts none (every event invalid, or resent while
/// its append is in flight) always may, and so does any request when nothing
/// is in flight, however large: it could never pass otherwise.
bool admit_request(const append_pressure& pressure, std::size_t new_appends,
                   const admission_limits& limits);

/// The ids of events stored whose request was answered 503 (their append
/// committed past the deadline, or beside an event that did): the agent
/// resends the whole request, and ingest answers those ids "duplicate" itself,
/// as the journal would, without another append. After a slow spell the
/// resends would otherwise go back through the journal's queue and crowd out
/// new events. Only ids the journal confirmed are kept, so no answer claims
/// more than is stored; the newest `capacity` of them, the oldest forgotten
/// first (a forgotten one goes to the journal, which answers it too).
class resent_ids {
public:
  explicit resent_ids(std::size_t capacity) : capacity_(capacity) {}
  // A copy's order_ would point into the other's set.
  resent_ids(const resent_ids&) = delete;
  resent_ids& operator=(const resent_ids&) = delete;
  resent_ids(resent_ids&&) = default;
  resent_ids& operator=(resent_ids&&) = default;

  void remember(const std::string& id);
  bool contains(const std::string& id) const { return ids_.count(id) != 0; }
  std::size_t size() const { return ids_.size(); }

private:
  std::size_t capacity_;
  std::unordered_set<std::string> ids_;
  std::deque<const std::string*> order_; ///< into ids_ (its nodes never move)
};

/// A whole-request error: {"error":"…"} with the given status (400, 401, 413, 415).
ingest_reply error_reply(int http_status, std::string_view message);

/// error_reply for a failure of parse_ingest_body, with request_failure_status.
ingest_reply request_failure_reply(const failure& request_failure);

/// Loads the bearer token from a file (a mounted Secret), without surrounding
/// whitespace. An unreadable or empty file, one over 64 KiB, or a token with
/// whitespace or control characters inside fails naming the path.
expected<std::string> load_token_file(const std::string& path);

} // namespace vigil::control
