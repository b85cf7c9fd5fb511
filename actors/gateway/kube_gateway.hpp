// The gateway: the one way event-based actors talk to the Kubernetes API.
// Requests become replies and watches become streams of messages; the
// blocking and waiting happen on the client's I/O thread, never here. A watch
// is kept alive: list, watch from the list's resourceVersion, resume from
// the last seen version when the stream ends, relist on 410 Gone.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>

#include <caf/actor.hpp>
#include <caf/response_promise.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/gateway/kube_gateway_messages.hpp"
#include "actors/supervisor/message_stats.hpp"
#include "runtime/kube/kube_client.hpp"

namespace vigil {

/// One kept-alive watch.
struct watch_subscription {
  kube_watch_spec spec;
  kube_watch_subscriber subscriber;
  std::string resource_version; ///< the last one seen; "" = list first
  std::uint64_t stream = 0;     ///< the client's id of the open stream
  std::uint64_t generation = 0; ///< events of older streams are ignored
  int failures = 0;             ///< consecutive failed streams (backoff)
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

/// The gateway's protocol and what its client's I/O thread and its timers
/// send it: a request's result, a watch stream's line and end (with the
/// stream's generation: lines of an older stream are ignored), and the
/// reopening of a stream after a backoff.
using kube_gateway_io = kube_gateway_handle::extend<
  caf::reacts_to<done_atom, std::uint64_t, kube::kube_result>,
  caf::reacts_to<watch_line_atom, std::uint64_t, std::uint64_t, std::string>,
  caf::reacts_to<watch_end_atom, std::uint64_t, std::uint64_t,
                 std::optional<kube::kube_error>>,
  caf::reacts_to<rewatch_atom, std::uint64_t, std::uint64_t>>;

using kube_gateway_actor =
  caf::stateful_actor<kube_gateway_state, observed<kube_gateway_io::base>>;

/// `stats` receives the gateway's figures (shared with /metrics).
kube_gateway_io::behavior_type kube_gateway(kube_gateway_actor* self,
                                            std::shared_ptr<kube::kube_client> client,
                                            std::shared_ptr<kube_gateway_stats> stats);

} // namespace vigil
