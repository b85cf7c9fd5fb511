// What the HTTP server's source files share, and nothing outside them
// includes: the Boost aliases, the registry of open connections, the state
// every connection reaches, and the helpers one part offers the others.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/http.hpp>

#include "runtime/http/http_server.hpp"

namespace vigil::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace wire = boost::beast::http;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

namespace detail {

using wire_request = wire::request<wire::string_body>;
using wire_response = wire::response<wire::string_body>;
using request_parser = wire::request_parser<wire::string_body>;

/// Puts the server's header and body limits on a fresh parser.
void apply_limits(request_parser& parser, const server_options& options);

/// How the server answers a request it could not read (`ec` from reading
/// it); nullopt when nobody is left to answer: the client left, timed out
/// or broke TLS.
std::optional<unreadable_request> answer_to_read_error(error_code ec,
                                                       const server_options& options);

/// What the registry and responders know of a connection; both calls are
/// thread-safe (they post onto the connection's strand).
class connection {
public:
  virtual ~connection() = default;
  /// Writes the answer to request number `sequence`, if still awaited.
  virtual void deliver(std::uint64_t sequence, response answer) = 0;
  virtual void close() = 0;
  /// A streamed response's next chunk, and its end.
  virtual void stream_chunk(std::string chunk) = 0;
  virtual void stream_end() = 0;
};

/// What a streamed response's body_stream and its connection share.
struct stream_progress {
  std::atomic<std::size_t> pending{0}; ///< queued, not yet written
  std::atomic<bool> closed{false};
  std::mutex mutex; ///< guards on_close and, with it, the closing
  std::function<void()> on_close;

  /// Marks the stream closed and runs the callback once.
  void close() {
    std::function<void()> callback;
    {
      std::lock_guard<std::mutex> guard(mutex);
      if (closed.exchange(true))
        return;
      callback = std::move(on_close);
    }
    if (callback)
      callback();
  }

  void set_on_close(std::function<void()> callback) {
    {
      std::lock_guard<std::mutex> guard(mutex);
      if (!closed) {
        on_close = std::move(callback);
        return;
      }
    }
    callback();
  }
};

// Outlives the server (responders share it), so that an actor answering after
// stop() finds `stopped` instead of a destroyed io_context.
struct connection_registry {
  std::mutex mutex;
  bool stopped = false;
  std::unordered_map<const connection*, std::shared_ptr<connection>> open;
};

struct server_core {
  server_options options;
  handler on_request;
  // The TLS context a new connection takes (null: plain HTTP); replaced
  // whole by server::reload_tls, while each open connection keeps its own.
  std::shared_ptr<asio::ssl::context> tls;
  mutable std::mutex tls_mutex;
  std::shared_ptr<server_counters> counters = std::make_shared<server_counters>();
  std::shared_ptr<connection_registry> registry = std::make_shared<connection_registry>();

  std::shared_ptr<asio::ssl::context> current_tls() const {
    std::lock_guard<std::mutex> guard(tls_mutex);
    return tls;
  }

  void forget(const connection* closed) {
    std::lock_guard<std::mutex> guard(registry->mutex);
    if (registry->open.erase(closed) > 0)
      --counters->active_connections;
  }
};

// Between the wire and the handler (http_message_conversion.cpp).

/// The handler's view of a request read from `peer`.
request to_request(wire_request&& message, const std::string& peer);
/// The handler's answer as sent: an invalid status becomes 500, and header
/// fields that are not valid HTTP or that frame the message are dropped.
wire_response to_wire(response r, unsigned version, bool keep_alive, bool head);
/// "127.0.0.1:53122", "[::1]:53122".
std::string endpoint_text(const tcp::endpoint& endpoint);

// Options and TLS (http_server_setup.cpp).

/// Checks the options start() cannot work with, naming the field.
status validate(const server_options& o);
/// A TLS 1.2+ server context from options' cert_pem and key_pem.
expected<asio::ssl::context> make_tls_context(const server_options& o);

// Connections (http_session.cpp).

/// Registers and starts a session over `socket` (TLS when core.tls is set);
/// does nothing once the server is stopping.
void open_session(server_core& core, tcp::socket&& socket, std::string peer);

} // namespace detail
} // namespace vigil::http
