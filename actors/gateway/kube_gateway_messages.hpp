// Messages of the Kubernetes gateway: requests and their results, and watch
// subscriptions whose events arrive as messages. Local only: these types
// never cross a process boundary.
#pragma once

#include <cstdint>
#include <string>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/protocol/shared_json.hpp"
#include "runtime/kube/kube_api.hpp"

namespace vigil {

/// (kube_request) → kube_result: one API request, retried inside the client.
/// (watch_atom, kube_watch_spec) → std::uint64_t watch id; the sender then
/// receives kube_watch_event messages until (unwatch_atom, id).
using watch_atom = caf::atom_constant<caf::atom("watch")>;
using unwatch_atom = caf::atom_constant<caf::atom("unwatch")>;
/// Internal: the I/O thread reporting a request's result to the gateway, and
/// a watch stream's lines and end to that watch's decoder, which passes the
/// lines on decoded and the end as it came.
using done_atom = caf::atom_constant<caf::atom("done")>;
using watch_line_atom = caf::atom_constant<caf::atom("watchline")>;
using watch_decoded_atom = caf::atom_constant<caf::atom("watchdec")>;
using watch_end_atom = caf::atom_constant<caf::atom("watchend")>;
using rewatch_atom = caf::atom_constant<caf::atom("rewatch")>;

/// What to keep watching: a collection, optionally narrowed.
struct kube_watch_spec {
  kube::api_resource resource;
  std::string ns; ///< "" = all namespaces (or cluster-scoped)
  std::string label_selector;
  std::string field_selector;
};

/// One watch event for a subscriber. The initial list, and every relist (410
/// Gone), comes as type "LISTED", one event per page of the List as the API
/// server gives it (`object` a List of that page's items), numbered from 0,
/// the last one marked; a list that failed part way starts again at page 0.
/// A page that is not the last comes as a request: the gateway reads the
/// next page meanwhile and hands it over once the subscriber's handler has
/// returned, one page ahead and never more (a handler returning void answers
/// it; one that forwards the event must forward the request, `delegate`). A
/// subscriber that dies while listing ends the watch.
/// Then "ADDED", "MODIFIED", "DELETED" and "BOOKMARK" as the server sends
/// them, with `object` one object. `object` is never null.
struct kube_watch_event {
  std::uint64_t watch_id = 0;
  std::string type;
  shared_json object;
  std::string resource_version;
  std::size_t list_page = 0; ///< LISTED: this page's number, from 0
  bool last_page = true;     ///< LISTED: the list is complete with this page
};

/// A watch's subscriber (whoever asked for the watch) as the gateway sees it.
using kube_watch_subscriber = caf::typed_actor<caf::reacts_to<kube_watch_event>>;

/// The gateway's protocol, which the compiler checks at every send: a
/// request → its result (an error result after the client's retries, never
/// a CAF error); (watch_atom, spec) → the watch's id, and kube_watch_event
/// messages to the sender from then on; (unwatch_atom, id).
using kube_gateway_handle =
  caf::typed_actor<caf::replies_to<kube::kube_request>::with<kube::kube_result>,
                   caf::replies_to<watch_atom, kube_watch_spec>::with<std::uint64_t>,
                   caf::reacts_to<unwatch_atom, std::uint64_t>>;

} // namespace vigil

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(vigil::kube::kube_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(vigil::kube::kube_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(vigil::kube_watch_spec)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(vigil::kube_watch_event)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::optional<vigil::kube::kube_error>)
