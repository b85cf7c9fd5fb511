#include "actors/janitor/janitor_metrics.hpp"

#include <gtest/gtest.h>

#include <sstream>
#include <vector>

namespace vigil {
namespace {

bool has_line(const std::string& text, const std::string& line) {
  std::istringstream in{text};
  for (std::string l; std::getline(in, l);)
    if (l == line)
      return true;
  return false;
}

std::size_t count_lines_starting(const std::string& text, const std::string& prefix) {
  std::istringstream in{text};
  std::size_t n = 0;
  for (std::string l; std::getline(in, l);)
    n += l.rfind(prefix, 0) == 0;
  return n;
}

const gpu_reset_labels gpu_a{"node-1", "NVIDIA-H100-80GB-HBM3", "GPU-a"};
// prometheus-cpp writes a series' labels in name order (then le for buckets).
const std::string per_gpu =
  R"(gpu_id="GPU-a",gpu_type="NVIDIA-H100-80GB-HBM3",node="node-1")";
const std::string per_type = R"(gpu_type="NVIDIA-H100-80GB-HBM3",node="node-1")";

// seed 001 "Metrics": the five families with the seed's labels and the status
// values "success" and "failure" (runtime/install/assets/vigil-rules.yaml uses them).
TEST(janitor_metrics, gpu_resets_carry_the_seed_labels_and_status_values) {
  janitor_metrics m;
  m.reset_started(gpu_a);
  auto before = m.render();
  // Started: its completions and reasons exist at 0, so the first is a step.
  EXPECT_TRUE(has_line(before, "gpu_reset_requests_total{" + per_gpu + "} 1"));
  EXPECT_TRUE(has_line(before, "gpu_reset_requests_completed_total{" + per_gpu
                                 + R"(,status="success"} 0)"));
  EXPECT_TRUE(has_line(before, "gpu_reset_requests_completed_total{" + per_gpu
                                 + R"(,status="failure"} 0)"));
  for (const char* reason :
       {"teardown_failed", "job_create_failed", "reset_command_failed",
        "health_check_failed", "gpu_in_use", "job_failed", "timeout", "redeploy_failed",
        "labels_not_restored"})
    EXPECT_TRUE(has_line(before, "gpu_reset_failure_reasons_total{" + per_type
                                   + ",reason=\"" + reason + "\"} 0"))
      << reason;
  EXPECT_TRUE(has_line(before, "gpu_reset_duration_seconds_count{" + per_type
                                 + R"(,status="failure"} 0)"));

  m.reset_finished(gpu_a, false, "health_check_failed", 150);
  m.reset_started(gpu_a);
  m.reset_finished(gpu_a, true, "", 45);
  auto text = m.render();
  EXPECT_TRUE(has_line(text, "gpu_reset_requests_total{" + per_gpu + "} 2"));
  EXPECT_TRUE(has_line(text, "gpu_reset_requests_completed_total{" + per_gpu
                               + R"(,status="success"} 1)"));
  EXPECT_TRUE(has_line(text, "gpu_reset_requests_completed_total{" + per_gpu
                               + R"(,status="failure"} 1)"));
  EXPECT_TRUE(has_line(text, "gpu_reset_failure_reasons_total{" + per_type
                               + R"(,reason="health_check_failed"} 1)"));
  // The histogram per (node, gpu_type, status), cumulative buckets.
  const std::string failed = per_type + R"(,status="failure")";
  EXPECT_TRUE(
    has_line(text, "gpu_reset_duration_seconds_bucket{" + failed + R"(,le="120"} 0)"));
  EXPECT_TRUE(
    has_line(text, "gpu_reset_duration_seconds_bucket{" + failed + R"(,le="300"} 1)"));
  EXPECT_TRUE(
    has_line(text, "gpu_reset_duration_seconds_bucket{" + failed + R"(,le="+Inf"} 1)"));
  EXPECT_TRUE(has_line(text, "gpu_reset_duration_seconds_sum{" + failed + "} 150"));
  EXPECT_TRUE(has_line(text, "gpu_reset_duration_seconds_count{" + failed + "} 1"));
  const std::string succeeded = per_type + R"(,status="success")";
  EXPECT_TRUE(
    has_line(text, "gpu_reset_duration_seconds_bucket{" + succeeded + R"(,le="30"} 0)"));
  EXPECT_TRUE(
    has_line(text, "gpu_reset_duration_seconds_bucket{" + succeeded + R"(,le="60"} 1)"));
  // One HELP and TYPE per family.
  for (const char* family :
       {"gpu_reset_requests_total", "gpu_reset_requests_completed_total",
        "gpu_reset_duration_seconds", "gpu_reset_active_requests",
        "gpu_reset_failure_reasons_total"})
    EXPECT_EQ(count_lines_starting(text, std::string{"# TYPE "} + family + " "), 1u)
      << family;
  EXPECT_TRUE(has_line(text, "# TYPE gpu_reset_duration_seconds histogram"));
  EXPECT_TRUE(has_line(text, "# TYPE gpu_reset_active_requests gauge"));
}

TEST(janitor_metrics, active_resets_by_node_and_type_drop_to_zero) {
  janitor_metrics m;
  m.set_active_resets({{{"node-1", "NVIDIA-H100-80GB-HBM3"}, 1}, {{"node-2", ""}, 2}});
  auto text = m.render();
  EXPECT_TRUE(has_line(text, "gpu_reset_active_requests{" + per_type + "} 1"));
  EXPECT_TRUE(
    has_line(text, R"(gpu_reset_active_requests{gpu_type="unknown",node="node-2"} 2)"));
  EXPECT_EQ(m.active_resets(), 3);
  m.set_active_resets({{{"node-2", ""}, 1}});
  text = m.render();
  EXPECT_TRUE(has_line(text, "gpu_reset_active_requests{" + per_type + "} 0"));
  EXPECT_EQ(m.active_resets(), 1);
}

TEST(janitor_metrics, reboots_by_node_and_label_values_escaped) {
  janitor_metrics m;
  m.reboot_started("node-3");
  m.reboot_finished("node-3", false, "timeout", 1900);
  m.set_active_reboots({{"node-3", 0}});
  auto text = m.render();
  EXPECT_TRUE(has_line(text, R"(reboot_node_requests_total{node="node-3"} 1)"));
  EXPECT_TRUE(has_line(
    text, R"(reboot_node_requests_completed_total{node="node-3",status="failure"} 1)"));
  EXPECT_TRUE(has_line(
    text, R"(reboot_node_failure_reasons_total{node="node-3",reason="timeout"} 1)"));
  EXPECT_TRUE(has_line(
    text,
    R"(reboot_node_duration_seconds_bucket{node="node-3",status="failure",le="1800"} 0)"));
  EXPECT_TRUE(has_line(text, R"(reboot_node_active_requests{node="node-3"} 0)"));
  m.reset_started({"we\"ird\\node", "", "GPU-x\n"});
  EXPECT_TRUE(has_line(
    m.render(),
    R"(gpu_reset_requests_total{gpu_id="GPU-x\n",gpu_type="unknown",node="we\"ird\\node"} 1)"));
}

http::response get(const http::handler& handler, const std::string& method,
                   const std::string& path) {
  http::request req;
  req.method = method;
  req.path = path;
  req.target = path;
  http::response out;
  handler(req, [&](http::response r) { out = std::move(r); });
  return out;
}

// `vigil janitor` on its own: /metrics with the same text, and the gateway's.
TEST(janitor_metrics, the_janitor_serves_metrics_and_health) {
  auto metrics = std::make_shared<janitor_metrics>();
  metrics->reset_started(gpu_a);
  auto handler = make_janitor_http_handler(metrics, [] {
    return metrics::family_list{
      metrics::counter("vigil_kube_requests_total", "requests", 7)};
  });
  auto scraped = get(handler, "GET", "/metrics");
  EXPECT_EQ(scraped.status, 200);
  EXPECT_EQ(scraped.content_type, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_TRUE(has_line(scraped.body, "gpu_reset_requests_total{" + per_gpu + "} 1"));
  EXPECT_TRUE(has_line(scraped.body, "vigil_kube_requests_total 7"));
  EXPECT_EQ(get(handler, "GET", "/healthz").status, 200);
  EXPECT_EQ(get(handler, "GET", "/readyz").status, 200);
  EXPECT_EQ(get(handler, "GET", "/v1/events").status, 404);
  EXPECT_EQ(get(handler, "POST", "/metrics").status, 405);
  auto alone = make_janitor_http_handler(metrics);
  EXPECT_EQ(get(alone, "GET", "/metrics").body, metrics->render());
}

} // namespace
} // namespace vigil
