// The console's JSON API under /api/v1/ and its page under /console/ (the
// actor introspection console). One event-based actor answers each request
// by asking the fleet, breaker and journal actors by message (nothing reads
// another actor's state), and hands /api/v1/stream to the console feed.
//
//   GET /api/v1/fleet              every node's tile, counts, breaker, journal
//   GET /api/v1/nodes/{name}       the node actor's summary, its timeline and the
//                                  rows of the actors it supervises
//   GET /api/v1/journal?node&kind&check&since&from&to&limit   rows after seq
//                                  `since`, recorded between `from` and `to`
//   GET /api/v1/breaker            the breaker's summary
//   GET /api/v1/actors?node        every actor's mailbox depth and figures;
//                                  with `node`, also the actors it supervises
//   GET /api/v1/history?at=T[&node] the fleet as the journal had it at T
//   GET /api/v1/stream?node&kind&check   Server-Sent Events of new rows
//   GET /api/v1/trace?node&seconds&max   Server-Sent Events of one node
//                                  actor's next messages (type, sender, µs)
//   GET /console/…                 the page (compiled in)
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <caf/actor.hpp>
#include <caf/atom.hpp>
#include <caf/event_based_actor.hpp>
#include <nlohmann/json.hpp>

#include "actors/control/breaker/breaker_actor.hpp"
#include "actors/control/endpoints/control_endpoints.hpp" // http::responder as a message
#include "actors/journal/journal_messages.hpp"
#include "runtime/http/http_server.hpp"

namespace vigil {

/// (console_request_atom, http::request, http::responder) to the console API.
using console_request_atom = caf::atom_constant<caf::atom("consolereq")>;

struct console_actors {
  caf::actor fleet;
  journal_handle journal;
  caf::actor feed; ///< the console feed (console_feed.hpp)
  breaker_handle breaker;
  caf::actor ingest;
  /// The fleet at a moment from the journal's rows up to it: `vigil replay
  /// --at`'s rebuild (runtime/replay), passed in so the console shows what
  /// replay prints. Empty: /api/v1/history is 404.
  std::function<nlohmann::json(const std::vector<journal_record>&, wall_time)> fleet_at;
  /// The supervisor's actors by name (control_plane::named, the feed): the
  /// actors page asks each for its figures (actor_stats_atom) and, where it
  /// has one, its summary. Empty: fleet, breaker, ingest, journal and feed.
  std::vector<std::pair<std::string, caf::actor>> named;
};

/// True for the paths the console answers: /api/v1/… and /console….
bool is_console_path(std::string_view path);

caf::behavior console_api(caf::event_based_actor* self, console_actors actors);

/// The console's two actors over a control plane's: the API, and the feed
/// subscribed to its journal. The caller adopts both into its supervisor and
/// puts `api` in control_http_options::console.
struct console_parts {
  caf::actor api;
  caf::actor feed;
};
console_parts spawn_console(caf::actor_system& system, const control_actors& actors,
                            decltype(console_actors::fleet_at) fleet_at,
                            std::vector<std::pair<std::string, caf::actor>> named);

} // namespace vigil

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(vigil::http::request)
