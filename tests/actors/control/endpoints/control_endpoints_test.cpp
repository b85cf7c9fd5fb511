#include "actors/control/endpoints/control_endpoints.hpp"

#include <optional>

#include <gtest/gtest.h>

namespace vigil {
namespace {

TEST(render_metrics, reports_quarantine_drain_and_journal_figures) {
  auto text = render_metrics(
    R"({"received":7,"rejected":1,"shed":12,"requestsShedUnread":5,"coalesced":4,"resentStored":8,"appendsInFlight":30})",
    R"({"nodes":4,"cordons":2,"drainsStarted":3,"drainsStartedPartial":1,"drainsSucceeded":1,"drainsCancelled":2,"evictions":5,"podDeletions":1,"ruleFiringsNicFlap":2,"mailboxDepth":9,"nodeMailboxHigh":3})",
    R"({"tripped":true,"utilisation":0.8,"mailboxDepth":4})", [] {
      journal_stats j;
      j.committed = 10;
      j.queue_depth = 2;
      j.lag_ns = 1'500'000'000;
      j.refused = 6;
      j.write_failures = 3;
      j.mailbox_depth = 11;
      return j;
    }());
  for (const char* expected : {"vigil_events_received_total 7",
                               "vigil_events_rejected_total 1",
                               "vigil_events_shed_total 12",
                               "vigil_ingest_requests_shed_unread_total 5",
                               "vigil_events_coalesced_total 4",
                               "vigil_events_resent_stored_total 8",
                               "vigil_ingest_appends_in_flight 30",
                               "vigil_nodes 4",
                               "vigil_cordons_total 2",
                               "vigil_drains_started_total 3",
                               "vigil_drains_total{outcome=\"succeeded\"} 1",
                               "vigil_drains_total{outcome=\"cancelled\"} 2",
                               "vigil_drains_total{outcome=\"held\"} 0",
                               "vigil_evictions_total 5",
                               "vigil_pod_deletions_total 1",
                               "vigil_breaker_tripped 1",
                               "vigil_breaker_utilisation 0.8",
                               "vigil_journal_lag_seconds 1.5",
                               "vigil_mailbox_depth{actor=\"fleet\"} 9",
                               "vigil_mailbox_depth{actor=\"ingest\"} 0",
                               "vigil_node_mailbox_depth_max 3",
                               "vigil_mailbox_depth{actor=\"breaker\"} 4",
                               "vigil_mailbox_depth{actor=\"journal\"} 11",
                               "vigil_journal_refused_total 6",
                               "vigil_rule_firings_total{rule=\"nic-flap\"} 2",
                               "vigil_rule_firings_total{rule=\"repeated-xid\"} 0",
                               "vigil_journal_write_failures_total 3",
                               "vigil_drains_started_by_mode_total{mode=\"full\"} 2",
                               "vigil_drains_started_by_mode_total{mode=\"partial\"} 1",
                               "# TYPE vigil_drains_total counter"})
    EXPECT_NE(text.find(expected), std::string::npos) << expected << "\n" << text;
}

// While ingest sheds, POST /v1/events is answered 503 + Retry-After before
// its body is read, and counted; once ingest has room the same body is read
// and handed on.
TEST(control_handler, refuses_events_unread_while_ingest_sheds) {
  control_actors actors;
  actors.admission_gate = std::make_shared<ingest_gate>();
  actors.admission_gate->shedding = true;
  control_http_options options; // no token: anyone may post
  auto handler = make_control_handler(actors, caf::actor{}, options);
  // The answer when the handler gave one at once; none when the request went
  // on to ingest (no ingest actor here).
  auto post = [&](const std::string& path) {
    http::request req;
    req.method = "POST";
    req.path = req.target = path;
    req.body = "{\"nodeName\": \"node-1\"}";
    std::optional<http::response> answer;
    handler(req, [&](http::response r) { answer = std::move(r); });
    return answer;
  };
  for (const char* path : {"/v1/events", "/v1/alertmanager"}) {
    auto busy = post(path);
    ASSERT_TRUE(busy.has_value()) << path;
    EXPECT_EQ(busy->status, 503) << path;
    ASSERT_EQ(busy->headers.size(), 1u);
    EXPECT_EQ(busy->headers[0].first, "Retry-After");
    EXPECT_NE(busy->body.find("nothing was read"), std::string::npos) << busy->body;
  }
  EXPECT_EQ(actors.admission_gate->shed_requests, 2u);
  actors.admission_gate->shedding = false;
  EXPECT_FALSE(post("/v1/events").has_value()); // read, and handed to ingest
  EXPECT_EQ(actors.admission_gate->shed_requests, 2u);
}

TEST(render_metrics, garbage_from_an_actor_reads_as_zero) {
  journal_stats down;
  down.available = false;
  auto text = render_metrics("not json", "[]", "", down);
  EXPECT_NE(text.find("vigil_nodes 0"), std::string::npos) << text;
  EXPECT_NE(text.find("vigil_journal_available 0"), std::string::npos) << text;
}

TEST(render_gateway_metrics, reports_the_api_servers_requests_and_watches) {
  kube_gateway_stats g;
  g.requests = 12;
  g.failures = 2;
  g.in_flight = 3;
  g.relists = 1;
  auto text = render_gateway_metrics(g);
  for (const char* expected :
       {"vigil_kube_requests_total 12", "vigil_kube_request_failures_total 2",
        "vigil_kube_requests_in_flight 3", "vigil_kube_watch_relists_total 1",
        "vigil_kube_watch_bad_lines_total 0",
        "# TYPE vigil_kube_requests_in_flight gauge"})
    EXPECT_NE(text.find(expected), std::string::npos) << expected << "\n" << text;
}

TEST(snapshot_metric_families, report_snapshots_and_retention) {
  snapshot_stats s;
  s.taken = 4;
  s.rows_kept = 84545;
  s.rows_pruned = 1200000;
  auto text = metrics::exposition(snapshot_metric_families(s));
  for (const char* expected :
       {"vigil_fleet_snapshots_total 4", "vigil_fleet_snapshot_failures_total 0",
        "vigil_fleet_snapshot_rows 84545", "vigil_journal_rows_pruned_total 1200000",
        "# TYPE vigil_fleet_snapshot_rows gauge"})
    EXPECT_NE(text.find(expected), std::string::npos) << expected << "\n" << text;
}

TEST(http_metric_families, counts_every_kind_of_client_turned_away) {
  http::server_counters c;
  c.connections = 1000;
  c.requests = 601;
  c.rejected_connections = 400;
  c.incomplete_requests = 2;
  c.slow_requests = 1;
  c.tls_failures = 3;
  c.active_connections = 5;
  auto text = metrics::exposition(http_metric_families(c));
  for (const char* expected :
       {"vigil_http_connections_total 1000", "vigil_http_requests_total 601",
        "vigil_http_connections_refused_total 400",
        "vigil_http_requests_too_large_total 0", "vigil_http_requests_malformed_total 0",
        "vigil_http_requests_incomplete_total 2", "vigil_http_requests_slow_total 1",
        "vigil_http_tls_failures_total 3", "vigil_http_connections_open 5",
        "# TYPE vigil_http_connections_open gauge"})
    EXPECT_NE(text.find(expected), std::string::npos) << expected << "\n" << text;
}

} // namespace
} // namespace vigil
