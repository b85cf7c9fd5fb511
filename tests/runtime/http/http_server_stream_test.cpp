// Streamed responses (Server-Sent Events): the header goes out without a
// length, chunks follow in order from another thread, and either side can
// end it; the handler's stream learns when the client is gone.
#include "runtime/http/http_server.hpp"

#include <thread>

#include <gtest/gtest.h>

#include "tests/runtime/http/http_server_fixture.hpp"

namespace vigil::http {
namespace {

using namespace test_support;

response event_stream(stream_starter starter) {
  response r{200, "text/event-stream", {{"Cache-Control", "no-cache"}}, ": open\n\n"};
  r.stream = std::move(starter);
  return r;
}

// Answers every request with a stream, handing each stream to the test and
// telling `gone` when its connection closes.
handler streaming(mailbox<std::shared_ptr<body_stream>>& streams, mailbox<bool>& gone) {
  return [&streams, &gone](request, responder answer) {
    answer(event_stream([&streams, &gone](std::shared_ptr<body_stream> s) {
      s->on_close([&gone] { gone.push(true); });
      streams.push(s);
    }));
  };
}

TEST_F(http_server_test, a_streamed_response_is_written_as_it_is_sent) {
  mailbox<std::shared_ptr<body_stream>> streams;
  start({}, [&](request, responder answer) {
    answer(event_stream([&](std::shared_ptr<body_stream> s) { streams.push(s); }));
  });
  raw_client client(server_->port());
  ASSERT_TRUE(client.connected());
  client.send("GET /api/v1/stream HTTP/1.1\r\nHost: x\r\n\r\n");
  auto stream = streams.pop();
  std::thread sender([stream] {
    for (int i = 0; i < 100; ++i)
      EXPECT_TRUE(stream->send("data: " + std::to_string(i) + "\n\n"));
    stream->end();
  });
  sender.join();
  auto all = client.read_to_end();
  const auto head_end = all.find("\r\n\r\n");
  ASSERT_NE(head_end, std::string::npos) << all;
  const auto head = all.substr(0, head_end);
  EXPECT_EQ(head.find("HTTP/1.1 200"), 0u) << head;
  EXPECT_EQ(head.find("Content-Length"), std::string::npos) << head;
  EXPECT_NE(head.find("Connection: close"), std::string::npos) << head;
  EXPECT_NE(head.find("text/event-stream"), std::string::npos) << head;
  std::string expected = ": open\n\n";
  for (int i = 0; i < 100; ++i)
    expected += "data: " + std::to_string(i) + "\n\n";
  EXPECT_EQ(all.substr(head_end + 4), expected);
  mailbox<bool> gone;
  stream->on_close([&] { gone.push(true); }); // closed already: at once
  EXPECT_TRUE(gone.pop());
  EXPECT_TRUE(stream->closed());
  EXPECT_FALSE(stream->send("late"));
}

TEST_F(http_server_test, a_client_that_leaves_closes_the_stream) {
  mailbox<std::shared_ptr<body_stream>> streams;
  mailbox<bool> gone;
  start({}, streaming(streams, gone));
  auto stream = [&] {
    raw_client client(server_->port());
    client.send("GET /api/v1/stream HTTP/1.1\r\nHost: x\r\n\r\n");
    auto s = streams.pop();
    EXPECT_TRUE(s->send("data: 1\n\n"));
    return s;
  }(); // the client's socket closes here
  EXPECT_TRUE(gone.pop());
  EXPECT_TRUE(stream->closed());
  EXPECT_FALSE(stream->send("data: 2\n\n"));
  EXPECT_EQ(final_stats().active_connections, 0u);
}

TEST_F(http_server_test, a_head_request_gets_only_the_streams_header) {
  bool started = false;
  start({}, [&](request, responder answer) {
    answer(event_stream([&](std::shared_ptr<body_stream>) { started = true; }));
  });
  raw_client client(server_->port());
  client.send("HEAD /api/v1/stream HTTP/1.1\r\nHost: x\r\n\r\n");
  auto r = client.read_response(true);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "");
  server_->stop();
  EXPECT_FALSE(started);
}

TEST_F(http_server_test, stop_closes_an_open_stream) {
  mailbox<std::shared_ptr<body_stream>> streams;
  mailbox<bool> gone;
  start({}, streaming(streams, gone));
  raw_client client(server_->port());
  client.send("GET /api/v1/stream HTTP/1.1\r\nHost: x\r\n\r\n");
  auto stream = streams.pop();
  server_->stop();
  EXPECT_TRUE(gone.pop());
  EXPECT_FALSE(stream->send("data: after stop\n\n"));
}

} // namespace
} // namespace vigil::http
