// One io_context, one strand per connection (the socket's executor), so that
// per-connection state needs no lock. The only shared, locked state is the
// registry of open connections, which stop() closes and late responders check.
// This file holds the listener, the I/O threads and stop(); a connection's
// life is in http_session.cpp.
#include "runtime/http/http_server.hpp"

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include "runtime/http/http_server_internal.hpp"

namespace vigil::http {

namespace {

// Pause before accepting again after accept() failed (EMFILE and the like).
constexpr std::chrono::milliseconds accept_retry_delay{100};

} // namespace

class server::impl {
public:
  impl(server_options options, handler on_request)
    : io_(options.threads), acceptor_(asio::make_strand(io_)),
      accept_retry_(acceptor_.get_executor()) {
    if (options.counters)
      core_.counters = options.counters;
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
      return failure{"http server", "cannot listen on " + detail::endpoint_text(endpoint)
                                      + ": " + ec.message()};
    port_ = acceptor_.local_endpoint(ec).port();
    if (!o.cert_pem.empty()) {
      auto context = detail::make_tls_context(o);
      if (!context)
        return context.error();
      core_.tls = std::make_shared<asio::ssl::context>(std::move(*context));
    }
    return ok();
  }

  status reload_tls(const std::string& cert_pem, const std::string& key_pem) {
    if (!core_.current_tls())
      return failure{"http server",
                     "serves plain HTTP: there is no certificate to reload"};
    server_options replacement = core_.options;
    replacement.cert_pem = cert_pem;
    replacement.key_pem = key_pem;
    auto context = detail::make_tls_context(replacement);
    if (!context)
      return context.error();
    auto fresh = std::make_shared<asio::ssl::context>(std::move(*context));
    std::lock_guard<std::mutex> guard(core_.tls_mutex);
    core_.tls = std::move(fresh);
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
    std::vector<std::shared_ptr<detail::connection>> to_close;
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

  server_stats stats() const { return read_counters(*core_.counters); }

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
    if (core_.counters->active_connections >= core_.options.max_connections) {
      ++core_.counters->rejected_connections;
      return; // the socket closes as it goes out of scope
    }
    socket.set_option(tcp::no_delay(true), ec);
    detail::open_session(core_, std::move(socket), detail::endpoint_text(remote));
  }

  // Declared first: destroyed last, after the io_context's leftover handlers.
  detail::server_core core_;
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
  if (auto valid = detail::validate(options); !valid)
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

server_stats read_counters(const server_counters& c) {
  return {
    c.connections,         c.requests,      c.rejected_too_large, c.bad_requests,
    c.incomplete_requests, c.slow_requests, c.tls_failures,       c.rejected_connections,
    c.active_connections};
}

server_stats server::stats() const {
  return impl_->stats();
}

status server::reload_tls(const std::string& cert_pem, const std::string& key_pem) {
  return impl_->reload_tls(cert_pem, key_pem);
}

void server::stop() {
  impl_->stop();
}

} // namespace vigil::http
