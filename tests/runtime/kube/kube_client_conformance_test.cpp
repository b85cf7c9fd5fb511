// The client against the API test server, over real sockets: every verb,
// pagination, conflicts, throttling and retries, TLS with a CA made here,
// token rotation, and garbage from the server.
#include <algorithm>
#include <fstream>
#include <future>
#include <mutex>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/kube/kube_client.hpp"
#include "runtime/sim/kube/kube_test_server.hpp"
#include "runtime/sim/kube/test_certificates.hpp"
#include "tests/support/fresh_directory.hpp"

namespace vigil::kube {
namespace {

using json = nlohmann::json;

const api_resource nodes{"", "v1", "nodes", false};
const api_resource pods{"", "v1", "pods", true};

json node(const std::string& name) {
  return {
    {"apiVersion", "v1"},
    {"kind", "Node"},
    {"metadata", {{"name", name}, {"labels", {{"nvidia.com/gpu.present", "true"}}}}},
    {"spec", json::object()},
    {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

json pod(const std::string& name, const std::string& node_name) {
  return {
    {"apiVersion", "v1"},
    {"kind", "Pod"},
    {"metadata", {{"name", name}, {"namespace", "jobs"}, {"labels", {{"app", "train"}}}}},
    {"spec",
     {{"nodeName", node_name}, {"containers", {{{"name", "c"}, {"image", "i"}}}}}},
    {"status", {{"phase", "Running"}}}};
}

class client_conformance : public testing::Test {
protected:
  void start(test_server_options server_options = {}, kube_connection conn = {},
             kube_client_options client_options = {}) {
    auto made = kube_test_server::start(std::move(server_options));
    ASSERT_TRUE(made.has_value()) << made.error().to_string();
    server_ = std::move(*made);
    conn.server = server_->url();
    client_options.qps = 0; // the limiter has its own tests
    client_options.backoff.initial = std::chrono::milliseconds{1};
    auto client = make_kube_client_curl(std::move(conn), client_options);
    ASSERT_TRUE(client.has_value()) << client.error().to_string();
    client_ = std::move(*client);
  }

  // Blocks the test (not an actor) until the client answers.
  kube_result call(kube_request request) {
    std::promise<kube_result> done;
    auto answer = done.get_future();
    client_->send(std::move(request),
                  [&](kube_result r) { done.set_value(std::move(r)); });
    return answer.get();
  }

  kube_result call(const std::string& verb, const std::string& path,
                   const std::string& body = {}, const std::string& query = {},
                   const std::string& type = content_type::json) {
    kube_request r;
    r.verb = verb;
    r.path = path;
    r.body = body;
    r.query = query;
    r.content_type = type;
    return call(std::move(r));
  }

  static json body_of(const kube_result& r) {
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().to_string());
    return r.ok() ? json::parse(r.response().body) : json();
  }

  std::unique_ptr<kube_test_server> server_;
  std::unique_ptr<kube_client> client_;
};

TEST_F(client_conformance, create_get_update_patch_delete) {
  start();
  auto created = call("POST", resource_path(nodes), node("gpu-1").dump());
  EXPECT_EQ(created.response().status, 201);
  auto got = body_of(call("GET", resource_path(nodes, "", "gpu-1")));
  EXPECT_EQ(got["metadata"]["name"], "gpu-1");
  const std::string rv = got["metadata"]["resourceVersion"];

  got["metadata"]["labels"]["rack"] = "r1";
  auto updated = body_of(call("PUT", resource_path(nodes, "", "gpu-1"), got.dump()));
  EXPECT_EQ(updated["metadata"]["labels"]["rack"], "r1");
  EXPECT_NE(updated["metadata"]["resourceVersion"], rv);

  // The cordon as vigil and kubectl send it, in each patch format.
  auto merge =
    body_of(call("PATCH", resource_path(nodes, "", "gpu-1"),
                 R"({"spec":{"unschedulable":true}})", "", content_type::merge_patch));
  EXPECT_EQ(merge["spec"]["unschedulable"], true);
  auto strategic = body_of(
    call("PATCH", resource_path(nodes, "", "gpu-1"),
         R"({"spec":{"taints":[{"key":"vigil.dev/quarantine","effect":"NoSchedule"}]}})",
         "", content_type::strategic_merge_patch));
  EXPECT_EQ(strategic["spec"]["taints"].size(), 1u);
  auto jsonpatch =
    body_of(call("PATCH", resource_path(nodes, "", "gpu-1"),
                 R"([{"op":"replace","path":"/spec/unschedulable","value":false}])", "",
                 content_type::json_patch));
  EXPECT_EQ(jsonpatch["spec"]["unschedulable"], false);
  auto status =
    body_of(call("PATCH", resource_path(nodes, "", "gpu-1", "status"),
                 R"({"status":{"conditions":[{"type":"GPUHealthy","status":"False"}]}})",
                 "", content_type::strategic_merge_patch));
  EXPECT_EQ(status["status"]["conditions"].size(), 2u); // merged by type

  EXPECT_TRUE(call("DELETE", resource_path(nodes, "", "gpu-1")).ok());
  auto gone = call("GET", resource_path(nodes, "", "gpu-1"));
  ASSERT_FALSE(gone.ok());
  EXPECT_TRUE(gone.error().not_found());
  EXPECT_EQ(gone.error().reason, "NotFound");
}

TEST_F(client_conformance, stale_update_is_a_conflict_and_a_reread_fixes_it) {
  start();
  call("POST", resource_path(nodes), node("gpu-1").dump());
  auto first = body_of(call("GET", resource_path(nodes, "", "gpu-1")));
  call("PATCH", resource_path(nodes, "", "gpu-1"), R"({"metadata":{"labels":{"x":"1"}}})",
       "", content_type::merge_patch);
  auto stale = call("PUT", resource_path(nodes, "", "gpu-1"), first.dump());
  ASSERT_FALSE(stale.ok());
  EXPECT_TRUE(stale.error().conflict());
  EXPECT_EQ(stale.error().reason, "Conflict");
  auto fresh = body_of(call("GET", resource_path(nodes, "", "gpu-1")));
  fresh["spec"]["unschedulable"] = true;
  EXPECT_TRUE(call("PUT", resource_path(nodes, "", "gpu-1"), fresh.dump()).ok());
}

TEST_F(client_conformance, list_with_selectors_and_pages) {
  start();
  for (int i = 0; i < 25; ++i)
    call("POST", resource_path(pods, "jobs"),
         pod("p" + std::to_string(100 + i), i % 5 == 0 ? "gpu-1" : "gpu-2").dump());
  auto on_node = body_of(call("GET", resource_path(pods, "jobs"), "",
                              "fieldSelector=" + query_escape("spec.nodeName=gpu-1")));
  EXPECT_EQ(on_node["items"].size(), 5u);
  auto labelled = body_of(call("GET", resource_path(pods), "",
                               "labelSelector=" + query_escape("app in (train,eval)")));
  EXPECT_EQ(labelled["items"].size(), 25u);

  std::set<std::string> seen;
  std::string next;
  int pages = 0;
  do {
    auto page =
      body_of(call("GET", resource_path(pods, "jobs"), "",
                   "limit=10" + (next.empty() ? "" : "&continue=" + query_escape(next))));
    for (auto& item : page["items"])
      seen.insert(item["metadata"]["name"].get<std::string>());
    next = page["metadata"].value("continue", "");
    ++pages;
  } while (!next.empty() && pages < 10);
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(seen.size(), 25u);
}

TEST_F(client_conformance, eviction_blocked_by_a_pdb_is_429_with_a_status) {
  start();
  call("POST", resource_path(pods, "jobs"), pod("solo", "gpu-1").dump());
  json pdb = {
    {"apiVersion", "policy/v1"},
    {"kind", "PodDisruptionBudget"},
    {"metadata", {{"name", "keep"}, {"namespace", "jobs"}}},
    {"spec", {{"minAvailable", 1}, {"selector", {{"matchLabels", {{"app", "train"}}}}}}}};
  ASSERT_TRUE(call("POST",
                   resource_path({"policy", "v1", "poddisruptionbudgets", true}, "jobs"),
                   pdb.dump())
                .ok());
  json eviction = {{"apiVersion", "policy/v1"},
                   {"kind", "Eviction"},
                   {"metadata", {{"name", "solo"}, {"namespace", "jobs"}}}};
  auto request = make_request("POST", resource_path(pods, "jobs", "solo", "eviction"),
                              eviction.dump());
  request.retry_throttled = false; // the drain retries evictions on its own schedule
  const auto before = server_->requests_served("POST");
  auto refused = call(request);
  EXPECT_EQ(server_->requests_served("POST") - before, 1u); // not retried inside
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.error().throttled());
  EXPECT_NE(refused.error().message.find("disruption budget"), std::string::npos)
    << refused.error().to_string();
}

TEST_F(client_conformance, throttling_and_errors_are_retried_then_reported) {
  kube_client_options options;
  options.backoff.max_attempts = 3;
  start({}, {}, options);
  call("POST", resource_path(nodes), node("gpu-1").dump());
  const auto before = server_->requests_served();
  server_->set_faults({std::chrono::milliseconds{0}, 0.0, 1.0, 0});
  auto throttled = call("GET", resource_path(nodes, "", "gpu-1"));
  ASSERT_FALSE(throttled.ok());
  EXPECT_TRUE(throttled.error().throttled());
  EXPECT_EQ(throttled.error().retry_after, std::chrono::seconds{0});
  EXPECT_EQ(server_->requests_served() - before, 3u); // every attempt reached the server

  server_->set_faults({std::chrono::milliseconds{0}, 0.5, 0.0, 0});
  int ok = 0;
  for (int i = 0; i < 20; ++i)
    ok += call("GET", resource_path(nodes, "", "gpu-1")).ok() ? 1 : 0;
  EXPECT_GE(ok, 15); // 1 - 0.5^3 of them, give or take the dice
  server_->set_faults({});
}

// More requests than the client has connections wait in the client, and an
// urgent one (a cordon) starts before those still waiting: here 40 GETs on
// 16 connections, each answered after 50 ms, go in three waves, and the
// urgent GET sent after them is in the second.
TEST_F(client_conformance, an_urgent_request_goes_before_the_waiting_ones) {
  start();
  call("POST", resource_path(nodes), node("gpu-1").dump());
  test_server_faults slow;
  slow.latency = std::chrono::milliseconds{50};
  server_->set_faults(slow);
  std::mutex mutex;
  std::vector<std::string> finished;
  std::promise<void> all;
  const std::size_t total = 41;
  auto record = [&](std::string name) {
    return [&, name](kube_result r) {
      EXPECT_TRUE(r.ok()) << name;
      std::lock_guard<std::mutex> guard(mutex);
      finished.push_back(name);
      if (finished.size() == total)
        all.set_value();
    };
  };
  for (int i = 0; i < 40; ++i)
    client_->send(make_request("GET", resource_path(nodes, "", "gpu-1")),
                  record("waiting-" + std::to_string(i)));
  auto urgent = make_request("GET", resource_path(nodes, "", "gpu-1"));
  urgent.urgent = true;
  client_->send(std::move(urgent), record("urgent"));
  all.get_future().wait();
  server_->set_faults({});
  const auto at =
    std::find(finished.begin(), finished.end(), "urgent") - finished.begin();
  EXPECT_LT(at, 32) << "the urgent request waited behind requests sent before it";
}

TEST_F(client_conformance, injected_node_conflicts_hit_only_writes_based_on_a_version) {
  start();
  call("POST", resource_path(nodes), node("gpu-1").dump());
  test_server_faults conflicts;
  conflicts.node_conflict_fraction = 1.0;
  server_->set_faults(conflicts);
  auto based =
    call("PATCH", resource_path(nodes, "", "gpu-1"),
         R"({"metadata":{"resourceVersion":"1"},"spec":{"unschedulable":true}})", "",
         "application/merge-patch+json");
  ASSERT_FALSE(based.ok());
  EXPECT_TRUE(based.error().conflict()) << based.error().to_string();
  auto blind =
    call("PATCH", resource_path(nodes, "", "gpu-1"), R"({"spec":{"unschedulable":true}})",
         "", "application/merge-patch+json");
  EXPECT_TRUE(blind.ok());
  EXPECT_TRUE(call("GET", resource_path(nodes, "", "gpu-1")).ok());
  server_->set_faults({});
}

TEST_F(client_conformance, tls_with_a_generated_ca_and_client_certificates) {
  auto pki = make_test_pki();
  ASSERT_TRUE(pki.has_value()) << pki.error().to_string();
  test_server_options tls;
  tls.tls = true;
  tls.cert_pem = pki->server_cert_pem;
  tls.key_pem = pki->server_key_pem;
  tls.client_ca_pem = pki->ca_cert_pem;
  tls.tokens = {"only-token"};
  kube_connection conn;
  conn.ca_data = pki->ca_cert_pem;
  conn.client_cert_data = pki->client_cert_pem;
  conn.client_key_data = pki->client_key_pem;
  start(tls, conn);
  EXPECT_EQ(server_->url().rfind("https://", 0), 0u);
  auto version = body_of(call("GET", "/version"));
  EXPECT_FALSE(version.value("gitVersion", "").empty());

  // Without the CA the server is not trusted; without a credential, 401.
  auto untrusted = make_kube_client_curl(kube_connection{server_->url()}, {});
  std::promise<kube_result> a;
  (*untrusted)->send(make_request("GET", "/version"), [&](kube_result r) {
    a.set_value(std::move(r));
  });
  auto refused = a.get_future().get();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().status, 0);
  kube_connection anonymous;
  anonymous.server = server_->url();
  anonymous.ca_data = pki->ca_cert_pem;
  kube_client_options once;
  once.backoff.max_attempts = 1;
  auto anon = make_kube_client_curl(anonymous, once);
  std::promise<kube_result> b;
  (*anon)->send(make_request("GET", "/api/v1/nodes"),
                [&](kube_result r) { b.set_value(std::move(r)); });
  auto unauthorised = b.get_future().get();
  ASSERT_FALSE(unauthorised.ok());
  EXPECT_EQ(unauthorised.error().status, 401);
}

TEST_F(client_conformance, rotated_token_file_is_picked_up) {
  const auto dir = test::fresh_directory();
  const auto token_file = dir + "/token";
  std::ofstream(token_file) << "first\n";
  test_server_options auth;
  auth.tokens = {"first"};
  kube_connection conn;
  conn.token_file = token_file;
  kube_client_options once;
  once.backoff.max_attempts = 1;
  start(auth, conn, once);
  EXPECT_TRUE(call("GET", resource_path(nodes)).ok());
  server_->set_tokens({"second"});
  EXPECT_EQ(call("GET", resource_path(nodes)).error().status, 401);
  std::ofstream(token_file) << "second-token-longer\n"; // size differs: seen at once
  server_->set_tokens({"second-token-longer"});
  EXPECT_TRUE(call("GET", resource_path(nodes)).ok());
}

// A server that answers one watch with a line cut short, then hangs up.
TEST(kube_watch, a_truncated_watch_line_is_an_error_not_a_crash) {
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 1), 0);
  socklen_t len = sizeof addr;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  std::thread server([listener] {
    int conn = ::accept(listener, nullptr, nullptr);
    char buf[4096];
    [[maybe_unused]] auto n = ::read(conn, buf, sizeof buf);
    const std::string line = R"({"type":"ADDED","object":{"metadata":{)";
    const std::string reply = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                              "Content-Length: "
                              + std::to_string(line.size())
                              + "\r\nConnection: close\r\n\r\n" + line;
    [[maybe_unused]] auto w = ::write(conn, reply.data(), reply.size());
    ::close(conn);
  });
  auto client = make_kube_client_curl(
    kube_connection{"http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port))}, {});
  ASSERT_TRUE(client.has_value());
  std::promise<std::optional<kube_error>> ended;
  int lines = 0;
  (*client)->watch(
    make_request("GET", "/api/v1/nodes", "", "watch=true"),
    [&](std::string_view) { ++lines; },
    [&](std::optional<kube_error> why) { ended.set_value(why); });
  auto why = ended.get_future().get();
  server.join();
  ::close(listener);
  EXPECT_EQ(lines, 0);
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(why->reason, "TruncatedWatchLine") << why->to_string();
}

TEST(kube_api, garbage_bodies_are_errors_not_crashes) {
  auto e = error_from_response({500, "<html>oops</html>"});
  EXPECT_EQ(e.status, 500);
  EXPECT_EQ(e.reason, "HTTP500");
  EXPECT_EQ(e.message, "<html>oops</html>");
  auto truncated = error_from_response({409, R"({"kind":"Status","reason":"Confl)"});
  EXPECT_TRUE(truncated.conflict());
  auto status = error_from_response(
    {429, R"({"kind":"Status","reason":"TooManyRequests","message":"slow down",)"
          R"("details":{"retryAfterSeconds":7}})"});
  EXPECT_EQ(status.retry_after, std::chrono::seconds{7});
  EXPECT_EQ(status.message, "slow down");
  EXPECT_EQ(parse_retry_after(" 3 "), std::chrono::seconds{3});
  EXPECT_EQ(parse_retry_after("Wed, 21 Oct 2026 07:28:00 GMT"), std::chrono::seconds{1});
  EXPECT_EQ(resource_path({"policy", "v1", "poddisruptionbudgets", true}, "ns", "x"),
            "/apis/policy/v1/namespaces/ns/poddisruptionbudgets/x");
  EXPECT_EQ(resource_path(nodes, "ignored", "n", "status"), "/api/v1/nodes/n/status");
  EXPECT_EQ(query_escape("spec.nodeName=a b"), "spec.nodeName%3Da%20b");
}

} // namespace
} // namespace vigil::kube
