// The HTTP server over real loopback sockets: libcurl as the well-behaved
// client (keep-alive, TLS), raw sockets for pipelining, 100-continue, limits,
// garbage and clients that never finish.
#include "runtime/http/http_server.hpp"

#include <atomic>
#include <condition_variable>
#include <fstream>
#include <future>
#include <mutex>
#include <queue>
#include <random>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <gtest/gtest.h>

#include "runtime/kube/test_certificates.hpp"
#include "tests/support/fresh_directory.hpp"

namespace vigil::http {
namespace {

// curl_global_init is not thread-safe: once, before any test starts threads.
const CURLcode curl_ready = curl_global_init(CURL_GLOBAL_DEFAULT);

// A guard against a hung server, not a timing assertion.
constexpr long client_timeout_seconds = 30;

bool starts_with_ci(const std::string& text, const std::string& prefix) {
  if (text.size() < prefix.size())
    return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(text[i]))
        != std::tolower(static_cast<unsigned char>(prefix[i])))
      return false;
  return true;
}

// The value of `name` in raw header lines ("Name: value\r\n"), or "".
std::string field_of(const std::vector<std::string>& lines, const std::string& name) {
  for (const auto& line : lines)
    if (starts_with_ci(line, name + ":")) {
      auto value = line.substr(name.size() + 1);
      value.erase(0, value.find_first_not_of(' '));
      return value.substr(0, value.find_last_not_of("\r\n ") + 1);
    }
  return "";
}

struct curl_reply {
  CURLcode code = CURLE_OK;
  long status = 0;
  long new_connections = 0;
  std::string body;
  std::vector<std::string> header_lines;

  std::string header(const std::string& name) const {
    return field_of(header_lines, name);
  }
};

// One curl easy handle; it keeps its connection open between calls.
class curl_client {
public:
  explicit curl_client(std::string ca_pem = {})
    : easy_(curl_easy_init()), ca_pem_(std::move(ca_pem)) {}
  ~curl_client() { curl_easy_cleanup(easy_); }
  curl_client(const curl_client&) = delete;
  curl_client& operator=(const curl_client&) = delete;

  curl_reply call(const std::string& method, const std::string& url,
                  const std::string& body = {},
                  const std::vector<std::string>& headers = {}) {
    curl_easy_reset(easy_); // keeps the connection cache
    curl_reply r;
    curl_slist* list = nullptr;
    for (const auto& h : headers)
      list = curl_slist_append(list, h.c_str());
    curl_easy_setopt(easy_, CURLOPT_URL, url.c_str());
    curl_easy_setopt(easy_, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy_, CURLOPT_TIMEOUT, client_timeout_seconds);
    if (method == "POST") {
      curl_easy_setopt(easy_, CURLOPT_POST, 1L);
      curl_easy_setopt(easy_, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
      curl_easy_setopt(easy_, CURLOPT_POSTFIELDS, body.data());
    } else if (method != "GET") {
      curl_easy_setopt(easy_, CURLOPT_CUSTOMREQUEST, method.c_str());
    }
    curl_easy_setopt(easy_, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(easy_, CURLOPT_WRITEFUNCTION, &on_body);
    curl_easy_setopt(easy_, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(easy_, CURLOPT_HEADERFUNCTION, &on_header);
    curl_easy_setopt(easy_, CURLOPT_HEADERDATA, &r);
    if (!ca_pem_.empty()) {
      curl_blob ca{const_cast<char*>(ca_pem_.data()), ca_pem_.size(), CURL_BLOB_COPY};
      curl_easy_setopt(easy_, CURLOPT_CAINFO_BLOB, &ca);
    }
    r.code = curl_easy_perform(easy_);
    curl_easy_getinfo(easy_, CURLINFO_RESPONSE_CODE, &r.status);
    curl_easy_getinfo(easy_, CURLINFO_NUM_CONNECTS, &r.new_connections);
    curl_slist_free_all(list);
    return r;
  }

private:
  static size_t on_body(char* data, size_t size, size_t n, void* user) {
    static_cast<curl_reply*>(user)->body.append(data, size * n);
    return size * n;
  }
  static size_t on_header(char* data, size_t size, size_t n, void* user) {
    static_cast<curl_reply*>(user)->header_lines.emplace_back(data, size * n);
    return size * n;
  }

  CURL* easy_;
  std::string ca_pem_;
};

struct raw_response {
  int status = 0; // 0: the connection ended first
  std::vector<std::string> header_lines;
  std::string body;

  std::string header(const std::string& name) const {
    return field_of(header_lines, name);
  }
};

// A blocking loopback TCP client for what curl will not send.
class raw_client {
public:
  explicit raw_client(std::uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    timeval guard{client_timeout_seconds, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &guard, sizeof guard);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ =
      ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  }
  ~raw_client() { ::close(fd_); }
  raw_client(const raw_client&) = delete;
  raw_client& operator=(const raw_client&) = delete;

  bool connected() const { return connected_; }

  void send(const std::string& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      auto n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0)
        return;
      sent += static_cast<size_t>(n);
    }
  }

  void finish_sending() { ::shutdown(fd_, SHUT_WR); }

  /// The next response; a HEAD response has a length but no body.
  raw_response read_response(bool head = false) {
    raw_response r;
    size_t end;
    while ((end = pending_.find("\r\n\r\n")) == std::string::npos)
      if (!receive())
        return r;
    std::string head_text = pending_.substr(0, end + 2);
    pending_.erase(0, end + 4);
    r.status = std::atoi(head_text.substr(9, 3).c_str());
    for (size_t at = head_text.find("\r\n") + 2; at < head_text.size();) {
      const auto eol = head_text.find("\r\n", at);
      r.header_lines.push_back(head_text.substr(at, eol - at));
      at = eol + 2;
    }
    const auto length = r.header("content-length");
    const size_t n = head || length.empty() ? 0 : std::stoul(length);
    while (pending_.size() < n)
      if (!receive())
        return raw_response{};
    r.body = pending_.substr(0, n);
    pending_.erase(0, n);
    return r;
  }

  /// True when the server closed (or reset) the connection with nothing more to read.
  bool closed_by_server() { return pending_.empty() && !receive(); }

  /// Reads until the server closes; what came.
  std::string read_to_end() {
    while (receive()) {
    }
    return std::move(pending_);
  }

private:
  bool receive() {
    char chunk[4096];
    const auto n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0)
      return false;
    pending_.append(chunk, static_cast<size_t>(n));
    return true;
  }

  int fd_;
  bool connected_ = false;
  std::string pending_;
};

// Hands values from the server's I/O threads to the test thread.
template <class T>
class mailbox {
public:
  void push(T value) {
    std::lock_guard<std::mutex> guard(mutex_);
    items_.push(std::move(value));
    ready_.notify_one();
  }
  T pop() {
    std::unique_lock<std::mutex> lock(mutex_);
    ready_.wait(lock, [this] { return !items_.empty(); });
    T value = std::move(items_.front());
    items_.pop();
    return value;
  }

private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::queue<T> items_;
};

struct pending_request {
  request received;
  responder answer;
};

response text(int status, std::string body) {
  return response{status, "text/plain", {}, std::move(body)};
}

std::string get(const std::string& target, const std::string& extra = "") {
  return "GET " + target + " HTTP/1.1\r\nHost: test\r\n" + extra + "\r\n";
}

class http_server_test : public testing::Test {
protected:
  void start(server_options options, handler on_request) {
    ASSERT_EQ(curl_ready, CURLE_OK);
    auto made = server::start(std::move(options), std::move(on_request));
    ASSERT_TRUE(made.has_value()) << made.error().to_string();
    server_ = std::move(*made);
  }

  // Answers every request with "METHOD path" as text.
  void start_echo(server_options options = {}) {
    start(std::move(options), [](request r, responder answer) {
      answer(text(200, r.method + " " + r.path));
    });
  }

  std::string url(const std::string& target, const std::string& scheme = "http") const {
    return scheme + "://127.0.0.1:" + std::to_string(server_->port()) + target;
  }

  // After stop() every I/O handler has run: the counters are final.
  server_stats final_stats() {
    server_->stop();
    return server_->stats();
  }

  std::unique_ptr<server> server_;
};

TEST_F(http_server_test, get_and_post_round_trip) {
  mailbox<request> seen;
  start({}, [&](request r, responder answer) {
    const bool health = r.path == "/healthz";
    seen.push(r);
    if (health)
      return answer(text(200, "ok"));
    answer(response{202,
                    "application/json",
                    {{"Retry-After", "2"},
                     {"Content-Length", "999"}, // framing is the server's
                     {"X-Injected\r\nEvil", "1"},
                     {"X-Split", "a\r\nEvil: 1"}},
                    r.body});
  });
  curl_client client;
  auto health = client.call("GET", url("/healthz?probe=1"), {}, {"X-Probe: yes"});
  ASSERT_EQ(health.code, CURLE_OK) << curl_easy_strerror(health.code);
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, "ok");
  EXPECT_EQ(health.header("content-type"), "text/plain");
  EXPECT_EQ(health.header("content-length"), "2");

  const std::string event = R"({"node":"gpu-1","xid":79})";
  auto posted =
    client.call("POST", url("/v1/events"), event, {"Content-Type: application/json"});
  ASSERT_EQ(posted.code, CURLE_OK) << curl_easy_strerror(posted.code);
  EXPECT_EQ(posted.status, 202);
  EXPECT_EQ(posted.body, event);
  EXPECT_EQ(posted.header("retry-after"), "2");
  EXPECT_EQ(posted.header("content-length"), std::to_string(event.size()));
  EXPECT_EQ(posted.header("x-split"), "");
  EXPECT_EQ(posted.header("evil"), "");

  auto get_request = seen.pop();
  EXPECT_EQ(get_request.method, "GET");
  EXPECT_EQ(get_request.target, "/healthz?probe=1");
  EXPECT_EQ(get_request.path, "/healthz");
  EXPECT_EQ(get_request.query, "probe=1");
  EXPECT_EQ(get_request.header("x-probe"), "yes");
  EXPECT_EQ(get_request.header("x-absent"), "");
  EXPECT_EQ(get_request.peer.rfind("127.0.0.1:", 0), 0u) << get_request.peer;
  auto post_request = seen.pop();
  EXPECT_EQ(post_request.method, "POST");
  EXPECT_EQ(post_request.path, "/v1/events");
  EXPECT_EQ(post_request.query, "");
  EXPECT_EQ(post_request.body, event);
  EXPECT_EQ(post_request.header("content-type"), "application/json");
}

TEST_F(http_server_test, keep_alive_serves_several_requests_on_one_connection) {
  start_echo();
  curl_client client;
  for (int i = 0; i < 5; ++i) {
    auto r = client.call(i % 2 ? "POST" : "GET", url("/n/" + std::to_string(i)), "x");
    ASSERT_EQ(r.code, CURLE_OK) << curl_easy_strerror(r.code);
    EXPECT_EQ(r.body, (i % 2 ? "POST /n/" : "GET /n/") + std::to_string(i));
    EXPECT_EQ(r.new_connections, i == 0 ? 1 : 0) << "request " << i;
  }
  auto stats = final_stats();
  EXPECT_EQ(stats.connections, 1u);
  EXPECT_EQ(stats.requests, 5u);
  EXPECT_EQ(stats.active_connections, 0u);
}

TEST_F(http_server_test, connection_close_and_head_are_honoured) {
  start_echo();
  raw_client head(server_->port());
  head.send("HEAD /healthz HTTP/1.1\r\nHost: test\r\n\r\n" + get("/after"));
  auto headed = head.read_response(true);
  EXPECT_EQ(headed.status, 200);
  EXPECT_EQ(headed.header("content-length"),
            std::to_string(std::string("HEAD /healthz").size()));
  EXPECT_EQ(head.read_response().body, "GET /after"); // no stray body in between

  raw_client closing(server_->port());
  closing.send(get("/bye", "Connection: close\r\n"));
  auto last = closing.read_response();
  EXPECT_EQ(last.status, 200);
  EXPECT_EQ(last.header("connection"), "close");
  EXPECT_TRUE(closing.closed_by_server());
}

TEST_F(http_server_test, pipelined_requests_are_answered_one_at_a_time_in_order) {
  mailbox<pending_request> requests;
  std::atomic<int> in_flight{0};
  start({}, [&](request r, responder answer) {
    EXPECT_EQ(in_flight.fetch_add(1), 0) << "a second request was read before the answer";
    requests.push({std::move(r), std::move(answer)});
  });
  raw_client client(server_->port());
  client.send(get("/1") + get("/2") + get("/3"));
  for (const std::string path : {"/1", "/2", "/3"}) {
    auto next = requests.pop();
    EXPECT_EQ(next.received.path, path);
    --in_flight;
    next.answer(text(200, "answer " + path));
    auto reply = client.read_response();
    EXPECT_EQ(reply.status, 200);
    EXPECT_EQ(reply.body, "answer " + path);
  }
  EXPECT_EQ(final_stats().connections, 1u);
}

TEST_F(http_server_test, responder_is_called_later_from_another_thread) {
  mailbox<pending_request> requests;
  start({}, [&](request r, responder answer) {
    requests.push({std::move(r), std::move(answer)});
  });
  curl_client client;
  auto reply = std::async(std::launch::async,
                          [&] { return client.call("POST", url("/v1/events"), "late"); });
  auto pending = requests.pop();
  std::promise<void> go;
  std::thread actor([&, release = go.get_future()]() mutable {
    release.wait();
    pending.answer(response{201, "application/json", {}, "{\"accepted\":1}"});
    pending.answer(text(500, "second answer is ignored"));
  });
  go.set_value();
  actor.join();
  auto r = reply.get();
  ASSERT_EQ(r.code, CURLE_OK) << curl_easy_strerror(r.code);
  EXPECT_EQ(r.status, 201);
  EXPECT_EQ(r.body, "{\"accepted\":1}");
  EXPECT_EQ(r.header("content-type"), "application/json");

  // The connection is still good for the next request.
  auto again =
    std::async(std::launch::async, [&] { return client.call("GET", url("/again")); });
  requests.pop().answer(text(200, "again"));
  auto second = again.get();
  EXPECT_EQ(second.body, "again");
  EXPECT_EQ(second.new_connections, 0);
}

TEST_F(http_server_test, oversized_body_is_413_and_never_reaches_the_handler) {
  std::atomic<int> calls{0};
  server_options options;
  options.max_body_bytes = 1024;
  start(options, [&](request, responder answer) {
    ++calls;
    answer(text(200, "should not happen"));
  });
  curl_client client;
  auto r = client.call("POST", url("/v1/events"), std::string(4096, 'x'));
  ASSERT_EQ(r.code, CURLE_OK) << curl_easy_strerror(r.code);
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(r.body, "request body exceeds 1024 bytes");
  EXPECT_EQ(r.header("connection"), "close");

  // Refused on the declared length alone: the body is never sent, let alone buffered.
  raw_client declared(server_->port());
  declared.send(
    "POST /v1/events HTTP/1.1\r\nHost: t\r\nContent-Length: 100000000\r\n\r\n");
  EXPECT_EQ(declared.read_response().status, 413);
  EXPECT_TRUE(declared.closed_by_server());

  raw_client chunked(server_->port());
  chunked.send("POST /v1/events HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
               "400\r\n"
               + std::string(1024, 'y') + "\r\n1\r\nz\r\n0\r\n\r\n");
  EXPECT_EQ(chunked.read_response().status, 413);

  // Exactly at the limit is fine.
  EXPECT_EQ(client.call("POST", url("/v1/events"), std::string(1024, 'x')).status, 200);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(final_stats().rejected_too_large, 3u);
}

TEST_F(http_server_test, oversized_header_is_431) {
  server_options options;
  options.max_header_bytes = 1024;
  start_echo(options);
  raw_client client(server_->port());
  client.send(get("/", "X-Big: " + std::string(2000, 'b') + "\r\n"));
  auto r = client.read_response();
  EXPECT_EQ(r.status, 431);
  EXPECT_EQ(r.body, "request header exceeds 1024 bytes");
  EXPECT_TRUE(client.closed_by_server());
  EXPECT_EQ(final_stats().rejected_too_large, 1u);
}

TEST_F(http_server_test, expect_100_continue_gets_continue_before_the_body) {
  start({}, [](request r, responder answer) { answer(text(200, r.body)); });
  raw_client client(server_->port());
  client.send("POST /v1/events HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n"
              "Expect: 100-continue\r\n\r\n");
  EXPECT_EQ(client.read_response().status, 100);
  client.send("hello");
  auto r = client.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "hello");
}

TEST_F(http_server_test, garbage_is_400_and_the_server_keeps_serving) {
  start_echo();
  raw_client tls_hello(server_->port());
  tls_hello.send(std::string("\x16\x03\x01\x02\x00\x01\xff garbage\r\n\r\n", 19));
  auto r = tls_hello.read_response();
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.header("content-type"), "text/plain; charset=utf-8");
  EXPECT_EQ(r.body.rfind("malformed request: ", 0), 0u) << r.body;
  EXPECT_TRUE(tls_hello.closed_by_server());

  raw_client bad_length(server_->port());
  bad_length.send(get("/", "Content-Length: nope\r\n"));
  EXPECT_EQ(bad_length.read_response().status, 400);

  raw_client cut_short(server_->port());
  cut_short.send("GET /v1/ev");
  cut_short.finish_sending();
  EXPECT_EQ(cut_short.read_response().status, 400);

  // Random bytes, some cut off mid-way: whatever comes back, the server lives.
  std::mt19937 dice(2024);
  for (int i = 0; i < 50; ++i) {
    raw_client noise(server_->port());
    std::string bytes(1 + dice() % 3000, '\0');
    for (char& c : bytes)
      c = static_cast<char>(dice() % 256);
    if (i % 2)
      bytes += "\r\n\r\n";
    noise.send(bytes);
    noise.finish_sending();
    noise.read_to_end();
  }
  curl_client client;
  auto after = client.call("GET", url("/healthz"));
  EXPECT_EQ(after.status, 200);
  EXPECT_GE(final_stats().bad_requests, 3u);
}

TEST_F(http_server_test, handler_mistakes_become_500) {
  start({}, [](request r, responder answer) {
    if (r.path == "/throws")
      throw std::runtime_error("handler bug");
    if (r.path == "/bad-status")
      return answer(text(42, "?"));
    // "/dropped": the responder goes out of scope unanswered.
  });
  curl_client client;
  for (const std::string path : {"/throws", "/bad-status", "/dropped"}) {
    auto r = client.call("GET", url(path));
    ASSERT_EQ(r.code, CURLE_OK) << path << ": " << curl_easy_strerror(r.code);
    EXPECT_EQ(r.status, 500) << path;
    EXPECT_EQ(r.body.rfind("internal error", 0), 0u) << r.body;
  }
  EXPECT_EQ(final_stats().connections, 1u);
}

TEST_F(http_server_test, https_round_trip) {
  auto pki = kube::make_test_pki();
  ASSERT_TRUE(pki.has_value()) << pki.error().to_string();
  server_options options;
  options.cert_pem = pki->server_cert_pem;
  options.key_pem = pki->server_key_pem;
  start(options, [](request r, responder answer) {
    answer(text(200, r.method + " " + r.path + " " + r.body));
  });
  curl_client client(pki->ca_cert_pem);
  auto got = client.call("GET", url("/readyz", "https"));
  ASSERT_EQ(got.code, CURLE_OK) << curl_easy_strerror(got.code);
  EXPECT_EQ(got.body, "GET /readyz ");
  auto posted = client.call("POST", url("/v1/events", "https"), "{}");
  ASSERT_EQ(posted.code, CURLE_OK) << curl_easy_strerror(posted.code);
  EXPECT_EQ(posted.body, "POST /v1/events {}");
  EXPECT_EQ(posted.new_connections, 0);

  curl_client untrusting; // the system CAs do not know the test CA
  EXPECT_NE(untrusting.call("GET", url("/readyz", "https")).code, CURLE_OK);
  EXPECT_EQ(client.call("GET", url("/healthz", "https")).body, "GET /healthz ");
  EXPECT_EQ(final_stats().requests, 3u);
}

TEST_F(http_server_test, plain_http_against_https_fails_cleanly_and_serving_goes_on) {
  auto pki = kube::make_test_pki();
  ASSERT_TRUE(pki.has_value()) << pki.error().to_string();
  server_options options;
  options.cert_pem = pki->server_cert_pem;
  options.key_pem = pki->server_key_pem;
  start_echo(options);
  curl_client plain;
  EXPECT_NE(plain.call("GET", url("/healthz")).code, CURLE_OK);
  // Raw clients read until the server closes, which it does after counting
  // the failure; curl may give up on the alert, before the count.
  raw_client plain_raw(server_->port());
  plain_raw.send(get("/healthz"));
  EXPECT_EQ(plain_raw.read_to_end().rfind("HTTP/", 0), std::string::npos);
  raw_client garbage(server_->port());
  garbage.send(std::string(300, '\x16'));
  garbage.finish_sending();
  garbage.read_to_end();

  curl_client client(pki->ca_cert_pem);
  auto r = client.call("GET", url("/healthz", "https"));
  ASSERT_EQ(r.code, CURLE_OK) << curl_easy_strerror(r.code);
  EXPECT_EQ(r.body, "GET /healthz");
  EXPECT_GE(final_stats().tls_failures, 2u);
}

TEST_F(http_server_test, stop_returns_with_an_unanswered_request) {
  mailbox<responder> unanswered;
  start({}, [&](request, responder answer) { unanswered.push(std::move(answer)); });
  raw_client client(server_->port());
  client.send(get("/v1/events"));
  auto answer = unanswered.pop();
  server_->stop();
  EXPECT_TRUE(client.closed_by_server());
  answer(text(200, "too late")); // harmless after stop
  server_->stop();               // idempotent
  server_.reset();
  answer(text(200, "later still")); // harmless after the server is gone
}

TEST_F(http_server_test, connections_over_the_limit_are_closed_at_once) {
  server_options options;
  options.max_connections = 1;
  start_echo(options);
  raw_client first(server_->port());
  first.send(get("/first"));
  EXPECT_EQ(first.read_response().status, 200); // admitted and still open
  raw_client second(server_->port());
  EXPECT_TRUE(second.closed_by_server());
  first.send(get("/again"));
  EXPECT_EQ(first.read_response().body, "GET /again");
  auto stats = final_stats();
  EXPECT_EQ(stats.connections, 1u);
  EXPECT_EQ(stats.rejected_connections, 1u);
}

TEST_F(http_server_test, idle_and_silent_tls_connections_are_closed) {
  server_options options;
  options.idle_timeout = std::chrono::seconds{1};
  start_echo(options);
  raw_client idle(server_->port());
  idle.send(get("/once"));
  EXPECT_EQ(idle.read_response().status, 200);
  EXPECT_TRUE(idle.closed_by_server()); // after the idle timeout, without a request

  auto pki = kube::make_test_pki();
  ASSERT_TRUE(pki.has_value()) << pki.error().to_string();
  server_options tls;
  tls.cert_pem = pki->server_cert_pem;
  tls.key_pem = pki->server_key_pem;
  tls.handshake_timeout = std::chrono::seconds{1};
  start_echo(tls);
  raw_client silent(server_->port());
  EXPECT_TRUE(silent.closed_by_server()); // never said hello
  EXPECT_EQ(final_stats().tls_failures, 1u);
}

TEST_F(http_server_test, concurrent_clients_on_several_io_threads) {
  server_options options;
  options.threads = 4;
  start({}, [](request r, responder answer) { answer(text(200, r.body)); });
  constexpr int clients = 8, requests = 25;
  std::vector<std::future<int>> matched;
  for (int c = 0; c < clients; ++c)
    matched.push_back(std::async(std::launch::async, [&, c] {
      curl_client client;
      int ok = 0;
      for (int i = 0; i < requests; ++i) {
        const auto body = std::to_string(c) + "/" + std::to_string(i);
        ok += client.call("POST", url("/v1/events"), body).body == body;
      }
      return ok;
    }));
  for (auto& m : matched)
    EXPECT_EQ(m.get(), requests);
  auto stats = final_stats();
  EXPECT_EQ(stats.requests, static_cast<std::uint64_t>(clients * requests));
  EXPECT_EQ(stats.connections, static_cast<std::uint64_t>(clients));
}

TEST_F(http_server_test, start_failures_name_what_is_wrong) {
  start_echo();
  server_options busy;
  busy.port = server_->port();
  auto taken = server::start(busy, [](request, responder) {});
  ASSERT_FALSE(taken.has_value());
  EXPECT_NE(taken.error().to_string().find("127.0.0.1:" + std::to_string(busy.port)),
            std::string::npos)
    << taken.error().to_string();

  server_options bad_address;
  bad_address.address = "300.1.1.1";
  auto unparsable = server::start(bad_address, [](request, responder) {});
  ASSERT_FALSE(unparsable.has_value());
  EXPECT_NE(unparsable.error().to_string().find("300.1.1.1"), std::string::npos);

  server_options half_tls;
  half_tls.cert_pem = "-----BEGIN CERTIFICATE-----";
  auto half = server::start(half_tls, [](request, responder) {});
  ASSERT_FALSE(half.has_value());
  EXPECT_EQ(half.error().where, "key_pem");

  server_options bad_cert;
  bad_cert.cert_pem = "not a certificate";
  bad_cert.key_pem = "not a key";
  auto unusable = server::start(bad_cert, [](request, responder) {});
  ASSERT_FALSE(unusable.has_value());
  EXPECT_EQ(unusable.error().where, "cert_pem");

  server_options no_threads;
  no_threads.threads = 0;
  auto idle = server::start(no_threads, [](request, responder) {});
  ASSERT_FALSE(idle.has_value());
  EXPECT_EQ(idle.error().where, "threads");
}

TEST(read_pem_file, reads_pem_and_names_the_path_on_failure) {
  const auto dir = test::fresh_directory();
  const std::string pem =
    "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  std::ofstream(dir + "/server.pem") << pem;
  std::ofstream(dir + "/notes.txt") << "hello";

  auto read = read_pem_file(dir + "/server.pem");
  ASSERT_TRUE(read.has_value()) << read.error().to_string();
  EXPECT_EQ(*read, pem);
  for (const auto& bad : {dir + "/missing.pem", dir + "/notes.txt", dir}) {
    auto failed = read_pem_file(bad);
    ASSERT_FALSE(failed.has_value()) << bad;
    EXPECT_EQ(failed.error().where, bad);
  }
}

} // namespace
} // namespace vigil::http
