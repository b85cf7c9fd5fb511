// The HTTP server against clients that ask too much or misbehave: oversized
// bodies and headers, 100-continue, garbage, more connections than allowed,
// and connections left idle or silent (no TLS hello).
#include "runtime/http/http_server.hpp"

#include <atomic>
#include <random>

#include <gtest/gtest.h>

#include "runtime/sim/kube/test_certificates.hpp"
#include "tests/runtime/http/http_server_fixture.hpp"

namespace vigil::http {
namespace {

using namespace test_support;

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

} // namespace
} // namespace vigil::http
