// The HTTP server over real loopback sockets serving well-formed clients:
// round trips, keep-alive, Connection: close and HEAD, pipelining, answers
// given later from another thread, handler mistakes, stop() with a request
// unanswered, and several clients on several I/O threads.
#include "runtime/http/http_server.hpp"

#include <atomic>
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "tests/runtime/http/http_server_fixture.hpp"

namespace vigil::http {
namespace {

using namespace test_support;

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

} // namespace
} // namespace vigil::http
