// One io_context, one strand per connection (the socket's executor), so that
// per-connection state needs no lock. The only shared, locked state is the
// registry of open connections, which stop() closes and late responders check.
#include "runtime/http/http_server.hpp"

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>
#include <unordered_map>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

namespace vigil::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace wire = boost::beast::http;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

std::string request::header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? std::string{} : it->second;
}

namespace {

using plain_stream = beast::tcp_stream;
using tls_stream = beast::ssl_stream<beast::tcp_stream>;
using wire_request = wire::request<wire::string_body>;
using wire_response = wire::response<wire::string_body>;

// After a response that ends the connection, what the client still sends is
// read and discarded for at most this long and this much before closing, so
// that the close does not reset the connection before the client has read
// the response (RFC 9112 §9.6).
constexpr std::chrono::seconds linger_time{5};
constexpr std::size_t linger_bytes = 1024 * 1024;
// Pause before accepting again after accept() failed (EMFILE and the like).
constexpr std::chrono::milliseconds accept_retry_delay{100};

struct counters {
  std::atomic<std::uint64_t> connections{0}, requests{0}, rejected_too_large{0},
    bad_requests{0}, tls_failures{0}, rejected_connections{0}, active_connections{0};
};

/// What the registry and responders know of a connection; both calls are
/// thread-safe (they post onto the connection's strand).
class connection {
public:
  virtual ~connection() = default;
  /// Writes the answer to request number `sequence`, if still awaited.
  virtual void deliver(std::uint64_t sequence, response answer) = 0;
  virtual void close() = 0;
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
  std::optional<asio::ssl::context> tls;
  counters stats;
  std::shared_ptr<connection_registry> registry = std::make_shared<connection_registry>();

  void forget(const connection* closed) {
    std::lock_guard<std::mutex> guard(registry->mutex);
    if (registry->open.erase(closed) > 0)
      --stats.active_connections;
  }
};

// The state behind one request's responder: the first answer wins, and a
// responder dropped unanswered answers 500 so the client is not left hanging.
class reply_ticket {
public:
  reply_ticket(std::shared_ptr<connection_registry> registry,
               std::weak_ptr<connection> target, std::uint64_t sequence)
    : registry_(std::move(registry)), target_(std::move(target)), sequence_(sequence) {}

  reply_ticket(const reply_ticket&) = delete;
  reply_ticket& operator=(const reply_ticket&) = delete;

  ~reply_ticket() {
    if (!answered_.exchange(true))
      send(plain_text(500, "internal error: the request was dropped unanswered"));
  }

  void answer(response r) {
    if (!answered_.exchange(true))
      send(std::move(r));
  }

private:
  void send(response r) noexcept {
    try {
      // Under the lock, stop() cannot tear the I/O down between lock() and post.
      std::lock_guard<std::mutex> guard(registry_->mutex);
      if (registry_->stopped)
        return;
      if (auto target = target_.lock())
        target->deliver(sequence_, std::move(r));
    } catch (...) {
      // Out of memory: the connection times out or is closed by stop().
    }
  }

  std::shared_ptr<connection_registry> registry_;
  std::weak_ptr<connection> target_;
  std::uint64_t sequence_;
  std::atomic<bool> answered_{false};
};

std::string lower(beast::string_view text) {
  std::string out(text);
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

request to_request(wire_request&& message, const std::string& peer) {
  request r;
  r.method = std::string(message.method_string());
  r.target = std::string(message.target());
  const auto mark = r.target.find('?');
  r.path = r.target.substr(0, mark);
  r.query = mark == std::string::npos ? "" : r.target.substr(mark + 1);
  for (const auto& field : message) {
    const auto value = field.value();
    auto [it, added] = r.headers.emplace(lower(field.name_string()),
                                         std::string(value.data(), value.size()));
    if (!added)
      it->second.append(", ").append(value.data(), value.size());
  }
  r.body = std::move(message.body());
  r.peer = peer;
  return r;
}

bool valid_field_name(const std::string& name) {
  static constexpr beast::string_view extra = "!#$%&'*+-.^_`|~";
  if (name.empty())
    return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && extra.find(c) == extra.npos)
      return false;
  return true;
}

bool valid_field_value(const std::string& value) {
  return value.find_first_of(std::string("\r\n\0", 3)) == std::string::npos;
}

// Fields that frame the message: only the server may set them.
bool framing_field(const std::string& name) {
  return beast::iequals(name, "content-length") || beast::iequals(name, "connection")
         || beast::iequals(name, "transfer-encoding");
}

wire_response to_wire(response r, unsigned version, bool keep_alive, bool head) {
  if (r.status < 200 || r.status > 599)
    r = plain_text(500, "internal error: invalid status " + std::to_string(r.status));
  wire_response out{static_cast<wire::status>(r.status), version};
  if (!r.content_type.empty() && valid_field_value(r.content_type))
    out.set(wire::field::content_type, r.content_type);
  for (const auto& [name, value] : r.headers)
    if (valid_field_name(name) && valid_field_value(value) && !framing_field(name))
      out.insert(name, value);
  out.keep_alive(keep_alive);
  if (r.status != 204 && r.status != 304) { // RFC 9110 §8.6: these carry no length
    out.content_length(r.body.size());
    if (!head)
      out.body() = std::move(r.body);
  }
  return out;
}

std::string endpoint_text(const tcp::endpoint& endpoint) {
  const auto address = endpoint.address().to_string();
  const auto port = std::to_string(endpoint.port());
  return endpoint.address().is_v6() ? "[" + address + "]:" + port : address + ":" + port;
}

/// One client connection: reads a request, waits for its responder, writes
/// the response, and only then reads the next (pipelined bytes wait in the
/// buffer). Every member is touched only on the connection's strand.
template <class Stream>
class session : public connection, public std::enable_shared_from_this<session<Stream>> {
  static constexpr bool is_tls = std::is_same_v<Stream, tls_stream>;

public:
  session(server_core& core, tcp::socket&& socket, std::string peer)
    : core_(core), stream_(make_stream(core, std::move(socket))),
      executor_(stream_.get_executor()), peer_(std::move(peer)) {}

  void start() {
    asio::post(executor_, [self = this->shared_from_this()] {
      if constexpr (is_tls)
        self->handshake();
      else
        self->read_header();
    });
  }

  void deliver(std::uint64_t sequence, response answer) override {
    asio::post(executor_, [self = this->shared_from_this(), sequence,
                           answer = std::move(answer)]() mutable {
      self->on_answer(sequence, std::move(answer));
    });
  }

  void close() override {
    asio::post(executor_, [self = this->shared_from_this()] { self->close_now(); });
  }

private:
  static Stream make_stream(server_core& core, tcp::socket&& socket) {
    if constexpr (is_tls)
      return Stream(std::move(socket), *core.tls);
    else
      return Stream(std::move(socket));
  }

  beast::tcp_stream& transport() { return beast::get_lowest_layer(stream_); }

  void handshake() {
    transport().expires_after(core_.options.handshake_timeout);
    stream_.async_handshake(
      asio::ssl::stream_base::server,
      [self = this->shared_from_this()](error_code ec) { self->on_handshake(ec); });
  }

  void on_handshake(error_code ec) {
    // A handshake that timed out is a TLS failure even when stop() closed the
    // connection before this handler ran; one aborted by stop() is not.
    if (ec == beast::error::timeout || (ec && !closed_))
      ++core_.stats.tls_failures;
    if (closed_)
      return;
    if (ec)
      return close_now();
    read_header();
  }

  void read_header() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(core_.options.max_header_bytes));
    parser_->body_limit(static_cast<std::uint64_t>(core_.options.max_body_bytes));
    transport().expires_after(core_.options.idle_timeout);
    wire::async_read_header(stream_, buffer_, *parser_,
                            [self = this->shared_from_this()](
                              error_code ec, std::size_t) { self->on_header(ec); });
  }

  void on_header(error_code ec) {
    if (closed_)
      return;
    if (ec)
      return on_read_error(ec);
    // A body that exceeds the limit by its Content-Length already failed
    // above; a client that waits for 100 Continue sends it now.
    const auto& head = parser_->get();
    if (head.version() < 11 || !beast::iequals(head[wire::field::expect], "100-continue"))
      return read_body();
    wire::async_write(stream_, continue_,
                      [self = this->shared_from_this()](error_code sent, std::size_t) {
                        if (self->closed_)
                          return;
                        if (sent)
                          return self->close_now();
                        self->read_body();
                      });
  }

  void read_body() {
    wire::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](error_code ec, std::size_t) {
                       self->on_body(ec);
                     });
  }

  void on_body(error_code ec) {
    if (closed_)
      return;
    if (ec)
      return on_read_error(ec);
    hand_over(parser_->release());
  }

  void on_read_error(error_code ec) {
    const auto& options = core_.options;
    if (ec == wire::error::body_limit) {
      ++core_.stats.rejected_too_large;
      return reject(413, "request body exceeds " + std::to_string(options.max_body_bytes)
                           + " bytes");
    }
    if (ec == wire::error::header_limit) {
      ++core_.stats.rejected_too_large;
      return reject(431, "request header exceeds "
                           + std::to_string(options.max_header_bytes) + " bytes");
    }
    if (ec != wire::error::end_of_stream && ec.category() == parse_errors()) {
      ++core_.stats.bad_requests;
      return reject(400, "malformed request: " + ec.message());
    }
    close_now(); // the client left, timed out or broke TLS: nobody to answer
  }

  static const boost::system::error_category& parse_errors() {
    return wire::make_error_code(wire::error::bad_method).category();
  }

  void hand_over(wire_request message) {
    parser_.reset();
    ++core_.stats.requests;
    version_ = message.version();
    keep_alive_ = message.keep_alive();
    head_ = message.method() == wire::verb::head;
    awaiting_ = true;
    transport().expires_never(); // the handler takes the time it needs
    auto ticket =
      std::make_shared<reply_ticket>(core_.registry, this->weak_from_this(), ++sequence_);
    responder answer = [ticket](response r) { ticket->answer(std::move(r)); };
    try {
      core_.on_request(to_request(std::move(message), peer_), answer);
    } catch (...) {
      answer(plain_text(500, "internal error: the handler failed"));
    }
  }

  void on_answer(std::uint64_t sequence, response answer) {
    if (closed_ || !awaiting_ || sequence != sequence_)
      return;
    awaiting_ = false;
    write(to_wire(std::move(answer), version_, keep_alive_, head_), !keep_alive_);
  }

  // Answers an unreadable request and ends the connection.
  void reject(int status, std::string reason) {
    parser_.reset();
    write(to_wire(plain_text(status, std::move(reason)), 11, false, false), true);
  }

  void write(wire_response message, bool last) {
    reply_.emplace(std::move(message));
    transport().expires_after(core_.options.idle_timeout);
    wire::async_write(stream_, *reply_,
                      [self = this->shared_from_this(),
                       last](error_code ec, std::size_t) { self->on_write(ec, last); });
  }

  void on_write(error_code ec, bool last) {
    reply_.reset();
    if (closed_)
      return;
    if (ec)
      return close_now();
    if (last)
      return close_gracefully();
    read_header();
  }

  void close_gracefully() {
    transport().expires_after(
      std::min<std::chrono::seconds>(linger_time, core_.options.idle_timeout));
    if constexpr (is_tls) {
      stream_.async_shutdown(
        [self = this->shared_from_this()](error_code) { self->close_now(); });
    } else {
      error_code ignored;
      transport().socket().shutdown(tcp::socket::shutdown_send, ignored);
      buffer_.clear();
      drain();
    }
  }

  void drain() {
    stream_.async_read_some(buffer_.prepare(16 * 1024), [self = this->shared_from_this()](
                                                          error_code ec, std::size_t n) {
      self->drained_ += n;
      if (ec || self->closed_ || self->drained_ >= linger_bytes)
        return self->close_now();
      self->drain();
    });
  }

  void close_now() {
    if (closed_)
      return;
    closed_ = true;
    transport().close();
    core_.forget(this);
  }

  server_core& core_;
  Stream stream_;
  asio::any_io_executor executor_; // the connection's strand
  std::string peer_;
  beast::flat_buffer buffer_;
  std::optional<wire::request_parser<wire::string_body>> parser_;
  std::optional<wire_response> reply_; // being written
  wire::response<wire::empty_body> continue_{wire::status::continue_, 11};
  std::uint64_t sequence_ = 0; // of the last request handed over
  unsigned version_ = 11;
  bool keep_alive_ = false;
  bool head_ = false;
  bool awaiting_ = false; // the handler has not answered yet
  bool closed_ = false;
  std::size_t drained_ = 0;
};

status validate(const server_options& o) {
  if (o.threads < 1)
    return failure{"threads", "must be at least 1"};
  if (o.max_connections < 1)
    return failure{"max_connections", "must be at least 1"};
  if (o.max_header_bytes < 1 || o.max_header_bytes > UINT32_MAX)
    return failure{"max_header_bytes", "must be between 1 and 4294967295"};
  if (o.idle_timeout.count() <= 0)
    return failure{"idle_timeout", "must be positive"};
  if (o.handshake_timeout.count() <= 0)
    return failure{"handshake_timeout", "must be positive"};
  if (o.cert_pem.empty() != o.key_pem.empty())
    return failure{o.cert_pem.empty() ? "cert_pem" : "key_pem",
                   "cert_pem and key_pem must both be set (HTTPS) or both be empty"};
  return ok();
}

expected<asio::ssl::context> make_tls_context(const server_options& o) {
  asio::ssl::context context{asio::ssl::context::tls_server};
  context.set_options(asio::ssl::context::default_workarounds
                      | asio::ssl::context::no_compression);
  if (SSL_CTX_set_min_proto_version(context.native_handle(), TLS1_2_VERSION) != 1)
    return failure{"http server", "cannot require TLS 1.2"};
  error_code ec;
  context.use_certificate_chain(asio::buffer(o.cert_pem), ec);
  if (ec)
    return failure{"cert_pem", "not a usable certificate chain: " + ec.message()};
  context.use_private_key(asio::buffer(o.key_pem), asio::ssl::context::pem, ec);
  if (ec)
    return failure{"key_pem", "not a usable private key: " + ec.message()};
  if (SSL_CTX_check_private_key(context.native_handle()) != 1)
    return failure{"key_pem", "does not match the certificate"};
  return context;
}

} // namespace

response plain_text(int status, std::string text) {
  return response{status, "text/plain; charset=utf-8", {}, std::move(text)};
}

class server::impl {
public:
  impl(server_options options, handler on_request)
    : io_(options.threads), acceptor_(asio::make_strand(io_)),
      accept_retry_(acceptor_.get_executor()) {
    core_.options = std::move(options);
    core_.on_request = std::move(on_request);
  }

  ~impl() { stop(); }

  status listen() {
    const auto& o = core_.options;
    error_code ec;
    const auto address = asio::ip::make_address(o.address, ec);
    if (ec)
      return failure{"address", "'" + o.address + "' is not an IP address"};
    const tcp::endpoint endpoint{address, o.port};
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec)
      acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec)
      acceptor_.bind(endpoint, ec);
    if (!ec)
      acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
      return failure{"http server",
                     "cannot listen on " + endpoint_text(endpoint) + ": " + ec.message()};
    port_ = acceptor_.local_endpoint(ec).port();
    if (!o.cert_pem.empty()) {
      auto context = make_tls_context(o);
      if (!context)
        return context.error();
      core_.tls.emplace(std::move(*context));
    }
    return ok();
  }

  void run() {
    work_.emplace(io_.get_executor());
    accept_next();
    for (int i = 0; i < core_.options.threads; ++i)
      threads_.emplace_back([this] { run_io(); });
  }

  void stop() {
    std::lock_guard<std::mutex> once(stop_mutex_);
    if (stopped_)
      return;
    stopped_ = true;
    std::vector<std::shared_ptr<connection>> to_close;
    {
      std::lock_guard<std::mutex> guard(core_.registry->mutex);
      core_.registry->stopped = true;
      for (const auto& entry : core_.registry->open)
        to_close.push_back(entry.second);
    }
    asio::post(acceptor_.get_executor(), [this] {
      error_code ignored;
      acceptor_.close(ignored);
      accept_retry_.cancel();
    });
    for (const auto& c : to_close)
      c->close();
    to_close.clear();
    work_.reset();
    for (auto& t : threads_)
      t.join();
    threads_.clear();
    std::lock_guard<std::mutex> guard(core_.registry->mutex);
    core_.registry->open.clear(); // empty already unless threads never started
  }

  server_stats stats() const {
    const auto& c = core_.stats;
    return {c.connections,       c.requests,     c.rejected_too_large,
            c.bad_requests,      c.tls_failures, c.rejected_connections,
            c.active_connections};
  }

  std::uint16_t port() const { return port_; }

private:
  void run_io() {
    for (;;) {
      try {
        io_.run();
        return;
      } catch (...) {
        // Only allocation failures get here; keep serving.
      }
    }
  }

  void accept_next() {
    acceptor_.async_accept(
      asio::make_strand(io_),
      [this](error_code ec, tcp::socket socket) { on_accept(ec, std::move(socket)); });
  }

  void on_accept(error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open())
      return;
    if (ec) {
      accept_retry_.expires_after(accept_retry_delay);
      accept_retry_.async_wait([this](error_code waited) {
        if (!waited && acceptor_.is_open())
          accept_next();
      });
      return;
    }
    admit(std::move(socket));
    accept_next();
  }

  void admit(tcp::socket socket) {
    error_code ec;
    const auto remote = socket.remote_endpoint(ec);
    if (ec)
      return; // gone already
    if (core_.stats.active_connections >= core_.options.max_connections) {
      ++core_.stats.rejected_connections;
      return; // the socket closes as it goes out of scope
    }
    socket.set_option(tcp::no_delay(true), ec);
    if (core_.tls)
      open<tls_stream>(std::move(socket), endpoint_text(remote));
    else
      open<plain_stream>(std::move(socket), endpoint_text(remote));
  }

  template <class Stream>
  void open(tcp::socket&& socket, std::string peer) {
    auto s = std::make_shared<session<Stream>>(core_, std::move(socket), std::move(peer));
    {
      std::lock_guard<std::mutex> guard(core_.registry->mutex);
      if (core_.registry->stopped)
        return;
      core_.registry->open.emplace(s.get(), s);
      ++core_.stats.active_connections;
    }
    ++core_.stats.connections;
    s->start();
  }

  // Declared first: destroyed last, after the io_context's leftover handlers.
  server_core core_;
  asio::io_context io_;
  tcp::acceptor acceptor_; // used on its strand only
  asio::steady_timer accept_retry_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
  std::uint16_t port_ = 0;
  std::mutex stop_mutex_;
  bool stopped_ = false;
};

expected<std::unique_ptr<server>> server::start(server_options options,
                                                handler on_request) {
  if (auto valid = validate(options); !valid)
    return valid.error();
  if (!on_request)
    return failure{"http server", "no request handler"};
  try {
    auto state = std::make_unique<impl>(std::move(options), std::move(on_request));
    if (auto listening = state->listen(); !listening)
      return listening.error();
    state->run();
    return std::unique_ptr<server>(new server(std::move(state)));
  } catch (const std::exception& e) {
    return failure{"http server", std::string("cannot start: ") + e.what()};
  }
}

server::server(std::unique_ptr<impl> state) : impl_(std::move(state)) {}

server::~server() {
  stop();
}

std::uint16_t server::port() const {
  return impl_->port();
}

server_stats server::stats() const {
  return impl_->stats();
}

void server::stop() {
  impl_->stop();
}

expected<std::string> read_pem_file(const std::string& path) {
  std::unique_ptr<std::FILE, decltype(&std::fclose)> file{std::fopen(path.c_str(), "rb"),
                                                          &std::fclose};
  if (!file)
    return failure{path, std::string("cannot open: ") + std::strerror(errno)};
  std::string text;
  char chunk[4096];
  std::size_t n;
  while ((n = std::fread(chunk, 1, sizeof chunk, file.get())) > 0)
    text.append(chunk, n);
  if (std::ferror(file.get()))
    return failure{path, std::string("cannot read: ") + std::strerror(errno)};
  if (text.find("-----BEGIN ") == std::string::npos)
    return failure{path, "not a PEM file (no -----BEGIN line)"};
  return text;
}

} // namespace vigil::http
