// The ingest actor: journals each valid event of a POST /v1/events request
// and answers only after the journal did. Stored events go on to the fleet;
// duplicates are acknowledged and not processed again. A request whose
// appends have not all committed by the deadline is answered 503 +
// Retry-After for those; appends that commit later are still routed, so a
// resent copy (a duplicate then) loses nothing. Under load it stays bounded:
// an event resent while its first append is still in flight waits on that
// append instead of queueing a copy, and a request that would take the
// appends in flight past a limit is answered 503 at once (shed) with nothing
// appended, so a slow database means 503s and spooling agents rather than a
// growing queue.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/control/ingest/ingest_logic.hpp"
#include "actors/journal/journal_messages.hpp"
#include "actors/supervisor/message_stats.hpp"
#include "runtime/clock.hpp"
#include "runtime/journal/journal_store.hpp"

namespace vigil {

/// One HTTP request's parsed items and the way to answer it.
struct ingest_request {
  std::vector<control::ingest_item> items;
  std::function<void(control::ingest_reply)> reply;
};

/// What ingest tells the HTTP handler, which reads it before it parses a
/// body: whether a request with one new event would be shed now
/// (admit_request on the appends in flight, refreshed at every append and
/// every answer from the journal), and how many requests it answered 503 on
/// that word alone. Under overload a refusal then costs no parse and no
/// message to this actor. Written by the actor, read by the server's threads.
/// A resend of an event in flight is refused too (it is retried after
/// Retry-After and finds its event stored); the age limit is judged by the
/// actor alone, since the oldest append ages between refreshes.
struct ingest_gate {
  std::atomic<bool> shedding{false};
  std::atomic<std::uint64_t> shed_requests{0};
};

struct ingest_settings {
  caf::timespan deadline = std::chrono::seconds{5}; ///< answer 503 after this
  int retry_after_seconds = 2;
  bool await_leadership = false; ///< start as a standby (leader election on)
  /// When a request is shed: appends in flight (ingest.max_pending_events) and
  /// the oldest one's wait (off by default).
  control::admission_limits admission;
  /// At most one warning this often about events not journaled.
  caf::timespan refusal_log_interval = std::chrono::seconds{10};
  /// Published for the HTTP handler; null: none.
  std::shared_ptr<ingest_gate> gate;
  /// Ids of stored events answered 503 that ingest answers itself when they
  /// are resent (control::resent_ids): about 100 bytes each, filled only
  /// while requests miss their deadline.
  std::size_t remembered_resends = 131072;
};

struct ingest_stats {
  std::uint64_t requests = 0;
  std::uint64_t received = 0; ///< documents, valid or not
  std::uint64_t rejected = 0;
  std::uint64_t journaled = 0;
  std::uint64_t duplicates = 0;
  std::uint64_t unavailable = 0; ///< answered 503 for these
  std::uint64_t shed = 0;      ///< of those: answered at once, too many appends in flight
  std::uint64_t coalesced = 0; ///< resent while their first append was in flight
  /// Of the duplicates: resent after their 503, answered without the journal.
  std::uint64_t resent_stored = 0;
  std::uint64_t refused = 0; ///< appends the journal refused or failed
};

struct pending_ingest {
  ingest_request request;
  std::vector<control::item_result> results;
  std::size_t remaining = 0;
  bool answered = false;
};

/// A request's event waiting on the append of its id.
struct append_waiter {
  std::shared_ptr<pending_ingest> request;
  std::uint64_t request_id = 0;
  std::size_t index = 0; ///< the item in the request
};

/// One journal append in flight and the requests waiting on it.
struct append_in_flight {
  steady_time started{};
  std::vector<append_waiter> waiters;
};

/// Events not journaled since the last warning about them.
struct refusal_tally {
  std::uint64_t events = 0;
  std::string last_reason;
  std::optional<steady_time> last_warning;
};

struct ingest_state {
  ingest_settings settings;
  journal_handle journal;
  caf::actor fleet;
  std::shared_ptr<const clock> time;
  std::uint64_t next_id = 0;
  std::map<std::uint64_t, std::shared_ptr<pending_ingest>> pending;
  /// Event id → its append and the requests waiting on it: one append per id
  /// at a time.
  std::unordered_map<std::string, append_in_flight> in_flight;
  /// Appends in the order they started (answered ones are skipped lazily):
  /// the front is the oldest still in flight.
  std::deque<std::pair<steady_time, std::string>> append_order;
  control::resent_ids resent{0}; ///< sized from the settings
  bool standby = false;          ///< another replica leads: answer 503, journal nothing
  ingest_stats stats;
  refusal_tally refusals;
  static inline const char* name = "ingest";
};

using ingest_actor = caf::stateful_actor<ingest_state, observed<caf::event_based_actor>>;

/// (ingest_atom, ingest_request); (stats_atom) → JSON counts;
/// (leader_atom, bool): while not leading, every event is answered 503
/// (the agents retry; the Service reaches the leader), nothing is journaled.
caf::behavior ingest(ingest_actor* self, ingest_settings settings, journal_handle journal,
                     caf::actor fleet, std::shared_ptr<const clock> time);

/// The journal row of an ingested event: kind "event", keyed by its id.
journal_record event_row(const health_event& event, wall_time now);

} // namespace vigil

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(vigil::ingest_request)
