// Sends one batch of HealthEvents to the control plane: a blocking libcurl POST
// of NDJSON to <url>/v1/events (and the agent's heartbeat to <url>/v1/heartbeat),
// for the forwarder's detached I/O actor.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "messages/expected.hpp"

namespace vigil::agent {

/// How the control plane took a batch.
enum class post_outcome {
  accepted,  ///< HTTP 2xx: committed (per-line results may still reject lines)
  retryable, ///< no connection, timeout, 401/403/408, 429, 5xx: send it again later
  rejected,  ///< any other 4xx: permanent for this batch; drop it
};

/// The control plane's verdict on one line, when its reply lists them.
struct line_result {
  std::string id; ///< the event id, when the reply gives it
  bool accepted = true;
  std::string error; ///< why it was rejected
};

struct post_result {
  post_outcome outcome = post_outcome::retryable;
  long http_status = 0; ///< 0 when no response came
  /// The server's Retry-After (seconds or an HTTP date, as libcurl reads it).
  std::optional<std::chrono::seconds> retry_after;
  /// From a reply body {"results":[{"id":…,"status":"accepted"|"duplicate"|
  /// "rejected","error":…}, …]}, one per line in order; empty otherwise.
  std::vector<line_result> lines;
  /// libcurl's error, or the start of the reply body for a non-2xx status.
  std::string detail;
};

/// Parses a reply body's per-line results; empty for a body without them.
std::vector<line_result> parse_line_results(const std::string& body);

/// post_outcome for an HTTP status (0 = no response).
post_outcome classify_http_status(long status);

struct http_poster_options {
  /// The control plane's base URL, e.g. "https://vigil-control.vigil:8443";
  /// "/v1/events" (or "/v1/heartbeat") is appended.
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

  /// Reads the token file if it changed since the last read.
  expected<std::string> current_token();

private:
  post_result send(const std::string& path, const char* content_type,
                   const std::string& payload);

  http_poster_options options_;
  void* curl_ = nullptr; ///< CURL*; kept out of this header
  std::string token_;
  std::string token_stamp_; ///< inode/size/mtime of the file token_ came from
};

} // namespace vigil::agent
