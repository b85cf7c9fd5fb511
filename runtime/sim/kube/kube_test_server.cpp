// One thread accepts; one thread per connection serves HTTP/1.1 keep-alive
// requests (Boost.Beast, synchronous), and a watch holds its connection's
// thread while it streams. The store is guarded by one mutex: this is a test
// double, where simple beats fast.
#include "runtime/sim/kube/kube_test_server.hpp"

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <sys/socket.h>
#include <thread>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "runtime/sim/kube/kube_rest.hpp"

namespace vigil::kube {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

namespace {

using request_t = http::request<http::string_body>;

// One line of a watch stream.
std::string watch_line(std::string_view type, const json& object) {
  return watch_event_line(type, object) + "\n";
}

} // namespace

class kube_test_server::impl {
public:
  explicit impl(test_server_options options)
    : options_(std::move(options)), acceptor_(io_), store_(options_.watch_window),
      dice_(options_.fault_seed) {}

  ~impl() { stop(); }

  status listen() {
    boost::system::error_code ec;
    tcp::endpoint endpoint{asio::ip::make_address("127.0.0.1"), 0};
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec)
      acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec)
      acceptor_.bind(endpoint, ec);
    if (!ec)
      acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
      return failure{"kube test server", "cannot listen on 127.0.0.1: " + ec.message()};
    port_ = acceptor_.local_endpoint().port();
    if (options_.tls) {
      tls_.emplace(asio::ssl::context::tls_server);
      tls_->use_certificate_chain(asio::buffer(options_.cert_pem), ec);
      if (!ec)
        tls_->use_private_key(asio::buffer(options_.key_pem), asio::ssl::context::pem,
                              ec);
      if (!ec && !options_.client_ca_pem.empty()) {
        tls_->add_certificate_authority(asio::buffer(options_.client_ca_pem), ec);
        tls_->set_verify_mode(asio::ssl::verify_peer);
      }
      if (ec)
        return failure{"kube test server", "TLS setup: " + ec.message()};
    }
    tokens_ = options_.tokens;
    store_.on_change([this] { ++generation_; });
    accept_thread_ = std::thread([this] { accept_loop(); });
    return ok();
  }

  void stop() {
    {
      std::lock_guard<std::mutex> guard(mutex_);
      if (stopping_)
        return;
      stopping_ = true;
      for (const auto& [id, fd] : open_fds_)
        ::shutdown(fd, SHUT_RDWR);
    }
    changed_.notify_all();
    ::shutdown(acceptor_.native_handle(), SHUT_RDWR);
    if (accept_thread_.joinable())
      accept_thread_.join();
    boost::system::error_code ec;
    acceptor_.close(ec);
    for (auto& [id, t] : connections_)
      t.join();
  }

  std::uint16_t port_ = 0;
  test_server_options options_;
  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::optional<asio::ssl::context> tls_;
  std::thread accept_thread_;
  std::map<std::uint64_t, std::thread> connections_; // accept thread only

  mutable std::mutex mutex_; // guards everything below
  std::condition_variable changed_;
  object_store store_;
  std::uint64_t generation_ = 0, drop_generation_ = 0, bookmark_generation_ = 0;
  int expire_next_resumes_ = 0; // expire_history(): the next resume gets 410
  std::set<std::string> tokens_;
  test_server_faults faults_;
  std::mt19937_64 dice_;
  std::map<std::string, std::uint64_t> served_;
  /// Sockets of open connections, by connection: a closed socket's number can
  /// be reused by the next accept before its thread has forgotten it.
  std::map<std::uint64_t, int> open_fds_;
  std::vector<std::uint64_t> finished_; ///< connections whose thread is done
  std::uint64_t next_connection_ = 0;
  bool stopping_ = false;

private:
  void accept_loop() {
    for (;;) {
      tcp::socket socket{io_};
      boost::system::error_code ec;
      acceptor_.accept(socket, ec);
      std::lock_guard<std::mutex> guard(mutex_);
      if (stopping_ || ec)
        return;
      // Threads of closed connections are joined here, so that a server
      // running for days (`vigil demo --serve`) does not keep them all.
      for (auto id : finished_) {
        connections_.at(id).join(); // it has left its last lock: it is ending
        connections_.erase(id);
      }
      finished_.clear();
      const int fd = socket.native_handle();
      const auto id = next_connection_++;
      open_fds_.emplace(id, fd);
      connections_.emplace(id, std::thread([this, s = std::move(socket), id]() mutable {
                             serve_connection(std::move(s));
                             std::lock_guard<std::mutex> g(mutex_);
                             open_fds_.erase(id);
                             finished_.push_back(id);
                           }));
    }
  }

  void serve_connection(tcp::socket socket) {
    boost::system::error_code ec;
    if (!tls_) {
      serve_stream(socket);
      socket.shutdown(tcp::socket::shutdown_both, ec);
      return;
    }
    asio::ssl::stream<tcp::socket> stream{std::move(socket), *tls_};
    stream.handshake(asio::ssl::stream_base::server, ec);
    if (!ec)
      serve_stream(stream);
    stream.lowest_layer().shutdown(tcp::socket::shutdown_both, ec);
  }

  template <class Stream>
  void serve_stream(Stream& stream) {
    boost::beast::flat_buffer buffer;
    for (;;) {
      request_t req;
      boost::system::error_code ec;
      http::read(stream, buffer, req, ec);
      if (ec)
        return;
      if (!authorised(req, stream)) {
        if (!write_reply(stream, req, error_reply(401, "Unauthorized", "Unauthorized")))
          return;
        continue;
      }
      auto [path, query] = split_target(req.target());
      auto q = parse_query(query);
      count(std::string(req.method_string()));
      if (req.method() == http::verb::get && is_watch(q)) {
        serve_watch(stream, path, q);
        return; // a watch ends its connection
      }
      if (auto r = injected_fault(req, path); r) {
        if (!write_reply(stream, req, *r))
          return;
        continue;
      }
      if (!write_reply(stream, req, handle(req, path, q)) || !req.keep_alive())
        return;
    }
  }

  static std::pair<std::string, std::string> split_target(boost::beast::string_view t) {
    std::string target(t);
    auto qm = target.find('?');
    if (qm == std::string::npos)
      return {target, ""};
    return {target.substr(0, qm), target.substr(qm + 1)};
  }

  template <class Stream>
  bool authorised(const request_t& req, Stream& stream) {
    if constexpr (!std::is_same_v<Stream, tcp::socket>) {
      // A client certificate the TLS layer verified is an identity too.
      // get0: a borrowed pointer (get1/get_peer_certificate would need a free).
      if (!options_.client_ca_pem.empty()
          && SSL_get0_peer_certificate(stream.native_handle()) != nullptr)
        return true;
    }
    std::lock_guard<std::mutex> guard(mutex_);
    if (tokens_.empty())
      return true;
    auto it = req.find(http::field::authorization);
    if (it == req.end())
      return false;
    std::string value(it->value());
    return value.rfind("Bearer ", 0) == 0 && tokens_.count(value.substr(7)) > 0;
  }

  void count(const std::string& verb) {
    std::lock_guard<std::mutex> guard(mutex_);
    ++served_[verb];
  }

  std::optional<rest_reply> injected_fault(const request_t& req,
                                           const std::string& path) {
    test_server_faults f;
    double roll;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      f = faults_;
      roll = std::uniform_real_distribution<double>(0, 1)(dice_);
    }
    if (f.latency.count() > 0)
      std::this_thread::sleep_for(f.latency); // simulated network latency
    if (roll < f.error_fraction)
      return error_reply(500, "InternalError", "injected fault");
    if (roll < f.error_fraction + f.throttle_fraction) {
      auto r = error_reply(429, "TooManyRequests", "injected throttling");
      r.retry_after = std::to_string(f.retry_after_seconds);
      return r;
    }
    const double conflict_roll = roll - f.error_fraction - f.throttle_fraction;
    if (conflict_roll >= 0 && conflict_roll < f.node_conflict_fraction
        && (req.method() == http::verb::patch || req.method() == http::verb::put)
        && path.rfind("/api/v1/nodes/", 0) == 0
        && req.body().find("\"resourceVersion\"") != std::string::npos) {
      const auto name = path.substr(14, path.find('/', 14) - 14);
      return error_reply(409, "Conflict",
                         "Operation cannot be fulfilled on nodes \"" + name
                           + "\": the object has been modified; please apply your "
                             "changes to the latest version and try again");
    }
    return std::nullopt;
  }

  template <class Stream>
  bool write_reply(Stream& stream, const request_t& req, rest_reply r) {
    http::response<http::string_body> res{static_cast<http::status>(r.status),
                                          req.version()};
    res.set(http::field::content_type, "application/json");
    res.set("Audit-Id", "vigil-test");
    if (!r.retry_after.empty())
      res.set(http::field::retry_after, r.retry_after);
    res.keep_alive(req.keep_alive());
    res.body() = std::move(r.body);
    res.prepare_payload();
    boost::system::error_code ec;
    http::write(stream, res, ec);
    return !ec;
  }

  // The request under the store's lock, then wake the watches.
  rest_reply handle(const request_t& req, const std::string& path,
                    std::map<std::string, std::string> query) {
    rest_request r;
    r.verb = std::string(req.method_string());
    r.path = path;
    r.query = std::move(query);
    if (auto it = req.find(http::field::content_type); it != req.end())
      r.content_type = std::string(it->value());
    if (auto it = req.find(http::field::accept); it != req.end())
      r.accept = std::string(it->value());
    r.body = req.body();
    rest_reply reply;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      reply = serve_rest(store_, r);
    }
    changed_.notify_all();
    return reply;
  }

  template <class Stream>
  bool write_chunk(Stream& stream, const std::string& data) {
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    boost::system::error_code ec;
    std::array<asio::const_buffer, 3> parts{asio::buffer(size, std::strlen(size)),
                                            asio::buffer(data), asio::buffer("\r\n", 2)};
    asio::write(stream, parts, ec);
    return !ec;
  }

  template <class Stream>
  void serve_watch(Stream& stream, const std::string& path,
                   const std::map<std::string, std::string>& q) {
    std::unique_lock<std::mutex> guard(mutex_);
    api_status not_found;
    auto target = resolve_watch(store_, path, q, not_found);
    if (!target) {
      guard.unlock();
      request_t fake;
      fake.version(11);
      write_reply(stream, fake, status_reply(not_found));
      return;
    }
    const auto& selectors = target->selectors;
    std::uint64_t rv = target->resource_version;
    const bool bookmarks = target->bookmarks;
    const std::chrono::seconds timeout{target->timeout_seconds.value_or(1800)};
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    const auto drop_at_start = drop_generation_;
    auto bookmark_seen = bookmark_generation_;

    guard.unlock();
    const std::string head =
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\n\r\n";
    boost::system::error_code ec;
    asio::write(stream, asio::buffer(head), ec);
    if (ec)
      return;
    guard.lock();
    // rv 0 starts with the current state; after that, follow from where we are.
    bool first = true;
    const bool expired = rv != 0 && expire_next_resumes_ > 0;
    if (expired)
      --expire_next_resumes_;
    for (;;) {
      if (stopping_ || drop_generation_ != drop_at_start)
        return; // cut mid-stream, as a dropped connection is
      // Taken before the changes are read: a change committed while this
      // thread writes (unlocked) wakes the wait below, and is sent next.
      const auto seen = generation_;
      const auto seen_bookmark = bookmark_generation_;
      api_status error;
      auto events =
        expired ? std::nullopt
                : store_.changes_since(*target->type, target->ns, rv, selectors, error);
      if (expired)
        error = api_status{
          410, "Expired", "too old resource version: " + std::to_string(rv), {}};
      if (first && rv == 0)
        rv = store_.current_resource_version();
      first = false;
      std::optional<json> bookmark;
      if (events) {
        for (const auto& e : *events)
          rv = std::max(rv, e.resource_version);
        if (bookmarks && bookmark_generation_ != bookmark_seen) {
          bookmark_seen = bookmark_generation_;
          rv = std::max(rv, store_.current_resource_version());
          bookmark = json{{"kind", target->type->kind},
                          {"apiVersion", target->type->api_version()},
                          {"metadata", {{"resourceVersion", std::to_string(rv)}}}};
        }
      }
      // Written out without the store's lock: requests go on meanwhile.
      guard.unlock();
      std::string out;
      if (!events) {
        out = watch_line("ERROR", error.to_json());
      } else {
        for (const auto& e : *events)
          out += watch_line(e.type, e.object);
        if (bookmark)
          out += watch_line("BOOKMARK", *bookmark);
      }
      const bool written = out.empty() || write_chunk(stream, out);
      guard.lock();
      if (!written || !events)
        break;
      if (!changed_.wait_until(guard, deadline, [&] {
            return stopping_ || generation_ != seen || drop_generation_ != drop_at_start
                   || bookmark_generation_ != seen_bookmark;
          }))
        break; // timeoutSeconds reached: end cleanly
    }
    guard.unlock();
    asio::write(stream, asio::buffer("0\r\n\r\n", 5), ec);
  }
};

kube_test_server::kube_test_server(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

kube_test_server::~kube_test_server() {
  impl_->stop();
}

expected<std::unique_ptr<kube_test_server>>
kube_test_server::start(test_server_options options) {
  auto p = std::make_unique<impl>(std::move(options));
  if (auto st = p->listen(); !st)
    return st.error();
  return std::unique_ptr<kube_test_server>(new kube_test_server(std::move(p)));
}

std::string kube_test_server::url() const {
  return std::string(impl_->options_.tls ? "https" : "http")
         + "://127.0.0.1:" + std::to_string(impl_->port_);
}

std::uint16_t kube_test_server::port() const {
  return impl_->port_;
}

void kube_test_server::with_store(const std::function<void(object_store&)>& f) {
  {
    std::lock_guard<std::mutex> guard(impl_->mutex_);
    f(impl_->store_);
  }
  impl_->changed_.notify_all();
}

void kube_test_server::set_tokens(std::set<std::string> tokens) {
  std::lock_guard<std::mutex> guard(impl_->mutex_);
  impl_->tokens_ = std::move(tokens);
}

void kube_test_server::set_faults(const test_server_faults& faults) {
  std::lock_guard<std::mutex> guard(impl_->mutex_);
  impl_->faults_ = faults;
}

void kube_test_server::drop_watches() {
  {
    std::lock_guard<std::mutex> guard(impl_->mutex_);
    ++impl_->drop_generation_;
  }
  impl_->changed_.notify_all();
}

void kube_test_server::expire_history() {
  {
    std::lock_guard<std::mutex> guard(impl_->mutex_);
    impl_->store_.compact(impl_->store_.current_resource_version());
    impl_->expire_next_resumes_ = 1;
  }
  impl_->changed_.notify_all();
}

void kube_test_server::send_bookmarks() {
  {
    std::lock_guard<std::mutex> guard(impl_->mutex_);
    ++impl_->bookmark_generation_;
  }
  impl_->changed_.notify_all();
}

std::uint64_t kube_test_server::requests_served(const std::string& verb) const {
  std::lock_guard<std::mutex> guard(impl_->mutex_);
  std::uint64_t total = 0;
  for (const auto& [v, n] : impl_->served_)
    if (verb.empty() || v == verb)
      total += n;
  return total;
}

} // namespace vigil::kube
