// The HTTP server against clients that ask too much or misbehave: oversized
// bodies and headers, 100-continue, garbage, truncated chunked bodies, more
// connections than allowed, a thousand at once, connections left idle,
// silent (no TLS hello) or trickling a header (slowloris), and bytes that
// are not TLS. Each is counted (server_counters, on the control plane's
// /metrics as vigil_http_*), and nothing reaches a handler half-read.
#include "runtime/http/http_server.hpp"

#include <atomic>
#include <random>
#include <sys/resource.h>
#include <variant>

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

TEST(read_request, reads_as_a_connection_does) {
  server_options options;
  options.max_body_bytes = 16;
  options.max_header_bytes = 256;
  auto whole = read_request("POST /v1/events?a=b HTTP/1.1\r\nHost: t\r\nX-A: 1\r\n"
                            "X-A: 2\r\nContent-Length: 5\r\n\r\nhello",
                            options);
  ASSERT_TRUE(std::holds_alternative<request>(whole));
  const auto& r = std::get<request>(whole);
  EXPECT_EQ(r.path, "/v1/events");
  EXPECT_EQ(r.query, "a=b");
  EXPECT_EQ(r.header("x-a"), "1, 2");
  EXPECT_EQ(r.body, "hello");

  auto chunked =
    read_request("POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
                 "\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n",
                 options);
  ASSERT_TRUE(std::holds_alternative<request>(chunked));
  EXPECT_EQ(std::get<request>(chunked).body, "abcde");

  auto status_of = [&](std::string_view bytes) {
    auto read = read_request(bytes, options);
    return std::holds_alternative<unreadable_request>(read)
             ? std::get<unreadable_request>(read).status
             : 200;
  };
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                      "5\r\nab"),
            400); // truncated chunked body
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc"), 400);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost: t"), 400); // header never ends
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nContent-Length: 17\r\n\r\n"), 413);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nX: " + std::string(300, 'x') + "\r\n\r\n"), 431);
  EXPECT_EQ(status_of("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"), 400);
}

TEST_F(http_server_test, a_truncated_chunked_body_never_reaches_the_handler) {
  std::atomic<int> calls{0};
  start({}, [&](request, responder answer) {
    ++calls;
    answer(text(200, "should not happen"));
  });
  raw_client client(server_->port());
  client.send("POST /v1/events HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
              "40\r\n{\"nodeName\":\"node-1\"");
  client.finish_sending(); // the client goes away mid-chunk
  EXPECT_EQ(client.read_response().status, 400);
  EXPECT_TRUE(client.closed_by_server());
  EXPECT_EQ(calls, 0);
  auto stats = final_stats();
  EXPECT_EQ(stats.incomplete_requests, 1u);
  EXPECT_EQ(stats.requests, 0u);
}

TEST_F(http_server_test, a_header_trickled_byte_by_byte_is_cut_at_the_deadline) {
  server_options options;
  options.idle_timeout = std::chrono::seconds{1};
  start_echo(options);
  raw_client slow(server_->port());
  // A slowloris client: one header byte whenever a wait for the server's
  // close ends without it. Each byte would reset a per-read timer; the
  // server's deadline covers the whole request, so it closes within about
  // one second, long before the header limit or this loop's bound.
  const std::string header = "GET / HTTP/1.1\r\nHost: t\r\n" + std::string(4000, 'X');
  // The first byte at once: a request begun (on a loaded machine a first
  // wait could outlast the deadline, and an idle connection is not slow).
  slow.send(header.substr(0, 1));
  std::size_t sent = 1;
  while (sent < header.size() && !slow.closed_within(std::chrono::milliseconds{100}))
    slow.send(header.substr(sent++, 1));
  EXPECT_LT(sent, header.size()) << "the server never closed the connection";
  auto stats = final_stats();
  EXPECT_EQ(stats.slow_requests, 1u);
  EXPECT_EQ(stats.requests, 0u);
}

TEST_F(http_server_test, bytes_that_are_not_tls_are_a_tls_failure) {
  auto pki = kube::make_test_pki();
  ASSERT_TRUE(pki.has_value()) << pki.error().to_string();
  server_options tls;
  tls.cert_pem = pki->server_cert_pem;
  tls.key_pem = pki->server_key_pem;
  start_echo(tls);
  raw_client plain(server_->port());
  plain.send(get("/")); // HTTP where a ClientHello belongs
  plain.read_to_end();  // at most a TLS alert, then the server closes
  raw_client broken(server_->port());
  // A TLS record header announcing a handshake, then garbage.
  broken.send(std::string("\x16\x03\x01\x00\x40", 5) + std::string(64, '\xff'));
  broken.read_to_end();
  curl_client client(pki->ca_cert_pem);
  auto r = client.call("GET", url("/after", "https"));
  EXPECT_EQ(r.status, 200) << curl_easy_strerror(r.code);
  auto stats = final_stats();
  EXPECT_EQ(stats.tls_failures, 2u);
  EXPECT_EQ(stats.requests, 1u);
}

TEST_F(http_server_test,
       a_thousand_connections_at_once_are_served_or_refused_and_counted) {
  // 1,000 clients and their 1,000 server ends in this process.
  rlimit files{};
  ::getrlimit(RLIMIT_NOFILE, &files);
  if (files.rlim_cur < 2200) {
    files.rlim_cur = std::min<rlim_t>(files.rlim_max, 2200);
    ::setrlimit(RLIMIT_NOFILE, &files);
  }
  if (files.rlim_cur < 2200)
    GTEST_SKIP() << "needs 2,200 open files; the hard limit is " << files.rlim_max;
  server_options options;
  options.max_connections = 600;
  start_echo(options);
  std::vector<std::unique_ptr<raw_client>> clients;
  for (int i = 0; i < 1000; ++i)
    clients.push_back(std::make_unique<raw_client>(server_->port()));
  int served = 0;
  int refused = 0;
  for (std::size_t i = 0; i < clients.size(); ++i) {
    clients[i]->send(get("/" + std::to_string(i)));
    auto r = clients[i]->read_response();
    if (r.status == 200 && r.body == "GET /" + std::to_string(i))
      ++served;
    else
      ++refused;
  }
  EXPECT_EQ(served, 600);
  EXPECT_EQ(refused, 400);
  clients.clear(); // the server keeps serving once they are gone
  curl_client client;
  EXPECT_EQ(client.call("GET", url("/after")).status, 200);
  auto stats = final_stats();
  EXPECT_EQ(stats.rejected_connections, 400u);
  EXPECT_EQ(stats.requests, 601u);
}

} // namespace
} // namespace vigil::http
