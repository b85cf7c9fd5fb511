// The agent's /healthz and /metrics over real HTTP (the project's server on
// 127.0.0.1, port 0) with a real actor system: what a kubelet probe and a
// Prometheus scrape see. The timing-dependent cases (a component that does
// not answer in time) are the actor tests' (agent_actors_test), on the
// virtual clock; here a monitor that stopped gives the 503 at once.
#include "actors/agent/agent_endpoints.hpp"

#include <string>

#include <caf/all.hpp>
#include <curl/curl.h>
#include <gtest/gtest.h>

namespace vigil {
namespace {

struct http_answer {
  long status = 0;
  std::string body;
};

std::size_t collect(char* data, std::size_t size, std::size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

http_answer get(std::uint16_t port, const std::string& path) {
  http_answer answer;
  CURL* curl = curl_easy_init();
  const auto url = "http://127.0.0.1:" + std::to_string(port) + path;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 10L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &answer.body);
  if (curl_easy_perform(curl) == CURLE_OK)
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &answer.status);
  curl_easy_cleanup(curl);
  return answer;
}

caf::behavior fake_forwarder(caf::event_based_actor*, agent::forwarder_figures figures) {
  return {[=](figures_atom) { return figures; }};
}

caf::behavior fake_monitor(caf::event_based_actor*, agent::monitor_figures figures) {
  return {[=](figures_atom) { return figures; }};
}

class agent_endpoints_http : public testing::Test {
protected:
  void SetUp() override {
    agent::forwarder_figures f;
    f.events.submitted = 5;
    f.events.events_accepted = 4;
    f.spooled = 1;
    f.spool_depth = 1;
    f.heartbeats.accepted = 3;
    f.last_accepted = from_unix(1700000000, 0);
    agent::monitor_figures xid;
    xid.polls = 12;
    xid.lines = 40;
    agent::monitor_figures nic;
    nic.polls = 2;
    components_.forwarder = system_.spawn(fake_forwarder, f);
    components_.xid_monitor = system_.spawn(fake_monitor, xid);
    components_.nic_monitor = system_.spawn(fake_monitor, nic);
    endpoints_ =
      system_.spawn(agent_endpoints, components_, caf::timespan{std::chrono::seconds{2}});
    http::server_options options; // 127.0.0.1, port 0
    auto started = http::server::start(options, make_agent_handler(endpoints_));
    ASSERT_TRUE(started.has_value()) << started.error().to_string();
    server_ = std::move(*started);
  }

  void TearDown() override {
    if (server_)
      server_->stop();
    for (const auto& a : {components_.forwarder, components_.xid_monitor,
                          components_.nic_monitor, endpoints_})
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }

  caf::actor_system_config config_;
  caf::actor_system system_{config_};
  agent_components components_;
  caf::actor endpoints_;
  std::unique_ptr<http::server> server_;
};

TEST_F(agent_endpoints_http, healthz_and_metrics_answer_on_the_metrics_port) {
  ASSERT_NE(server_->port(), 0);
  auto health = get(server_->port(), "/healthz");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, "ok: forwarder, xid_monitor, nic_monitor\n");

  auto metrics = get(server_->port(), "/metrics");
  EXPECT_EQ(metrics.status, 200);
  for (const auto* line :
       {"# TYPE vigil_agent_events_sent_total counter\n",
        "vigil_agent_events_submitted_total 5\n", "vigil_agent_events_sent_total 4\n",
        "vigil_agent_events_spooled_total 1\n", "vigil_agent_spool_depth 1\n",
        "vigil_agent_heartbeats_total{outcome=\"accepted\"} 3\n",
        "vigil_agent_last_send_success_timestamp_seconds 1700000000\n",
        "vigil_agent_polls_total{monitor=\"xid_monitor\"} 12\n",
        "vigil_agent_polls_total{monitor=\"nic_monitor\"} 2\n",
        "vigil_agent_kernel_log_lines_total 40\n"})
    EXPECT_NE(metrics.body.find(line), std::string::npos) << line << metrics.body;

  EXPECT_EQ(get(server_->port(), "/other").status, 404);
}

TEST_F(agent_endpoints_http, healthz_is_503_naming_a_monitor_that_stopped) {
  caf::anon_send_exit(components_.nic_monitor, caf::exit_reason::kill);
  http_answer health;
  for (int i = 0; i < 100 && health.status != 503; ++i) // the exit lands asynchronously
    health = get(server_->port(), "/healthz");
  EXPECT_EQ(health.status, 503);
  EXPECT_EQ(health.body, "not running: nic_monitor (stopped)\n");
  auto metrics = get(server_->port(), "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("vigil_agent_component_up{component=\"nic_monitor\"} 0\n"),
            std::string::npos)
    << metrics.body;
}

} // namespace
} // namespace vigil
