#include "actors/control/console/console_view.hpp"

#include <gtest/gtest.h>

namespace vigil::console {
namespace {

using json = nlohmann::json;

json summary(json extra) {
  json s = {{"node", "gpu-1"},
            {"observed", true},
            {"active", json::array()},
            {"draining", ""},
            {"unschedulable", false},
            {"cordonOwned", false},
            {"fabricPortsDown", json::array()},
            {"pool", "rack-7"},
            {"remediation", {{"inFlight", ""}, {"step", "idle"}, {"cr", ""}}}};
  if (extra.is_object())
    s.update(extra);
  return s;
}

const json one_active = json::array({{{"check", "SysLogsXIDError"}}});

TEST(console_view, a_tile_says_the_most_pressing_state) {
  EXPECT_EQ(tile_of(summary({})).state, tile_state::healthy);
  EXPECT_EQ(tile_of(summary({})).pool, "rack-7");
  auto quarantined = tile_of(
    summary({{"active", one_active}, {"unschedulable", true}, {"cordonOwned", true}}));
  EXPECT_EQ(quarantined.state, tile_state::quarantined);
  EXPECT_EQ(quarantined.detail, "1 active event");
  EXPECT_EQ(tile_of(summary({{"active", one_active}, {"draining", "d-1"}})).state,
            tile_state::draining);
  auto remediating = tile_of(summary({{"active", one_active},
                                      {"draining", "d-1"},
                                      {"remediation",
                                       {{"inFlight", "reset-GPU-a"},
                                        {"kind", "GPUReset"},
                                        {"cr", "r-1"},
                                        {"step", "following"}}}}));
  EXPECT_EQ(remediating.state, tile_state::remediating);
  EXPECT_EQ(remediating.detail, "GPUReset r-1: following");
  EXPECT_EQ(tile_of(summary({{"active", one_active},
                             {"cordonOwned", true},
                             {"handedToOperator", "attempts exhausted"}}))
              .state,
            tile_state::waiting_for_person);
  // A reason without an active fault is history, not a person needed now.
  EXPECT_EQ(tile_of(summary({{"handedToOperator", "old"}})).state, tile_state::healthy);
  EXPECT_EQ(tile_of(summary({{"fabricPortsDown", json::array({"mlx5_0/1"})},
                             {"remediation", {{"inFlight", "x"}}}}))
              .state,
            tile_state::fabric_incident);
  EXPECT_EQ(tile_of(summary({{"unschedulable", true}})).state,
            tile_state::cordoned_by_others);
  EXPECT_EQ(tile_of(summary({{"optedOut", true}, {"active", one_active}})).state,
            tile_state::opted_out);
  EXPECT_EQ(tile_of(summary({{"observed", false}})).state, tile_state::unknown);
  // Garbage is a tile of unknown state, not a crash.
  EXPECT_EQ(tile_of(json("nonsense")).state, tile_state::unknown);
  EXPECT_EQ(tile_of(json{{"active", 7}, {"remediation", 3}}).state, tile_state::unknown);
}

TEST(console_view, the_fleet_page_sorts_and_counts) {
  std::vector<node_tile> tiles = {
    {"b", "", tile_state::healthy, "", 0},
    {"a", "r1", tile_state::quarantined, "1 active event", 1},
    {"c", "", tile_state::healthy, "", 0}};
  auto page =
    fleet_page(tiles, {{"routed", 3}}, {{"tripped", false}}, {{"lagSeconds", 0}});
  ASSERT_EQ(page["nodes"].size(), 3u);
  EXPECT_EQ(page["nodes"][0]["name"], "a");
  EXPECT_EQ(page["nodes"][0]["state"], "quarantined");
  EXPECT_EQ(page["counts"]["healthy"], 2);
  EXPECT_EQ(page["counts"]["quarantined"], 1);
  EXPECT_EQ(page["counts"]["draining"], 0);
  EXPECT_EQ(page["fleet"]["routed"], 3);
}

// issue 18: each actor's mailbox figures as columns, its slowest type by p99,
// and the node actors the fleet restarted with how often and why.
TEST(console_view, the_actor_table_shows_message_figures_and_restarts) {
  const json messages = {
    {"handled", 120u},
    {"perSecond", 2.5},
    {"types",
     {{{"type", "route"}, {"count", 100u}, {"p99Micros", 40.0}},
      {{"type", "kube_result"}, {"count", 20u}, {"p99Micros", 900.0}}}}};
  json fleet = {{"mailboxDepth", 0u},
                {"messages", messages},
                {"restartedNodes",
                 {{{"node", "gpu-1"}, {"restarts", 2}, {"lastCrash", "runtime_error"}}}}};
  auto table = actor_table({"fleet"}, {fleet},
                           {summary({{"mailboxDepth", 0u}, {"messages", messages}})});
  const auto& rows = table["actors"];
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& r : rows) {
    EXPECT_EQ(r["handled"], 120) << r["name"];
    EXPECT_EQ(r["perSecond"], 2.5);
    EXPECT_EQ(r["slowest"]["type"], "kube_result");
    EXPECT_EQ(r["messageTypes"].size(), 2u);
  }
  EXPECT_EQ(rows[1]["name"], "node/gpu-1");
  EXPECT_EQ(rows[1]["restarts"], 2);
  EXPECT_EQ(rows[1]["lastCrash"], "runtime_error");
}

TEST(console_view, trace_requests_are_read_and_bad_ones_named) {
  auto t = parse_trace_request("node=gpu%2D1&seconds=30&max=50");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->node, "gpu-1");
  EXPECT_EQ(t->seconds, 30u);
  EXPECT_EQ(t->max_messages, 50u);
  auto defaults = parse_trace_request("node=gpu-1");
  ASSERT_TRUE(defaults.has_value());
  EXPECT_EQ(defaults->seconds, 10u);
  EXPECT_EQ(defaults->max_messages, 1000u);
  for (const auto& [query, key] :
       std::vector<std::pair<std::string, std::string>>{{"", "node"},
                                                        {"node=a&seconds=0", "seconds"},
                                                        {"node=a&seconds=301", "seconds"},
                                                        {"node=a&max=lots", "max"},
                                                        {"node=a&max=10001", "max"},
                                                        {"node=a&follow=1", "follow"}}) {
    auto bad = parse_trace_request(query);
    ASSERT_FALSE(bad.has_value()) << query;
    EXPECT_NE(bad.error().to_string().find(key), std::string::npos) << query;
  }
}

TEST(console_view, the_actor_table_puts_the_deepest_mailbox_first) {
  auto table =
    actor_table({"fleet", "breaker"}, {{{"mailboxDepth", 1u}}, {{"mailboxDepth", 0u}}},
                {summary({{"mailboxDepth", 9u}, {"gpuActors", 8u}}), json("garbage")});
  const auto& rows = table["actors"];
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0]["name"], "node/gpu-1");
  EXPECT_EQ(rows[0]["parent"], "fleet");
  EXPECT_EQ(rows[0]["gpuActors"], 8);
  EXPECT_EQ(rows[1]["name"], "fleet");
  EXPECT_EQ(rows[2]["mailboxDepth"], 0);
}

journal_record row(std::string kind, std::string node, std::string body) {
  journal_record r;
  r.seq = 42;
  r.kind = std::move(kind);
  r.node = std::move(node);
  r.body = std::move(body);
  return r;
}

TEST(console_view, rows_filters_and_events) {
  const auto event = row("event", "gpu-1",
                         R"({"checkName":"SysLogsXIDError","componentClass":"GPU",)"
                         R"("isHealthy":false,"nodeName":"gpu-1","id":"e1"})");
  auto j = row_json(event);
  EXPECT_EQ(j["seq"], 42);
  EXPECT_EQ(j["check"], "SysLogsXIDError");
  EXPECT_EQ(j["body"]["id"], "e1");
  EXPECT_FALSE(j["summary"].get<std::string>().empty());
  EXPECT_EQ(row_json(row("drain", "gpu-1", "not json"))["body"], "not json");
  // A decision row reads as its key fields, not its whole body.
  EXPECT_EQ(row_json(row("remediation", "gpu-1",
                         R"({"phase":"created","kind":"GPUReset","cr":"r-1",)"
                         R"("annotation":{"x":1},"dryRun":false})"))["summary"],
            "phase=created kind=GPUReset cr=r-1");
  EXPECT_EQ(row_json(row("drain", "gpu-1", R"({"evict":[]})"))["summary"],
            R"({"evict":[]})");
  EXPECT_TRUE((row_filter{"gpu-1", "", ""}).matches(event));
  EXPECT_FALSE((row_filter{"gpu-2", "", ""}).matches(event));
  EXPECT_TRUE((row_filter{"", "event", "SysLogsXIDError"}).matches(event));
  EXPECT_FALSE((row_filter{"", "", "SysLogsSXIDError"}).matches(event));
  EXPECT_FALSE(
    (row_filter{"", "", "SysLogsXIDError"}).matches(row("drain", "gpu-1", "{}")));
  auto sse = sse_row(event);
  EXPECT_EQ(sse.rfind("id: 42\nevent: row\ndata: {", 0), 0u);
  EXPECT_EQ(sse.substr(sse.size() - 2), "\n\n");
  EXPECT_EQ(sse.find('\n', sse.find("data: ")), sse.size() - 2); // one data line
  EXPECT_EQ(sse_skipped(7), "event: skipped\ndata: {\"skipped\":7}\n\n");
}

// The stream's row is row_json's, its body spliced in as the journal holds
// it; a body over several lines or not JSON is printed from the parse.
TEST(console_view, a_stream_row_is_the_rows_json) {
  const std::string body = R"({"checkName":"SysLogsXIDError","id":"e1","n":[1,2]})";
  auto data = [](const std::string& sse) {
    const auto at = sse.find("data: ") + 6;
    return json::parse(sse.substr(at, sse.size() - 2 - at));
  };
  auto event = row("event", "gpu-1", body);
  EXPECT_EQ(data(sse_row(event)), row_json(event));
  EXPECT_NE(sse_row(event).find(",\"body\":" + body + "}"), std::string::npos);
  for (const auto* other : {"{\n  \"phase\": \"created\"\n}", "not json", "[1,2]"}) {
    auto r = row("remediation", "gpu-1", other);
    const auto sse = sse_row(r);
    EXPECT_EQ(sse.find('\n', sse.find("data: ")), sse.size() - 2) << other; // one line
    EXPECT_EQ(data(sse), row_json(r)) << other;
  }
  // Invalid UTF-8 in a body that is no JSON is replaced, never thrown.
  EXPECT_NO_THROW(sse_row(row("note", "gpu-1", "bad \xff byte")));
}

TEST(console_view, a_nodes_own_actors_are_listed_under_it) {
  auto table = actor_table({}, {}, {summary({{"gpuActors", 1}})}, "gpu-1",
                           {{{"name", "gpu/GPU-a"},
                             {"kind", "gpu"},
                             {"mailboxDepth", 2u},
                             {"uuid", "GPU-a"},
                             {"messages", {{"handled", 5}, {"perSecond", 0.5}}}}});
  ASSERT_EQ(table["actors"].size(), 2u);
  const auto& gpu = table["actors"][0]; // the deeper mailbox first
  EXPECT_EQ(gpu["name"], "gpu/GPU-a");
  EXPECT_EQ(gpu["parent"], "node/gpu-1");
  EXPECT_EQ(gpu["handled"], 5);
  EXPECT_EQ(gpu["detail"]["uuid"], "GPU-a");
  EXPECT_FALSE(gpu["detail"].contains("messages"));
  EXPECT_EQ(*parse_actors_request("node=gpu-1"), "gpu-1");
  EXPECT_EQ(*parse_actors_request(""), "");
  auto bad = parse_actors_request("nodes=gpu-1");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().to_string().find("nodes"), std::string::npos);
}

TEST(console_view, journal_requests_are_read_or_refused_by_name) {
  auto r = parse_journal_request("node=gpu%2D1&kind=event&check=SysLogsXIDError&since=10"
                                 "&limit=20&&");
  ASSERT_TRUE(r.has_value()) << r.error().to_string();
  EXPECT_EQ(r->filter.node, "gpu-1");
  EXPECT_EQ(r->after_seq, 10);
  EXPECT_EQ(r->limit, 20u);
  EXPECT_EQ(parse_journal_request("")->limit, 500u);
  for (auto [query, key] :
       {std::pair{"since=-1", "since"}, std::pair{"since=1x", "since"},
        std::pair{"limit=10001", "limit"}, std::pair{"limit=", "limit"},
        std::pair{"nodes=a", "nodes"}, std::pair{"%zz=1", "%zz"}}) {
    auto bad = parse_journal_request(query);
    ASSERT_FALSE(bad.has_value()) << query;
    EXPECT_EQ(bad.error().where, key) << query;
  }
  EXPECT_EQ(url_decode("a+b%20c%2"), "a b c%2");
}

} // namespace
} // namespace vigil::console
