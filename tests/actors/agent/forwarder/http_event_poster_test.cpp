#include "actors/agent/forwarder/http_event_poster.hpp"

#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/support/fresh_directory.hpp"
#include "tests/support/loopback_http_server.hpp"

namespace vigil::agent {
namespace {

using test::loopback_server;
using test::response;

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

http_poster_options options_for(const std::string& url) {
  http_poster_options o;
  o.url = url;
  o.connect_timeout = std::chrono::milliseconds{5000};
  o.request_timeout = std::chrono::milliseconds{10000};
  return o;
}

const std::string body = "{\"id\":\"1\"}\n{\"id\":\"2\"}\n";

TEST(http_event_poster, posts_ndjson_with_the_bearer_token) {
  const auto token_file = test::fresh_directory() + "/token";
  write_file(token_file, "secret-1\n");
  const std::string reply =
    R"({"results":[{"id":"1","status":"accepted"},)"
    R"({"id":"2","status":"rejected","error":"nodeName: missing"}]})";
  loopback_server server({response(200, "OK", reply)});
  auto options = options_for(server.url() + "/");
  options.token_file = token_file;
  http_event_poster poster(options);
  auto result = poster.post(body);
  server.join();
  EXPECT_EQ(result.outcome, post_outcome::accepted);
  EXPECT_EQ(result.http_status, 200);
  ASSERT_EQ(result.lines.size(), 2u);
  EXPECT_TRUE(result.lines[0].accepted);
  EXPECT_FALSE(result.lines[1].accepted);
  EXPECT_EQ(result.lines[1].id, "2");
  EXPECT_EQ(result.lines[1].error, "nodeName: missing");
  ASSERT_EQ(server.requests().size(), 1u);
  const auto& request = server.requests()[0];
  EXPECT_EQ(request.head.rfind("POST /v1/events HTTP/1.1\r\n", 0), 0u) << request.head;
  EXPECT_NE(request.head.find("Authorization: Bearer secret-1\r\n"), std::string::npos);
  EXPECT_NE(request.head.find("Content-Type: application/x-ndjson\r\n"),
            std::string::npos);
  EXPECT_EQ(request.body, body);
}

// The heartbeat's wire format: POST <url>/v1/heartbeat, JSON, the events'
// bearer token; any 2xx is accepted.
TEST(http_event_poster, posts_the_heartbeat_as_json_with_the_bearer_token) {
  const auto token_file = test::fresh_directory() + "/token";
  write_file(token_file, "secret-1\n");
  loopback_server server(
    {response(204, "No Content", ""), response(404, "Not Found", "")});
  auto options = options_for(server.url() + "/");
  options.token_file = token_file;
  http_event_poster poster(options);
  const std::string heartbeat = R"({"nodeName":"gpu-node-1"})";
  EXPECT_EQ(poster.post_heartbeat(heartbeat).outcome, post_outcome::accepted);
  auto missing = poster.post_heartbeat(heartbeat); // a control plane without the route
  server.join();
  EXPECT_EQ(missing.outcome, post_outcome::retryable);
  EXPECT_EQ(missing.failure_class, post_failure::endpoint);
  EXPECT_EQ(missing.http_status, 404);
  ASSERT_EQ(server.requests().size(), 2u);
  const auto& request = server.requests()[0];
  EXPECT_EQ(request.head.rfind("POST /v1/heartbeat HTTP/1.1\r\n", 0), 0u) << request.head;
  EXPECT_NE(request.head.find("Authorization: Bearer secret-1\r\n"), std::string::npos);
  EXPECT_NE(request.head.find("Content-Type: application/json\r\n"), std::string::npos);
  EXPECT_EQ(request.body, heartbeat);
}

TEST(http_event_poster, a_changed_token_file_is_read_again) {
  const auto token_file = test::fresh_directory() + "/token";
  write_file(token_file, "first");
  loopback_server server({response(200, "OK", "{}"), response(200, "OK", "{}")});
  auto options = options_for(server.url());
  options.token_file = token_file;
  http_event_poster poster(options);
  EXPECT_EQ(poster.post(body).outcome, post_outcome::accepted);
  write_file(token_file, "rotated-token\n");
  EXPECT_EQ(poster.post(body).outcome, post_outcome::accepted);
  server.join();
  ASSERT_EQ(server.requests().size(), 2u);
  EXPECT_NE(server.requests()[0].head.find("Bearer first\r\n"), std::string::npos);
  EXPECT_NE(server.requests()[1].head.find("Bearer rotated-token\r\n"),
            std::string::npos);
}

TEST(http_event_poster, unavailable_is_retryable_with_retry_after) {
  loopback_server server(
    {response(503, "Service Unavailable", "journal down", "Retry-After: 7\r\n"),
     response(429, "Too Many Requests", "")});
  http_event_poster poster(options_for(server.url()));
  auto result = poster.post(body);
  EXPECT_EQ(result.outcome, post_outcome::retryable);
  EXPECT_EQ(result.http_status, 503);
  EXPECT_EQ(result.retry_after, std::chrono::seconds{7});
  EXPECT_EQ(result.detail, "journal down");
  result = poster.post(body);
  EXPECT_EQ(result.outcome, post_outcome::retryable);
  EXPECT_EQ(result.http_status, 429);
  EXPECT_FALSE(result.retry_after.has_value());
}

// Only a verdict per line may drop events: a 400 without one (a proxy, some
// other server) is about the request, not the events, and is retried.
TEST(http_event_poster, a_bad_request_drops_events_only_with_per_line_verdicts) {
  const std::string verdicts =
    R"({"results":[{"id":"1","status":"rejected","error":"nodeName: missing"},)"
    R"({"id":"2","status":"rejected","error":"nodeName: missing"}]})";
  loopback_server server({response(400, "Bad Request", "line 2: nodeName: missing"),
                          response(400, "Bad Request", verdicts)});
  http_event_poster poster(options_for(server.url()));
  auto result = poster.post(body);
  EXPECT_EQ(result.outcome, post_outcome::retryable);
  EXPECT_EQ(result.failure_class, post_failure::endpoint);
  EXPECT_EQ(result.http_status, 400);
  EXPECT_EQ(result.detail, "line 2: nodeName: missing");
  EXPECT_TRUE(result.lines.empty());
  result = poster.post(body);
  server.join();
  EXPECT_EQ(result.outcome, post_outcome::rejected);
  EXPECT_EQ(result.failure_class, post_failure::none);
  EXPECT_EQ(result.lines.size(), 2u);
}

// The ingest URL that `vigil demo --serve` prints works as --control-url.
TEST(http_event_poster, the_ingest_url_is_taken_as_the_base_url) {
  loopback_server server({response(200, "OK", "{}"), response(204, "No Content", "")});
  http_event_poster poster(options_for(server.url() + "/v1/events/"));
  EXPECT_EQ(poster.base_url(), server.url());
  EXPECT_EQ(poster.post(body).outcome, post_outcome::accepted);
  EXPECT_EQ(poster.post_heartbeat("{}").outcome, post_outcome::accepted);
  server.join();
  ASSERT_EQ(server.requests().size(), 2u);
  EXPECT_EQ(server.requests()[0].head.rfind("POST /v1/events HTTP/1.1\r\n", 0), 0u);
  EXPECT_EQ(server.requests()[1].head.rfind("POST /v1/heartbeat HTTP/1.1\r\n", 0), 0u);
}

TEST(http_event_poster, base_urls_lose_trailing_slashes_and_routes) {
  EXPECT_EQ(control_base_url("https://c:8443"), "https://c:8443");
  EXPECT_EQ(control_base_url("https://c:8443//"), "https://c:8443");
  EXPECT_EQ(control_base_url("https://c:8443/v1/events"), "https://c:8443");
  EXPECT_EQ(control_base_url("https://c:8443/v1/events/"), "https://c:8443");
  EXPECT_EQ(control_base_url("https://c:8443/v1/heartbeat"), "https://c:8443");
  EXPECT_EQ(control_base_url("https://c/prefix/v1/events"), "https://c/prefix");
  EXPECT_EQ(control_base_url("https://c:8443/v1/eventsx"), "https://c:8443/v1/eventsx");
  EXPECT_EQ(control_base_url("/v1/events"), "/v1/events");
  EXPECT_EQ(control_base_url(""), "");
}

TEST(http_event_poster, a_refused_connection_is_retryable) {
  int probe = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(probe, reinterpret_cast<sockaddr*>(&addr), len), 0);
  ASSERT_EQ(::getsockname(probe, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ::close(probe); // nothing listens on this port now
  http_event_poster poster(
    options_for("http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port))));
  auto result = poster.post(body);
  EXPECT_EQ(result.outcome, post_outcome::retryable);
  EXPECT_EQ(result.http_status, 0);
  EXPECT_FALSE(result.detail.empty());
}

TEST(http_event_poster, a_missing_token_file_is_retryable_and_names_the_file) {
  const auto token_file = test::fresh_directory() + "/absent";
  auto options = options_for("http://127.0.0.1:1");
  options.token_file = token_file;
  http_event_poster poster(options);
  auto result = poster.post(body);
  EXPECT_EQ(result.outcome, post_outcome::retryable);
  EXPECT_NE(result.detail.find(token_file), std::string::npos);
}

TEST(http_event_poster, replies_are_classified) {
  using result = std::pair<post_outcome, post_failure>;
  const result accepted{post_outcome::accepted, post_failure::none};
  EXPECT_EQ(classify_reply(200, false), accepted);
  EXPECT_EQ(classify_reply(204, true), accepted);
  const auto retry = [](post_failure why) {
    return result{post_outcome::retryable, why};
  };
  EXPECT_EQ(classify_reply(0, false), retry(post_failure::unreachable));
  for (long s : {401L, 403L})
    EXPECT_EQ(classify_reply(s, true), retry(post_failure::credentials)) << s;
  for (long s : {408L, 429L, 500L, 502L, 503L})
    EXPECT_EQ(classify_reply(s, true), retry(post_failure::overloaded)) << s;
  EXPECT_EQ(classify_reply(413, false), retry(post_failure::too_large));
  for (long s : {101L, 302L, 400L, 404L, 405L, 415L, 422L})
    EXPECT_EQ(classify_reply(s, false), retry(post_failure::endpoint)) << s;
  for (long s : {404L, 405L, 415L})
    EXPECT_EQ(classify_reply(s, true), retry(post_failure::endpoint)) << s;
  for (long s : {400L, 422L})
    EXPECT_EQ(classify_reply(s, true), result(post_outcome::rejected, post_failure::none))
      << s;
}

TEST(http_event_poster, failures_are_explained_plainly) {
  post_result r;
  r.failure_class = post_failure::endpoint;
  r.http_status = 404;
  r.detail = "no such endpoint: /v1/events/v1/events";
  auto text = explain_post_failure(r, "http://c:8080", "/v1/events");
  EXPECT_NE(text.find("http://c:8080 has no /v1/events (HTTP 404)"), std::string::npos)
    << text;
  EXPECT_NE(text.find("--control-url"), std::string::npos) << text;
  r.failure_class = post_failure::credentials;
  r.http_status = 401;
  EXPECT_NE(explain_post_failure(r, "u", "/v1/events").find("--token-file"),
            std::string::npos);
  r.failure_class = post_failure::unreachable;
  r.http_status = 0;
  r.detail = "Connection refused";
  text = explain_post_failure(r, "u", "/v1/events");
  EXPECT_NE(text.find("cannot reach the control plane at u: Connection refused"),
            std::string::npos)
    << text;
}

TEST(http_event_poster, line_results_tolerate_odd_bodies) {
  EXPECT_TRUE(parse_line_results("").empty());
  EXPECT_TRUE(parse_line_results("not json").empty());
  EXPECT_TRUE(parse_line_results(R"({"results":"no"})").empty());
  auto lines = parse_line_results(R"({"results":[{"status":"duplicate"},7]})");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_TRUE(lines[0].accepted);
  EXPECT_TRUE(lines[1].accepted);
}

} // namespace
} // namespace vigil::agent
