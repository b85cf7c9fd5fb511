// The Kubernetes API client: requests and watch streams over libcurl's multi
// interface on one dedicated I/O thread (connection reuse, HTTP/1.1 and TLS),
// with a QPS + burst limiter, retries with backoff and jitter honouring
// Retry-After, and per-request timeouts. Handlers run on the I/O thread and
// must be quick: the gateway actor turns them into messages.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>

#include "runtime/kube/kube_api.hpp"
#include "runtime/kube/kube_config.hpp"
#include "runtime/kube/request_pacing.hpp"

namespace vigil::kube {

struct kube_client_options {
  double qps = 50;    ///< requests per second; <= 0 turns the limiter off
  double burst = 100; ///< requests allowed at once above the rate
  backoff_policy backoff;
  std::chrono::milliseconds connect_timeout{10000};
  std::string user_agent = "vigil";
};

class kube_client {
public:
  using response_handler = std::function<void(kube_result)>;
  /// One complete line of a watch stream (one JSON event), without '\n'.
  using line_handler = std::function<void(std::string_view line)>;
  /// The stream ended: nullopt when the server closed it cleanly, else why
  /// (an HTTP error with its Status, a transport failure, or a stream that
  /// stopped inside a line: reason "TruncatedWatchLine").
  using end_handler = std::function<void(std::optional<kube_error>)>;

  virtual ~kube_client() = default;

  /// Sends `request`; `done` runs once, with the response (2xx) or the error
  /// after retries are exhausted.
  virtual void send(kube_request request, response_handler done) = 0;

  /// Opens a watch (the request's query should carry watch=1); returns an id
  /// for stop_watch. Watches are not rate limited or retried here: the
  /// gateway resumes them from the last resourceVersion.
  virtual std::uint64_t watch(kube_request request, line_handler on_line,
                              end_handler on_end) = 0;
  /// Closes a watch; its end handler is not called afterwards.
  virtual void stop_watch(std::uint64_t id) = 0;
};

/// The libcurl implementation. Fails when the connection settings cannot be
/// used (bad server URL, unreadable CA file).
expected<std::unique_ptr<kube_client>> make_kube_client_curl(kube_connection connection,
                                                             kube_client_options options);

} // namespace vigil::kube
