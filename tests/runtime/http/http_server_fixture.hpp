// Shared pieces of the HTTP server tests: libcurl as the well-behaved client
// (keep-alive, TLS), a raw loopback socket client for what curl will not send,
// a mailbox from the server's I/O threads to the test, and a fixture that
// starts a server and reads its final counters.
#pragma once

#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <gtest/gtest.h>

#include "runtime/http/http_server.hpp"

namespace vigil::http::test_support {

// curl_global_init is not thread-safe: once, before any test starts threads.
inline const CURLcode curl_ready = curl_global_init(CURL_GLOBAL_DEFAULT);

// A guard against a hung server, not a timing assertion.
inline constexpr long client_timeout_seconds = 30;

inline bool starts_with_ci(const std::string& text, const std::string& prefix) {
  if (text.size() < prefix.size())
    return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(text[i]))
        != std::tolower(static_cast<unsigned char>(prefix[i])))
      return false;
  return true;
}

// The value of `name` in raw header lines ("Name: value\r\n"), or "".
inline std::string field_of(const std::vector<std::string>& lines,
                            const std::string& name) {
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

  /// Waits up to `limit` for the server to close the connection (or send
  /// something); true when it closed.
  bool closed_within(std::chrono::milliseconds limit) {
    pollfd ready{fd_, POLLIN, 0};
    if (::poll(&ready, 1, static_cast<int>(limit.count())) <= 0)
      return false;
    return !receive();
  }

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

inline response text(int status, std::string body) {
  return response{status, "text/plain", {}, std::move(body)};
}

inline std::string get(const std::string& target, const std::string& extra = "") {
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

} // namespace vigil::http::test_support
