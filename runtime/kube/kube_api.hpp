// The Kubernetes API as vigil's client sees it: requests, responses, typed
// errors carrying the Status object's reason and message, and resource paths.
// Plain data; the transport is kube_client_curl.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace vigil::kube {

/// A resource type as it appears in URLs: ("", "v1", "nodes"),
/// ("policy", "v1", "poddisruptionbudgets"), ("vigil.dev", "v1alpha1", "gpuresets").
struct api_resource {
  std::string group;
  std::string version = "v1";
  std::string plural;
  bool namespaced = true;
};

/// /api/v1/namespaces/<ns>/pods/<name>/eviction and the like. `ns` is ignored
/// for cluster-scoped resources; an empty `name` addresses the collection;
/// an empty `ns` on a namespaced resource lists across namespaces.
std::string resource_path(const api_resource& resource, std::string_view ns = {},
                          std::string_view name = {}, std::string_view subresource = {});

/// Percent-encodes a query value ("spec.nodeName=a,b" → "spec.nodeName%3Da%2Cb").
std::string query_escape(std::string_view value);

namespace content_type {
constexpr const char* json = "application/json";
constexpr const char* merge_patch = "application/merge-patch+json";
constexpr const char* json_patch = "application/json-patch+json";
constexpr const char* strategic_merge_patch = "application/strategic-merge-patch+json";
} // namespace content_type

struct kube_request {
  std::string verb = "GET"; ///< GET, POST, PUT, PATCH, DELETE
  std::string path;         ///< from resource_path
  std::string query;        ///< without '?', already escaped
  std::string body;
  std::string content_type = content_type::json;
  std::chrono::milliseconds timeout{30000}; ///< whole request; 0 = none (watches)
  /// 429 is retried inside the client unless the caller handles it itself: an
  /// eviction refused by a PodDisruptionBudget is the drain's to retry.
  bool retry_throttled = true;
  /// Sent before every request that is not: the cordon and taints that take
  /// a failing node out of scheduling must not wait behind drains, Events and
  /// status updates when the client is at its connection or rate limit.
  bool urgent = false;
  /// GET, PUT, PATCH and DELETE are retried on 5xx and timeouts; POST only
  /// on 429 and connection failures before anything was sent.
  bool idempotent() const { return verb != "POST"; }
};

/// A request with the common fields filled in.
inline kube_request make_request(std::string verb, std::string path,
                                 std::string body = {}, std::string query = {}) {
  kube_request r;
  r.verb = std::move(verb);
  r.path = std::move(path);
  r.body = std::move(body);
  r.query = std::move(query);
  return r;
}

struct kube_response {
  long status = 0; ///< HTTP status
  std::string body;
};

/// A failed request: the HTTP status (0 for a transport failure: connection
/// refused, TLS, timeout) and, when the server sent a Status object, its
/// reason and message.
struct kube_error {
  long status = 0;
  std::string reason;  ///< "NotFound", "Conflict", "TooManyRequests", … or "Transport"
  std::string message; ///< the Status message, or curl's description
  std::optional<std::chrono::seconds> retry_after;

  bool not_found() const { return status == 404; }
  /// 409: the caller must re-read the object and try again (or it exists).
  bool conflict() const { return status == 409; }
  bool gone() const { return status == 410; }
  bool throttled() const { return status == 429; }
  /// Worth retrying: transport failures, 429, 5xx.
  bool retryable() const { return status == 0 || status == 429 || status >= 500; }
  std::string to_string() const;
};

/// Builds the error for a non-2xx response: decodes a Status body when there
/// is one, else uses the HTTP status line; never throws on garbage.
kube_error error_from_response(const kube_response& response,
                               std::optional<std::chrono::seconds> retry_after = {});

/// A response or an error.
class kube_result {
public:
  kube_result() = default;
  kube_result(kube_response r) : value_(std::move(r)) {}
  kube_result(kube_error e) : value_(std::move(e)) {}
  bool ok() const { return value_.index() == 0; }
  const kube_response& response() const { return std::get<0>(value_); }
  const kube_error& error() const { return std::get<1>(value_); }

private:
  std::variant<kube_response, kube_error> value_;
};

/// Parses "Retry-After: 3" (seconds; HTTP dates are treated as 1 s).
std::optional<std::chrono::seconds> parse_retry_after(std::string_view value);

} // namespace vigil::kube
