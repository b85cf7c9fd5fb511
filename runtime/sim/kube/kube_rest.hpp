// The API server's REST surface over an object_store, without HTTP: routes a
// request (verb, path, query, body) to the store as kube-apiserver would, and
// resolves a watch request to what it follows. The API test server serves it
// over sockets; the in-process client of the virtual-time demo calls it
// directly. Not thread-safe: callers serialise access to the store.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/sim/kube/kube_object_store.hpp"

namespace vigil::kube {

struct rest_request {
  std::string verb = "GET";                 ///< GET, POST, PUT, PATCH, DELETE
  std::string path;                         ///< "/api/v1/nodes/node-1"
  std::map<std::string, std::string> query; ///< decoded
  std::string content_type;                 ///< the Content-Type header
  std::string accept;                       ///< the Accept header
  std::string body;
};

struct rest_reply {
  int status = 200;
  std::string body;
  std::string retry_after; ///< the Retry-After header, "" for none
};

/// The Status reply of a failure (429 carries Retry-After: 1).
rest_reply status_reply(const api_status& status);
rest_reply error_reply(int code, const std::string& reason, const std::string& message);

/// Discovery documents, then CRUD, patches, evictions and deletions on the
/// store. Watches are not requests: see resolve_watch.
rest_reply serve_rest(object_store& store, const rest_request& request);

/// What a watch request follows.
struct watch_target {
  const resource_type* type = nullptr;
  std::string ns;
  list_options selectors;
  std::uint64_t resource_version = 0; ///< 0: start with the current state
  bool bookmarks = false;             ///< allowWatchBookmarks
  std::optional<std::int64_t> timeout_seconds;
};

/// nullopt (and a 404 Status in `error`) when the path names no collection.
std::optional<watch_target> resolve_watch(const object_store& store,
                                          const std::string& path,
                                          const std::map<std::string, std::string>& query,
                                          api_status& error);

/// One event of a watch stream as kube-apiserver writes it, type first,
/// without the line's newline: {"type":"ADDED","object":{...}}. The object
/// is written out in place, not copied into a new document.
std::string watch_event_line(std::string_view type, const json& object);

/// "a=1&b=%2F" → {a: "1", b: "/"}; '+' reads as a space.
std::map<std::string, std::string> parse_query(std::string_view query);
/// A query's "watch" is "true" or "1".
bool is_watch(const std::map<std::string, std::string>& query);

} // namespace vigil::kube
