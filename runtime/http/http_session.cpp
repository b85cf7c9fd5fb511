// One client connection from accept to close: the TLS handshake, reading one
// request at a time, handing it to the handler with a responder, writing the
// answer, and closing gracefully. Each connection runs on its own strand (the
// socket's executor), so its state needs no lock.
#include "runtime/http/http_server_internal.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>

#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

namespace vigil::http::detail {

namespace {

using plain_stream = beast::tcp_stream;
using tls_stream = beast::ssl_stream<beast::tcp_stream>;

// After a response that ends the connection, what the client still sends is
// read and discarded for at most this long and this much before closing, so
// that the close does not reset the connection before the client has read
// the response (RFC 9112 §9.6).
constexpr std::chrono::seconds linger_time{5};
constexpr std::size_t linger_bytes = 1024 * 1024;

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

// The handler's end of a streamed response: chunks are posted to the
// connection, which writes them in order; nothing is sent after the close.
class connection_stream : public body_stream {
public:
  connection_stream(std::shared_ptr<connection_registry> registry,
                    std::weak_ptr<connection> target,
                    std::shared_ptr<stream_progress> progress)
    : registry_(std::move(registry)), target_(std::move(target)),
      progress_(std::move(progress)) {}

  bool send(std::string chunk) override {
    if (progress_->closed)
      return false;
    progress_->pending += chunk.size();
    std::lock_guard<std::mutex> guard(registry_->mutex);
    auto target = target_.lock();
    if (registry_->stopped || !target)
      return false;
    target->stream_chunk(std::move(chunk));
    return true;
  }

  std::size_t pending_bytes() const override { return progress_->pending; }
  bool closed() const override { return progress_->closed; }
  void on_close(std::function<void()> callback) override {
    progress_->set_on_close(std::move(callback));
  }

  void end() override {
    std::lock_guard<std::mutex> guard(registry_->mutex);
    if (auto target = target_.lock(); target && !registry_->stopped)
      target->stream_end();
  }

private:
  std::shared_ptr<connection_registry> registry_;
  std::weak_ptr<connection> target_;
  std::shared_ptr<stream_progress> progress_;
};

/// One client connection: reads a request, waits for its responder, writes
/// the response, and only then reads the next (pipelined bytes wait in the
/// buffer). Every member is touched only on the connection's strand.
template <class Stream>
class session : public connection, public std::enable_shared_from_this<session<Stream>> {
  static constexpr bool is_tls = std::is_same_v<Stream, tls_stream>;

public:
  session(server_core& core, tcp::socket&& socket, std::string peer)
    : core_(core), tls_(is_tls ? core.current_tls() : nullptr),
      stream_(make_stream(tls_.get(), std::move(socket))),
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

  void stream_chunk(std::string chunk) override {
    asio::post(executor_,
               [self = this->shared_from_this(), chunk = std::move(chunk)]() mutable {
                 self->queue_chunk(std::move(chunk));
               });
  }

  void stream_end() override {
    asio::post(executor_, [self = this->shared_from_this()] {
      self->ending_ = true;
      if (!self->writing_ && self->outbox_.empty())
        self->close_now();
    });
  }

private:
  static Stream make_stream([[maybe_unused]] asio::ssl::context* tls,
                            tcp::socket&& socket) {
    if constexpr (is_tls)
      return Stream(std::move(socket), *tls);
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
      ++core_.counters->tls_failures;
    if (closed_)
      return;
    if (ec)
      return close_now();
    read_header();
  }

  void read_header() {
    parser_.emplace();
    apply_limits(*parser_, core_.options);
    transport().expires_after(core_.options.idle_timeout);
    wire::async_read_header(stream_, buffer_, *parser_,
                            [self = this->shared_from_this()](
                              error_code ec, std::size_t) { self->on_header(ec); });
  }

  void on_header(error_code ec) {
    count_if_slow(ec);
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
    count_if_slow(ec);
    if (closed_)
      return;
    if (ec)
      return on_read_error(ec);
    hand_over(parser_->release());
  }

  // A request begun and not finished in time, counted even when stop()
  // closed the connection before this handler ran (the client saw the
  // timeout's close first), as on_handshake counts a TLS failure.
  void count_if_slow(error_code ec) {
    if (ec == beast::error::timeout
        && (buffer_.size() > 0 || (parser_ && parser_->got_some())))
      ++core_.counters->slow_requests;
  }

  void on_read_error(error_code ec) {
    auto& counted = *core_.counters;
    auto answer = answer_to_read_error(ec, core_.options);
    if (!answer)
      return close_now(); // the client left, timed out or broke TLS
    if (ec == wire::error::partial_message)
      ++counted.incomplete_requests;
    else if (answer->status == 400)
      ++counted.bad_requests;
    else
      ++counted.rejected_too_large;
    reject(answer->status, std::move(answer->reason));
  }

  void hand_over(wire_request message) {
    parser_.reset();
    ++core_.counters->requests;
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
    if (answer.stream && !head_)
      return start_stream(std::move(answer));
    write(to_wire(std::move(answer), version_, keep_alive_, head_), !keep_alive_);
  }

  // A streamed response: the header and first body without a length, then
  // chunks as the handler's stream sends them, until either side ends it.
  // Reading goes on only to notice the client leaving.
  void start_stream(response answer) {
    auto starter = std::move(answer.stream);
    auto head = to_wire(std::move(answer), version_, false, false);
    head.erase(wire::field::content_length);
    reply_.emplace(std::move(head));
    progress_ = std::make_shared<stream_progress>();
    writing_ = true;
    transport().expires_after(core_.options.idle_timeout);
    wire::async_write(stream_, *reply_,
                      [self = this->shared_from_this(),
                       starter = std::move(starter)](error_code ec, std::size_t) {
                        self->reply_.reset();
                        self->writing_ = false;
                        if (self->closed_)
                          return;
                        if (ec)
                          return self->close_now();
                        self->watch_for_close();
                        self->next_chunk();
                        starter(std::make_shared<connection_stream>(
                          self->core_.registry, self->weak_from_this(), self->progress_));
                      });
  }

  void watch_for_close() {
    buffer_.clear();
    stream_.async_read_some(buffer_.prepare(4096), [self = this->shared_from_this()](
                                                     error_code ec, std::size_t) {
      if (self->closed_)
        return;
      if (ec)
        return self->close_now();
      self->watch_for_close(); // a client has nothing to say
    });
  }

  void queue_chunk(std::string chunk) {
    if (closed_ || ending_ || !progress_) {
      if (progress_)
        progress_->pending -= std::min(progress_->pending.load(), chunk.size());
      return;
    }
    outbox_.push_back(std::move(chunk));
    if (!writing_)
      next_chunk();
  }

  // Writes the oldest queued chunk; a client that reads nothing for the idle
  // timeout is closed, and no timer runs while there is nothing to write.
  void next_chunk() {
    if (outbox_.empty()) {
      transport().expires_never();
      // Everything is written and the client sends nothing (what it did send
      // was read), so closing now loses nothing.
      if (ending_)
        close_now();
      return;
    }
    writing_ = true;
    transport().expires_after(core_.options.idle_timeout);
    asio::async_write(stream_, asio::buffer(outbox_.front()),
                      [self = this->shared_from_this()](error_code ec, std::size_t) {
                        self->writing_ = false;
                        self->progress_->pending -= std::min(
                          self->progress_->pending.load(), self->outbox_.front().size());
                        self->outbox_.pop_front();
                        if (self->closed_)
                          return;
                        if (ec)
                          return self->close_now();
                        self->next_chunk();
                      });
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
    if (progress_)
      progress_->close();
    transport().close();
    core_.forget(this);
  }

  server_core& core_;
  std::shared_ptr<asio::ssl::context> tls_; // the certificate it was opened with
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
  // A streamed response: what its body_stream shares, the chunks not yet
  // written, whether one is being written, and whether the handler ended it.
  std::shared_ptr<stream_progress> progress_;
  std::deque<std::string> outbox_;
  bool writing_ = false;
  bool ending_ = false;
  std::size_t drained_ = 0;
};

template <class Stream>
void open_as(server_core& core, tcp::socket&& socket, std::string peer) {
  auto s = std::make_shared<session<Stream>>(core, std::move(socket), std::move(peer));
  {
    std::lock_guard<std::mutex> guard(core.registry->mutex);
    if (core.registry->stopped)
      return;
    core.registry->open.emplace(s.get(), s);
    ++core.counters->active_connections;
  }
  ++core.counters->connections;
  s->start();
}

} // namespace

void open_session(server_core& core, tcp::socket&& socket, std::string peer) {
  if (core.current_tls())
    open_as<tls_stream>(core, std::move(socket), std::move(peer));
  else
    open_as<plain_stream>(core, std::move(socket), std::move(peer));
}

} // namespace vigil::http::detail
