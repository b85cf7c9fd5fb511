// Sends one batch of HealthEvents to the control plane: a blocking libcurl POST
// of NDJSON to <url>/v1/events (and the agent's heartbeat to <url>/v1/heartbeat),
// for the forwarder's detached I/O actor.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "messages/expected.hpp"

namespace vigil::agent {

/// How the control plane took a batch. Only a verdict on the events
/// themselves may drop them; an answer about the endpoint, the agent's
/// credentials or the server's state keeps them for another try.
enum class post_outcome {
  accepted,  ///< HTTP 2xx: committed (per-line results may still reject lines)
  retryable, ///< anything that is not a verdict on the events: send it again later
  rejected,  ///< 400/422 listing a verdict per line: the rejected lines are dropped
};

/// Why a post was not accepted, for the logs and the send-failure counters.
enum class post_failure {
  none,        ///< accepted, or rejected line by line
  unreachable, ///< no HTTP answer: connection refused, timeout, DNS, TLS
  credentials, ///< 401, 403, or the token file cannot be read
  endpoint,    ///< 3xx, 404, 405, 415 or a 4xx without per-line verdicts: wrong URL
  too_large,   ///< 413: the batch is over the control plane's limits
  overloaded,  ///< 408, 429, 5xx: the control plane asks to come back later
};

std::string_view to_string(post_failure failure);

/// The control plane's verdict on one line, when its reply lists them.
struct line_result {
  std::string id; ///< the event id, when the reply gives it
  bool accepted = true;
  std::string error; ///< why it was rejected
};

struct post_result {
  post_outcome outcome = post_outcome::retryable;
  post_failure failure_class = post_failure::unreachable;
  long http_status = 0; ///< 0 when no response came
  /// The server's Retry-After (seconds or an HTTP date, as libcurl reads it).
  std::optional<std::chrono::seconds> retry_after;
  /// From a reply body {"results":[{"id":…,"status":"accepted"|"duplicate"|
  /// "rejected","error":…}, …]}, one per line in order; empty otherwise.
  std::vector<line_result> lines;
  /// libcurl's error, or the start of the reply body for a non-2xx status.
  std::string detail;
  /// For a failure: explain_post_failure() of it, ready for the log.
  std::string explanation;
};

/// Parses a reply body's per-line results; empty for a body without them.
std::vector<line_result> parse_line_results(const std::string& body);

/// The outcome and failure class of a reply with HTTP `status` (0 = no
/// response); `has_line_results`: its body lists a verdict per line.
std::pair<post_outcome, post_failure> classify_reply(long status, bool has_line_results);

/// The control plane's base URL from what the operator gave: trailing slashes
/// and a trailing "/v1/events" or "/v1/heartbeat" (the ingest URL that
/// `vigil demo --serve` prints) are taken off.
std::string control_base_url(std::string url);

/// One plain sentence for the log saying what is wrong with a post that was
/// not accepted and what to check, e.g. "the control plane at URL has no
/// /v1/events (HTTP 404): --control-url must be vigil control's base URL".
std::string explain_post_failure(const post_result& result, const std::string& base_url,
                                 const std::string& path);

struct http_poster_options {
  /// The control plane's base URL, e.g. "https://vigil-control.vigil:8443";
  /// "/v1/events" (or "/v1/heartbeat") is appended (control_base_url() first).
  std::string url;
  /// File holding the bearer token (a projected service-account token); read
  /// again whenever its inode, size or mtime changes. Empty: no Authorization.
  std::string token_file;
  /// CA bundle for the server's certificate; empty: the system's.
  std::string ca_file;
  std::chrono::milliseconds connect_timeout{5'000};
  std::chrono::milliseconds request_timeout{30'000};
  std::string user_agent = "vigil-agent";
};

/// One connection (kept alive between posts). Blocking; one thread at a time.
class http_event_poster {
public:
  explicit http_event_poster(http_poster_options options);
  ~http_event_poster();
  http_event_poster(const http_event_poster&) = delete;
  http_event_poster& operator=(const http_event_poster&) = delete;

  /// POSTs `ndjson` (one encoded HealthEvent per line) and classifies the
  /// reply. An unreadable token file is retryable (it may be rotating).
  post_result post(const std::string& ndjson);

  /// POSTs one heartbeat (application/json, the same bearer token) to
  /// <url>/v1/heartbeat; any 2xx is `accepted`.
  post_result post_heartbeat(const std::string& json);

  /// POSTs the node's GPU allocations (messages/gpu_allocations.hpp's JSON) to
  /// <url>/v1/allocations; any 2xx is `accepted`.
  post_result post_allocations(const std::string& json);

  /// Reads the token file if it changed since the last read.
  expected<std::string> current_token();

  /// The base URL posts go to (control_base_url() of the option).
  const std::string& base_url() const { return options_.url; }

private:
  /// exchange() with the failure explained.
  post_result send(const std::string& path, const char* content_type,
                   const std::string& payload);
  /// One POST of `payload` to <url><path>, classified.
  post_result exchange(const std::string& path, const char* content_type,
                       const std::string& payload);

  http_poster_options options_;
  void* curl_ = nullptr; ///< CURL*; kept out of this header
  std::string token_;
  std::string token_stamp_; ///< inode/size/mtime of the file token_ came from
};

} // namespace vigil::agent
