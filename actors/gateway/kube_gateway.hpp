// The gateway: the one way event-based actors talk to the Kubernetes API.
// Requests become replies and watches become streams of messages; the
// blocking and waiting happen on the client's I/O thread, never here. A watch
// is kept alive: list, watch from the list's resourceVersion, resume from
// the last seen version when the stream ends, relist on 410 Gone. Each
// watch's lines are decoded by a decoder actor of its own, beside the
// gateway: every request and every Node change pass the one gateway, and
// parsing a Node's JSON there would hold the cordons behind it.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include <caf/actor.hpp>
#include <caf/actor_addr.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/response_promise.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/gateway/kube_gateway_messages.hpp"
#include "actors/supervisor/message_stats.hpp"
#include "runtime/kube/kube_client.hpp"

namespace vigil {

/// One watch line as its decoder hands it to the gateway: decoded, the
/// object already shared for the subscriber, or why it is not a watch event.
struct decoded_watch_line {
  std::string type; ///< ADDED, MODIFIED, DELETED, BOOKMARK, ERROR; "" = undecodable
  shared_json object;
  std::string resource_version;
  int status_code = 0;   ///< ERROR: the Status's code (410 Gone: relist)
  std::string problem;   ///< why the line did not decode
  std::size_t bytes = 0; ///< the line's size, for the log
};

/// A watch's decoder: the client's I/O thread hands it each line and the
/// stream's end, in order; it decodes the lines and passes both on to the
/// gateway in the same order.
using watch_decoder_handle = caf::typed_actor<
  caf::reacts_to<watch_line_atom, std::uint64_t, std::uint64_t, std::string>,
  caf::reacts_to<watch_end_atom, std::uint64_t, std::uint64_t,
                 std::optional<kube::kube_error>>>;

/// A page of a watch's LIST, read, and the continue token of the next ("" =
/// the last).
struct listed_page {
  kube_watch_event event;
  std::string next;
};

/// One kept-alive watch.
struct watch_subscription {
  kube_watch_spec spec;
  kube_watch_subscriber subscriber;
  watch_decoder_handle decoder; ///< decodes this watch's lines
  std::string resource_version; ///< the last one seen; "" = list first
  std::uint64_t stream = 0;     ///< the client's id of the open stream
  std::uint64_t generation = 0; ///< events of older streams are ignored
  int failures = 0;             ///< consecutive failed streams (backoff)
  /// Listing: a page is with the subscriber, its answer awaited; the next
  /// one, read meanwhile, waits here until then.
  bool page_with_subscriber = false;
  std::optional<listed_page> waiting_page;
};

/// The gateway's figures for /metrics: written by the gateway alone, read by
/// whoever renders them (monotonic atomics but for the in_flight gauge).
struct kube_gateway_stats {
  std::atomic<std::uint64_t> requests{0};
  std::atomic<std::uint64_t> failures{0}; ///< answered with an error, after retries
  std::atomic<std::uint64_t> in_flight{0};
  std::atomic<std::uint64_t> watch_events{0};
  std::atomic<std::uint64_t> relists{0};
  std::atomic<std::uint64_t> resumes{0};
  std::atomic<std::uint64_t> bad_watch_lines{0};
};

struct kube_gateway_state {
  std::shared_ptr<kube::kube_client> client;
  std::uint64_t next_id = 0;
  std::unordered_map<std::uint64_t, caf::response_promise> pending;
  std::map<std::uint64_t, watch_subscription> watches;
  std::shared_ptr<kube_gateway_stats> stats;
  static inline const char* name = "kube_gateway";
};

/// The gateway's protocol and what its client's I/O thread, its watches'
/// decoders and its timers send it: a request's result, a watch stream's
/// decoded line and end (with the stream's generation: lines of an older
/// stream are ignored), and the reopening of a stream after a backoff.
using kube_gateway_io = kube_gateway_handle::extend<
  caf::reacts_to<done_atom, std::uint64_t, kube::kube_result>,
  caf::reacts_to<watch_decoded_atom, std::uint64_t, std::uint64_t, decoded_watch_line>,
  caf::reacts_to<watch_end_atom, std::uint64_t, std::uint64_t,
                 std::optional<kube::kube_error>>,
  caf::reacts_to<rewatch_atom, std::uint64_t, std::uint64_t>>;

using kube_gateway_actor =
  caf::stateful_actor<kube_gateway_state, observed<kube_gateway_io::base>>;

struct watch_decoder_state {
  /// Weak: the gateway holds its decoders, and a decoder holding the
  /// gateway would keep a gateway nobody else holds from going away.
  caf::actor_addr gateway;
  static inline const char* name = "watch_decoder";
};

using watch_decoder_actor =
  caf::stateful_actor<watch_decoder_state, observed<watch_decoder_handle::base>>;

/// Decodes one watch's lines for `gateway`; quits when the gateway is gone.
/// The gateway monitors it: a decoder that died is replaced and its watch
/// resumed.
watch_decoder_handle::behavior_type watch_decoder(watch_decoder_actor* self,
                                                  kube_gateway_io gateway);

/// What the decoder makes of one line (kube::decode_watch_line, the object
/// moved into a shared_json).
decoded_watch_line decode_for_gateway(std::string_view line);

/// `stats` receives the gateway's figures (shared with /metrics).
kube_gateway_io::behavior_type kube_gateway(kube_gateway_actor* self,
                                            std::shared_ptr<kube::kube_client> client,
                                            std::shared_ptr<kube_gateway_stats> stats);

} // namespace vigil

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(vigil::decoded_watch_line)
