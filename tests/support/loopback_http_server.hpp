// A one-thread HTTP/1.1 server on 127.0.0.1, port 0, for the agent's HTTP
// clients: each connection gets the next canned response and is closed; the
// requests are kept for the test to read. No TLS.
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace vigil::test {

// One request as the server saw it.
struct captured_request {
  std::string head; ///< request line and headers
  std::string body;
};

// A one-thread HTTP/1.1 server on 127.0.0.1, port 0: answers each connection
// with the next canned response, then closes it. No TLS.
class loopback_server {
public:
  explicit loopback_server(std::vector<std::string> responses)
    : responses_(std::move(responses)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&addr), len) != 0
        || ::listen(listener_, 4) != 0
        || ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
      std::fprintf(stderr, "loopback_server: cannot listen: %s\n", std::strerror(errno));
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }

  ~loopback_server() {
    join();
    ::close(listener_);
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  /// Waits for the server to answer all its responses; then requests() is safe.
  void join() {
    if (thread_.joinable())
      thread_.join();
  }

  const std::vector<captured_request>& requests() const { return requests_; }

private:
  void serve() {
    for (const auto& response : responses_) {
      pollfd p{listener_, POLLIN, 0};
      if (::poll(&p, 1, 10'000) != 1)
        return; // the test fails on the missing request, never hangs
      int conn = ::accept(listener_, nullptr, nullptr);
      if (conn < 0)
        return;
      requests_.push_back(read_request(conn));
      ::send(conn, response.data(), response.size(), MSG_NOSIGNAL);
      ::close(conn);
    }
  }

  static captured_request read_request(int conn) {
    std::string data;
    char buffer[4096];
    std::size_t head_end = std::string::npos;
    std::size_t wanted = 0;
    while (head_end == std::string::npos || data.size() < head_end + 4 + wanted) {
      auto n = ::recv(conn, buffer, sizeof buffer, 0);
      if (n <= 0)
        break;
      data.append(buffer, static_cast<std::size_t>(n));
      if (head_end == std::string::npos
          && (head_end = data.find("\r\n\r\n")) != std::string::npos)
        wanted = content_length(data.substr(0, head_end));
    }
    if (head_end == std::string::npos)
      return {data, ""};
    return {data.substr(0, head_end), data.substr(head_end + 4)};
  }

  static std::size_t content_length(const std::string& head) {
    auto at = head.find("Content-Length: ");
    return at == std::string::npos ? 0 : std::stoul(head.substr(at + 16));
  }

  std::vector<std::string> responses_;
  std::vector<captured_request> requests_;
  int listener_ = -1;
  int port_ = 0;
  std::thread thread_;
};

inline std::string response(int status, const std::string& reason,
                            const std::string& body,
                            const std::string& extra_headers = "") {
  return "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\n"
         + "Content-Type: application/json\r\nConnection: close\r\n" + extra_headers
         + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

} // namespace vigil::test
