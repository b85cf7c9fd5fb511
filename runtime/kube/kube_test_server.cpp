// One thread accepts; one thread per connection serves HTTP/1.1 keep-alive
// requests (Boost.Beast, synchronous), and a watch holds its connection's
// thread while it streams. The store is guarded by one mutex: this is a test
// double, where simple beats fast.
#include "runtime/kube/kube_test_server.hpp"

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <sys/socket.h>
#include <thread>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "runtime/kube/kube_discovery.hpp"

namespace vigil::kube {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

namespace {

using request_t = http::request<http::string_body>;

struct reply {
  reply(int code, std::string text) : status(code), body(std::move(text)) {}
  int status;
  std::string body;
  std::string content_type = "application/json";
  std::string retry_after;
};

reply status_reply(const api_status& s) {
  reply r{s.code, s.to_json().dump()};
  if (s.code == 429)
    r.retry_after = "1";
  return r;
}

reply error_reply(int code, const std::string& reason, const std::string& message) {
  return status_reply(api_status{code, reason, message, {}});
}

std::string percent_decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i] == '+' ? ' ' : s[i];
    }
  }
  return out;
}

std::map<std::string, std::string> parse_query(std::string_view query) {
  std::map<std::string, std::string> out;
  while (!query.empty()) {
    auto amp = query.find('&');
    auto pair = query.substr(0, amp);
    auto eq = pair.find('=');
    if (eq == std::string_view::npos)
      out[percent_decode(pair)] = "";
    else
      out[percent_decode(pair.substr(0, eq))] = percent_decode(pair.substr(eq + 1));
    query = amp == std::string_view::npos ? "" : query.substr(amp + 1);
  }
  return out;
}

std::vector<std::string> split_path(std::string_view path) {
  std::vector<std::string> out;
  while (!path.empty()) {
    auto slash = path.find('/');
    auto seg = path.substr(0, slash);
    if (!seg.empty())
      out.emplace_back(seg);
    path = slash == std::string_view::npos ? "" : path.substr(slash + 1);
  }
  return out;
}

bool truthy(const std::map<std::string, std::string>& q, const char* key) {
  auto it = q.find(key);
  return it != q.end() && (it->second == "true" || it->second == "1");
}

// What a URL addresses: a resource collection, an object, or a subresource.
struct route {
  const resource_type* type = nullptr;
  std::string ns;
  std::string name;
  std::string sub;
};

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
      for (int fd : open_fds_)
        ::shutdown(fd, SHUT_RDWR);
    }
    changed_.notify_all();
    ::shutdown(acceptor_.native_handle(), SHUT_RDWR);
    if (accept_thread_.joinable())
      accept_thread_.join();
    boost::system::error_code ec;
    acceptor_.close(ec);
    for (auto& t : connections_)
      t.join();
  }

  std::uint16_t port_ = 0;
  test_server_options options_;
  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::optional<asio::ssl::context> tls_;
  std::thread accept_thread_;
  std::vector<std::thread> connections_; // accept thread only

  mutable std::mutex mutex_; // guards everything below
  std::condition_variable changed_;
  object_store store_;
  std::uint64_t generation_ = 0, drop_generation_ = 0, bookmark_generation_ = 0;
  int expire_next_resumes_ = 0; // expire_history(): the next resume gets 410
  std::set<std::string> tokens_;
  test_server_faults faults_;
  std::mt19937_64 dice_;
  std::map<std::string, std::uint64_t> served_;
  std::set<int> open_fds_;
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
      const int fd = socket.native_handle();
      open_fds_.insert(fd);
      connections_.emplace_back([this, s = std::move(socket), fd]() mutable {
        serve_connection(std::move(s));
        std::lock_guard<std::mutex> g(mutex_);
        open_fds_.erase(fd);
      });
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
      if (req.method() == http::verb::get && truthy(q, "watch")) {
        serve_watch(stream, path, q);
        return; // a watch ends its connection
      }
      if (auto r = injected_fault(); r) {
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

  std::optional<reply> injected_fault() {
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
    return std::nullopt;
  }

  template <class Stream>
  bool write_reply(Stream& stream, const request_t& req, reply r) {
    http::response<http::string_body> res{static_cast<http::status>(r.status),
                                          req.version()};
    res.set(http::field::content_type, r.content_type);
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

  // Resolves /api/v1/… and /apis/<group>/<version>/… to a type and object.
  std::optional<route> resolve(const std::vector<std::string>& seg) {
    std::string group, version;
    size_t rest;
    if (seg.size() >= 3 && seg[0] == "api") {
      version = seg[1];
      rest = 2;
    } else if (seg.size() >= 4 && seg[0] == "apis") {
      group = seg[1];
      version = seg[2];
      rest = 3;
    } else {
      return std::nullopt;
    }
    route r;
    const size_t n = seg.size() - rest;
    if (n >= 3 && seg[rest] == "namespaces") {
      if (auto* t = store_.find_type(group, version, seg[rest + 2]); t && t->namespaced) {
        r.type = t;
        r.ns = seg[rest + 1];
        r.name = n >= 4 ? seg[rest + 3] : "";
        r.sub = n >= 5 ? seg[rest + 4] : "";
        return n <= 5 ? std::optional<route>{r} : std::nullopt;
      }
    }
    r.type = store_.find_type(group, version, seg[rest]);
    if (r.type == nullptr || n > 3)
      return std::nullopt;
    r.name = n >= 2 ? seg[rest + 1] : "";
    r.sub = n >= 3 ? seg[rest + 2] : "";
    return r;
  }

  std::optional<reply> discovery(const std::vector<std::string>& seg) {
    if (seg.size() == 1 && seg[0] == "version")
      return reply{200, version_document().dump()};
    if (seg.size() == 1 && seg[0] == "api")
      return reply{200, api_versions_document().dump()};
    if (seg.size() == 1 && seg[0] == "apis")
      return reply{200, api_group_list(store_.types()).dump()};
    if (seg.size() == 2 && seg[0] == "api")
      return reply{200, api_resource_list(store_.types(), "", seg[1]).dump()};
    if (seg.size() == 3 && seg[0] == "apis")
      return reply{200, api_resource_list(store_.types(), seg[1], seg[2]).dump()};
    return std::nullopt;
  }

  static list_options list_options_of(const std::map<std::string, std::string>& q) {
    list_options o;
    if (auto it = q.find("labelSelector"); it != q.end())
      o.label_selector = it->second;
    if (auto it = q.find("fieldSelector"); it != q.end())
      o.field_selector = it->second;
    if (auto it = q.find("limit"); it != q.end())
      o.limit = std::strtoll(it->second.c_str(), nullptr, 10);
    if (auto it = q.find("continue"); it != q.end())
      o.continue_token = it->second;
    return o;
  }

  static std::optional<patch_type> patch_type_of(const request_t& req) {
    auto it = req.find(http::field::content_type);
    std::string type = it == req.end() ? "" : std::string(it->value());
    if (type.rfind("application/merge-patch+json", 0) == 0)
      return patch_type::merge;
    if (type.rfind("application/json-patch+json", 0) == 0)
      return patch_type::json_patch;
    if (type.rfind("application/strategic-merge-patch+json", 0) == 0)
      return patch_type::strategic_merge;
    return std::nullopt;
  }

  static bool wants_table(const request_t& req) {
    auto it = req.find(http::field::accept);
    return it != req.end()
           && std::string(it->value()).find("as=Table") != std::string::npos;
  }

  static delete_options delete_options_of(const json& body,
                                          const std::map<std::string, std::string>& q) {
    delete_options o;
    auto policy = [&](const std::string& p) {
      if (p == "Orphan")
        o.propagation = propagation_policy::orphan;
      else if (p == "Foreground")
        o.propagation = propagation_policy::foreground;
      else if (p == "Background")
        o.propagation = propagation_policy::background;
    };
    if (body.is_object()) {
      if (auto g = body.find("gracePeriodSeconds"); g != body.end() && g->is_number())
        o.grace_period_seconds = g->get<std::int64_t>();
      if (auto p = body.find("propagationPolicy"); p != body.end() && p->is_string())
        policy(p->get<std::string>());
      if (auto pre = body.find("preconditions"); pre != body.end() && pre->is_object())
        if (auto rv = pre->find("resourceVersion"); rv != pre->end() && rv->is_string())
          o.precondition_resource_version = rv->get<std::string>();
    }
    if (auto it = q.find("gracePeriodSeconds"); it != q.end())
      o.grace_period_seconds = std::strtoll(it->second.c_str(), nullptr, 10);
    if (auto it = q.find("propagationPolicy"); it != q.end())
      policy(it->second);
    return o;
  }

  reply handle(const request_t& req, const std::string& path,
               const std::map<std::string, std::string>& q) {
    const auto seg = split_path(path);
    std::unique_lock<std::mutex> guard(mutex_);
    if (req.method() == http::verb::get)
      if (auto d = discovery(seg))
        return *d;
    auto r = resolve(seg);
    if (!r)
      return error_reply(404, "NotFound",
                         "the server could not find the requested "
                         "resource");
    json body;
    if (!req.body().empty()) {
      body = json::parse(req.body(), nullptr, false);
      if (body.is_discarded())
        return error_reply(400, "BadRequest", "the request body is not valid JSON");
    }
    const bool status_sub = r->sub == "status";
    if (!r->sub.empty() && !status_sub && r->sub != "eviction")
      return error_reply(404, "NotFound", "no subresource " + r->sub);
    store_result result;
    int ok_code = 200;
    switch (req.method()) {
      case http::verb::get:
        result = r->name.empty() ? store_.list(*r->type, r->ns, list_options_of(q))
                                 : store_.get(*r->type, r->ns, r->name);
        if (result.ok() && wants_table(req))
          result.value = to_table(*r->type, *result.value);
        break;
      case http::verb::post:
        if (r->sub == "eviction" && r->type->plural == "pods") {
          result = store_.evict(r->ns, r->name, body);
          ok_code = 201;
        } else if (r->name.empty()) {
          result = store_.create(*r->type, r->ns, body);
          ok_code = 201;
        } else {
          return error_reply(405, "MethodNotAllowed", "POST is not allowed here");
        }
        break;
      case http::verb::put:
        result = store_.update(*r->type, r->ns, r->name, body, status_sub);
        break;
      case http::verb::patch: {
        auto kind = patch_type_of(req);
        if (!kind)
          return error_reply(415, "UnsupportedMediaType",
                             "the body of the request was in an unknown format");
        result = store_.patch(*r->type, r->ns, r->name, body, *kind, status_sub);
        break;
      }
      case http::verb::delete_:
        result = store_.remove(*r->type, r->ns, r->name, delete_options_of(body, q));
        break;
      default: return error_reply(405, "MethodNotAllowed", "method not allowed");
    }
    guard.unlock();
    changed_.notify_all();
    if (!result.ok())
      return status_reply(result.error);
    return reply{ok_code, result.value->dump()};
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
    auto r = resolve(split_path(path));
    if (!r || !r->name.empty()) {
      guard.unlock();
      request_t fake;
      fake.version(11);
      write_reply(stream, fake, error_reply(404, "NotFound", "cannot watch " + path));
      return;
    }
    const auto selectors = list_options_of(q);
    std::uint64_t rv = 0;
    if (auto it = q.find("resourceVersion"); it != q.end())
      rv = std::strtoull(it->second.c_str(), nullptr, 10);
    const bool bookmarks = truthy(q, "allowWatchBookmarks");
    std::chrono::seconds timeout{1800};
    if (auto it = q.find("timeoutSeconds"); it != q.end())
      timeout = std::chrono::seconds{std::strtoll(it->second.c_str(), nullptr, 10)};
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
      api_status error;
      auto events = expired ? std::nullopt
                            : store_.changes_since(*r->type, r->ns, rv, selectors, error);
      if (expired)
        error = api_status{
          410, "Expired", "too old resource version: " + std::to_string(rv), {}};
      if (first && rv == 0)
        rv = store_.current_resource_version();
      first = false;
      std::string out;
      if (!events) {
        out = json{{"type", "ERROR"}, {"object", error.to_json()}}.dump() + "\n";
      } else {
        for (auto& e : *events) {
          out += json{{"type", e.type}, {"object", e.object}}.dump() + "\n";
          rv = std::max(rv, e.resource_version);
        }
        if (bookmarks && bookmark_generation_ != bookmark_seen) {
          bookmark_seen = bookmark_generation_;
          rv = std::max(rv, store_.current_resource_version());
          json object = {{"kind", r->type->kind},
                         {"apiVersion", r->type->api_version()},
                         {"metadata", {{"resourceVersion", std::to_string(rv)}}}};
          out += json{{"type", "BOOKMARK"}, {"object", object}}.dump() + "\n";
        }
      }
      if (!out.empty()) {
        guard.unlock();
        const bool written = write_chunk(stream, out);
        guard.lock();
        if (!written || !events)
          break;
      }
      if (!events)
        break;
      const auto seen = generation_;
      const auto seen_bookmark = bookmark_generation_;
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
