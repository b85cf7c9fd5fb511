#include "actors/control/ingest/alertmanager.hpp"

#include <gtest/gtest.h>

namespace vigil::control {
namespace {

// A webhook body in Alertmanager's own shape (notify/webhook: version 4).
std::string payload(const std::string& alerts, const std::string& status = "firing") {
  return R"({"version":"4","groupKey":"{}:{alertname=\"GpuXid\"}","truncatedAlerts":0,)"
         R"("status":")"
         + status + R"(","receiver":"vigil","groupLabels":{"alertname":"GpuXid"},)"
         + R"("commonLabels":{},"commonAnnotations":{},"externalURL":"http://am:9093",)"
         + R"("alerts":[)" + alerts + "]}";
}

std::string alert(const std::string& status, const std::string& labels,
                  const std::string& annotations = R"({"summary":"XID 79 on GPU 3"})") {
  return R"({"status":")" + status + R"(","labels":)" + labels + R"(,"annotations":)"
         + annotations + R"(,"startsAt":"2026-11-26T08:00:00.123Z",)"
         + (status == "resolved" ? R"("endsAt":"2026-11-26T08:10:00Z",)"
                                 : R"("endsAt":"0001-01-01T00:00:00Z",)")
         + R"("generatorURL":"http://prom/graph","fingerprint":"8f3c2a1b00d4e5f6"})";
}

// dcgm-exporter's labels as a PrometheusRule on it fires them.
const std::string dcgm_labels =
  R"({"alertname":"GpuXid","severity":"critical","Hostname":"gpu-node-3",)"
  R"("UUID":"GPU-3f2a1b03","pci_bus_id":"00000000:5D:00.0","gpu":"3",)"
  R"("modelName":"NVIDIA H100 80GB HBM3"})";

std::vector<ingest_item> parse_ok(const std::string& body,
                                  const alertmanager_mapping& mapping = {}) {
  auto items = parse_alertmanager_body(body, "application/json", mapping, {});
  EXPECT_TRUE(items.has_value()) << items.error().to_string();
  return items ? *items : std::vector<ingest_item>{};
}

TEST(alertmanager, a_firing_alert_is_an_unhealthy_event_on_its_node_and_gpu) {
  auto items = parse_ok(payload(alert("firing", dcgm_labels)));
  ASSERT_EQ(items.size(), 1u);
  ASSERT_TRUE(items[0].event) << items[0].error;
  const auto& e = *items[0].event;
  EXPECT_EQ(e.node_name, "gpu-node-3");
  EXPECT_EQ(e.agent, "alertmanager");
  EXPECT_EQ(e.component_class, "GPU");
  EXPECT_EQ(e.check_name, "GpuXid");
  EXPECT_EQ(e.error_codes, std::vector<std::string>{"GpuXid"});
  EXPECT_FALSE(e.is_healthy);
  EXPECT_TRUE(e.is_fatal); // severity critical
  EXPECT_EQ(e.action, recommended_action::none);
  EXPECT_EQ(e.entities, (std::vector<entity>{{"GPU_UUID", "GPU-3f2a1b03"},
                                             {"PCI", "00000000:5d:00.0"}}));
  EXPECT_EQ(e.message, "XID 79 on GPU 3");
  EXPECT_EQ(format_rfc3339(*e.generated), "2026-11-26T08:00:00.123Z");
  EXPECT_EQ(e.metadata.at("modelName"), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(e.id, "alertmanager-8f3c2a1b00d4e5f6-firing-2026-11-26T08:00:00.123Z");
}

TEST(alertmanager, a_resolved_alert_is_the_healthy_event_that_clears_it) {
  auto firing = parse_ok(payload(alert("firing", dcgm_labels)));
  auto resolved = parse_ok(payload(alert("resolved", dcgm_labels), "resolved"));
  ASSERT_TRUE(firing[0].event && resolved[0].event);
  const auto& healthy = *resolved[0].event;
  EXPECT_TRUE(healthy.is_healthy);
  EXPECT_FALSE(healthy.is_fatal);
  EXPECT_EQ(format_rfc3339(*healthy.generated), "2026-11-26T08:10:00Z");
  EXPECT_NE(healthy.id, firing[0].event->id);
  for (const auto& ent : firing[0].event->entities)
    EXPECT_TRUE(healthy_event_clears(healthy, firing[0].event->agent,
                                     firing[0].event->check_name, ent,
                                     firing[0].event->error_codes));
}

// Alertmanager repeats a group every repeat_interval: the same alert is the
// same id, so the journal takes it once.
TEST(alertmanager, a_repeated_notification_has_the_same_ids) {
  auto a = parse_ok(payload(alert("firing", dcgm_labels)));
  auto b = parse_ok(payload(alert("firing", dcgm_labels)));
  EXPECT_EQ(a[0].event->id, b[0].event->id);
}

TEST(alertmanager, the_action_and_labels_come_from_the_alert_or_the_mapping) {
  const std::string labels =
    R"({"alertname":"NodeThermal","node":"n7","severity":"warning",)"
    R"("vigil_recommended_action":"RESTART_BM","component_class":"Node"})";
  auto items = parse_ok(payload(alert("firing", labels)));
  ASSERT_TRUE(items[0].event) << items[0].error;
  EXPECT_EQ(items[0].event->action, recommended_action::restart_bm);
  EXPECT_TRUE(items[0].event->is_fatal);
  EXPECT_EQ(items[0].event->component_class, "Node");
  EXPECT_TRUE(items[0].event->entities.empty());
  // An annotation may say it too, as NVSentinel's number.
  auto numbered = parse_ok(payload(alert("firing", R"({"alertname":"X","node":"n7"})",
                                         R"({"vigil_recommended_action":"2"})")));
  EXPECT_EQ(numbered[0].event->action, recommended_action::component_reset);

  alertmanager_mapping mapping;
  mapping.node_labels = {"instance_node"};
  mapping.agent = "prometheus";
  mapping.default_action = recommended_action::contact_support;
  auto mapped =
    parse_ok(payload(alert(
               "firing", R"({"alertname":"X","instance_node":"n9","severity":"info"})")),
             mapping);
  ASSERT_TRUE(mapped[0].event) << mapped[0].error;
  EXPECT_EQ(mapped[0].event->node_name, "n9");
  EXPECT_EQ(mapped[0].event->agent, "prometheus");
  EXPECT_EQ(mapped[0].event->action, recommended_action::contact_support);
  EXPECT_TRUE(mapped[0].event->is_fatal);
}

// A bad alert is named and skipped; the others in the notification are kept.
TEST(alertmanager, a_bad_alert_is_a_per_item_error) {
  auto items = parse_ok(payload(
    alert("firing", dcgm_labels) + ","
    + alert("firing", R"({"alertname":"NoNode","severity":"critical"})") + ","
    + alert("pending", dcgm_labels) + ","
    + alert("firing", R"({"alertname":"A","node":"n","vigil_recommended_action":"PRAY"})")
    + R"(,"not an alert",{"status":"firing","labels":{"node":"n"}})"));
  ASSERT_EQ(items.size(), 6u);
  EXPECT_TRUE(items[0].event);
  EXPECT_EQ(items[1].error,
            "alert 2 (NoNode): labels: no node label (node, kubernetes_node, Hostname, "
            "hostname)");
  EXPECT_EQ(items[2].error,
            "alert 3 (GpuXid): status: must be \"firing\" or \"resolved\"");
  EXPECT_EQ(items[3].error,
            "alert 4 (A): vigil_recommended_action: unknown action \"PRAY\"");
  EXPECT_EQ(items[4].error, "alert 5: alert: not an object");
  EXPECT_EQ(items[5].error, "alert 6: labels.alertname: missing or empty");
  EXPECT_EQ(items[0].line, 1u);
  EXPECT_EQ(items[5].line, 6u);
}

TEST(alertmanager, whole_request_failures_have_their_status) {
  auto status_of = [](std::string_view body, std::string_view type = "application/json") {
    ingest_limits limits;
    limits.max_body_bytes = 4096;
    auto r = parse_alertmanager_body(body, type, {}, limits);
    EXPECT_FALSE(r.has_value()) << body;
    return r ? 0 : request_failure_status(r.error());
  };
  EXPECT_EQ(status_of("not json"), 400);
  EXPECT_EQ(status_of("[]"), 400);
  EXPECT_EQ(status_of(R"({"alerts":{}})"), 400);
  EXPECT_EQ(status_of(R"({"alerts":[]})"), 400);
  EXPECT_EQ(status_of(payload(""), "text/plain"), 415);
  EXPECT_EQ(status_of(std::string(5000, ' ')), 413);
  for (std::size_t n = 0; n < 400; n += 7) // truncations never crash
    parse_alertmanager_body(payload(alert("firing", dcgm_labels)).substr(0, n),
                            "application/json", {}, {});
}

} // namespace
} // namespace vigil::control
