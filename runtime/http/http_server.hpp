// The control plane's HTTP/1.1 server (ingest POST /v1/events, /metrics,
// /healthz, /readyz): asynchronous Boost.Beast behind a plain interface, so
// that callers never see Asio and a handler may answer later from an actor.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "messages/expected.hpp"

namespace vigil::http {

/// One complete request, as the handler sees it.
struct request {
  std::string method; ///< "POST"
  std::string target; ///< "/v1/events?x=1"
  std::string path;   ///< "/v1/events"
  std::string query;  ///< "x=1" (no '?')
  /// Keys lower-cased; a repeated field is joined with ", " (RFC 9110 §5.3).
  std::map<std::string, std::string> headers;
  std::string body;
  std::string peer; ///< "127.0.0.1:53122", "[::1]:53122"

  /// The value of a header by its lower-case name; "" when absent.
  std::string header(const std::string& lower_name) const;
};

/// The open body of a streamed response (Server-Sent Events): chunks go out
/// in the order sent, on the connection's own strand. Every call is
/// thread-safe and harmless once the client has gone.
class body_stream {
public:
  virtual ~body_stream() = default;
  /// Queues `chunk` for writing; false when the stream is closed.
  virtual bool send(std::string chunk) = 0;
  /// Bytes queued and not yet written: a sender that sees them grow (a slow
  /// client) should skip rather than queue without bound.
  virtual std::size_t pending_bytes() const = 0;
  virtual bool closed() const = 0;
  /// Ends the response: the connection closes once the queue is written.
  virtual void end() = 0;
  /// `callback` runs once when the connection closes (the client left, a
  /// write failed or timed out, end(), the server stopped), on an I/O
  /// thread; at once when it is closed already. One callback; a later call
  /// replaces it.
  virtual void on_close(std::function<void()> callback) = 0;
};

/// Given the stream once the response's header (and `body`) are written.
using stream_starter = std::function<void(std::shared_ptr<body_stream>)>;

/// What the handler answers. Content-Length and Connection are the server's:
/// extra headers by those names (or Transfer-Encoding), and names or values
/// that are not valid HTTP, are dropped.
struct response {
  response() = default;
  response(int status, std::string content_type,
           std::vector<std::pair<std::string, std::string>> headers, std::string body)
    : status(status), content_type(std::move(content_type)), headers(std::move(headers)),
      body(std::move(body)) {}

  int status = 200; ///< 200..599; anything else is sent as 500
  std::string content_type = "application/json";            ///< omitted when empty
  std::vector<std::pair<std::string, std::string>> headers; ///< {"Retry-After", "2"}
  std::string body;
  /// Set: the body does not end with `body`. The connection stays open, its
  /// end delimits the response (no Content-Length, Connection: close), and
  /// `stream` gets the rest of it. Not for HEAD, which gets the header only.
  stream_starter stream;
};

/// A text/plain (UTF-8) response: health checks, errors, short answers.
response plain_text(int status, std::string text);

/// Sends the response; callable exactly once, from any thread (an actor will
/// call it later). Calls after the first, after the connection closed or after
/// the server stopped are harmless no-ops. When the last copy is destroyed
/// without having been called, the client gets 500 so its connection is not
/// left waiting.
using responder = std::function<void(response)>;

/// Called on an I/O thread, concurrently when `threads` > 1; must not block.
/// An exception it throws before answering becomes a 500.
using handler = std::function<void(request, responder)>;

struct server_counters;

struct server_options {
  std::string address = "127.0.0.1"; ///< IPv4 or IPv6 literal to listen on
  std::uint16_t port = 0;            ///< 0 = pick a free port (see server::port)
  std::string cert_pem, key_pem; ///< both set → HTTPS (TLS 1.2+); both empty → HTTP
  /// A larger body is answered 413 without calling the handler (and unread).
  std::size_t max_body_bytes = 8 * 1024 * 1024;
  std::size_t max_header_bytes = 16 * 1024; ///< request line + fields; more → 431
  /// Closes keep-alive connections idle this long; also bounds reading one
  /// request and writing one response.
  std::chrono::seconds idle_timeout{60};
  std::chrono::seconds handshake_timeout{10}; ///< TLS handshake
  /// More concurrent connections are accepted and closed at once (counted).
  std::size_t max_connections = 4096;
  int threads = 1; ///< I/O threads
  /// Where the server counts (shared with a /metrics endpoint); null: its own.
  std::shared_ptr<server_counters> counters;
};

/// A request the server cannot read, as it answers it: 413 (body over
/// max_body_bytes), 431 (header over max_header_bytes) or 400 (not HTTP/1.x),
/// with the reason sent as text.
struct unreadable_request {
  int status = 400;
  std::string reason;
};

/// Reads one request from `bytes` as a connection of a server with `options`
/// reads it (the same parser, limits, chunked bodies and conversion); for
/// tests and fuzzing. Bytes that end before the request does are a 400
/// ("partial message"); bytes after it are left alone.
std::variant<request, unreadable_request> read_request(std::string_view bytes,
                                                       const server_options& options);

/// What the server counts, from its I/O threads. Shared, so that a /metrics
/// endpoint set up before the server starts can read them (server_options::
/// counters); each read is atomic, the set is not a snapshot.
struct server_counters {
  std::atomic<std::uint64_t> connections{0}; ///< accepted and served
  std::atomic<std::uint64_t> requests{0};    ///< complete, given to the handler
  std::atomic<std::uint64_t> rejected_too_large{
    0};                                       ///< answered 413 (body) or 431 (header)
  std::atomic<std::uint64_t> bad_requests{0}; ///< malformed HTTP, answered 400
  /// The client ended the connection mid-request (a truncated body, chunked
  /// or not): answered 400 if it still listens, never given to the handler.
  std::atomic<std::uint64_t> incomplete_requests{0};
  /// A request still unread when the deadline (idle_timeout) came: a client
  /// trickling its header or body (slowloris), closed.
  std::atomic<std::uint64_t> slow_requests{0};
  std::atomic<std::uint64_t> tls_failures{0}; ///< failed or timed-out TLS handshakes
  std::atomic<std::uint64_t> rejected_connections{
    0}; ///< closed at once: over max_connections
  std::atomic<std::uint64_t> active_connections{0}; ///< open now (a gauge)
};

/// The counters' values at one moment, field by field.
struct server_stats {
  std::uint64_t connections = 0;
  std::uint64_t requests = 0;
  std::uint64_t rejected_too_large = 0;
  std::uint64_t bad_requests = 0;
  std::uint64_t incomplete_requests = 0;
  std::uint64_t slow_requests = 0;
  std::uint64_t tls_failures = 0;
  std::uint64_t rejected_connections = 0;
  std::uint64_t active_connections = 0;
};

server_stats read_counters(const server_counters& counters);

class server {
public:
  /// Binds, listens and starts the I/O threads; a bad address, a busy port or
  /// an unusable certificate fails naming it.
  static expected<std::unique_ptr<server>> start(server_options options,
                                                 handler on_request);

  server(const server&) = delete;
  server& operator=(const server&) = delete;
  ~server(); ///< stop()

  /// The bound port (the one picked when options.port was 0).
  std::uint16_t port() const;
  server_stats stats() const;
  /// Serves new connections with this certificate and key from now on (open
  /// ones keep theirs); an unusable pair fails naming it and changes
  /// nothing, as does a server started without TLS. Any thread.
  status reload_tls(const std::string& cert_pem, const std::string& key_pem);
  /// Closes the listener and every connection, answered or not, and joins the
  /// I/O threads; idempotent. Must not be called from the handler.
  void stop();

private:
  class impl;
  explicit server(std::unique_ptr<impl> state);
  std::unique_ptr<impl> impl_;
};

/// Loads a PEM file's text; a missing, unreadable or non-PEM file fails
/// naming the path.
expected<std::string> read_pem_file(const std::string& path);

} // namespace vigil::http
