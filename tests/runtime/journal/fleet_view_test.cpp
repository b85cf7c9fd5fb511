// State rebuilt from the journal: snapshot + tail equals a full replay, on
// both stores; undecodable rows are reported with their seq; `vigil replay`
// prints the timeline.
#include "runtime/journal/fleet_view.hpp"

#include <sstream>

#include <gtest/gtest.h>

#include "runtime/cli/cli.hpp"
#include "tests/support/test_databases.hpp"

namespace vigil {
namespace {

std::string xid_event(const std::string& node, const std::string& gpu, bool healthy,
                      const std::string& code = "48") {
  health_event e;
  e.agent = "vigil-agent";
  e.component_class = "GPU";
  e.check_name = "SysLogsXIDError";
  e.is_fatal = true;
  e.is_healthy = healthy;
  e.node_name = node;
  if (!healthy) {
    e.error_codes = {code};
    e.action = recommended_action::component_reset;
  }
  if (!gpu.empty())
    e.entities = {{"GPU_UUID", gpu}};
  return encode_health_event(e);
}

journal_record row(int i, const std::string& node, std::string body,
                   std::string kind = "event") {
  return {0,
          from_unix(1000 + i, 0),
          node,
          std::move(kind),
          "k" + std::to_string(i),
          std::move(body)};
}

class fleet_view_test : public testing::TestWithParam<std::string> {
protected:
  void SetUp() override {
    url_ = GetParam() == "postgresql"
             ? test::fresh_postgres_database()
             : "sqlite:" + test::fresh_directory() + "/journal.db";
    if (url_.empty())
      GTEST_SKIP() << "no PostgreSQL server: run under scripts/with-postgres";
    store_ = std::move(*make_journal_store(url_));
    ASSERT_TRUE(store_->open().has_value());
  }
  std::string url_;
  std::unique_ptr<journal_store> store_;
};

TEST_P(fleet_view_test, snapshot_plus_tail_equals_full_replay) {
  std::vector<journal_record> head, tail;
  for (int i = 0; i < 40; ++i)
    head.push_back(row(i, "node-" + std::to_string(i % 4),
                       xid_event("node-" + std::to_string(i % 4),
                                 "GPU-" + std::to_string(i % 8), i % 3 == 0)));
  for (int i = 40; i < 60; ++i)
    tail.push_back(
      row(i, "node-" + std::to_string(i % 4),
          xid_event("node-" + std::to_string(i % 4),
                    i % 5 == 0 ? "" : "GPU-" + std::to_string(i % 8), i % 2 == 0)));
  ASSERT_TRUE(store_->append(head).has_value());
  auto at_head = rebuild_fleet_view(*store_);
  ASSERT_TRUE(at_head.has_value());
  ASSERT_TRUE(
    store_
      ->put_snapshot({at_head->view.last_seq(), from_unix(1040, 0), at_head->view.save()})
      .has_value());
  ASSERT_TRUE(store_->append(tail).has_value());

  auto from_snapshot = rebuild_fleet_view(*store_);
  auto full = rebuild_fleet_view(*store_, std::nullopt, false);
  ASSERT_TRUE(from_snapshot.has_value() && full.has_value());
  EXPECT_EQ(from_snapshot->snapshot_seq, at_head->view.last_seq());
  EXPECT_EQ(from_snapshot->rows_applied, 20u);
  EXPECT_EQ(full->rows_applied, 60u);
  EXPECT_EQ(from_snapshot->view, full->view);
  EXPECT_FALSE(full->view.nodes().empty());
}

TEST_P(fleet_view_test, undecodable_rows_are_reported_and_replay_continues) {
  ASSERT_TRUE(store_
                ->append({row(1, "n1", xid_event("n1", "GPU-1", false)),
                          row(2, "n1", R"({"nodeName":"n1"})"),
                          row(3, "n2", xid_event("n2", "GPU-9", false)),
                          row(4, "n1", R"({"decision":"cordon"})", "quarantined")})
                .has_value());
  auto rebuilt = rebuild_fleet_view(*store_);
  ASSERT_TRUE(rebuilt.has_value());
  ASSERT_EQ(rebuilt->undecodable.size(), 1u);
  EXPECT_EQ(rebuilt->undecodable[0].seq, 2);
  EXPECT_NE(rebuilt->undecodable[0].problem.find("agent: missing"), std::string::npos);
  EXPECT_EQ(rebuilt->view.active("n2").size(), 1u);
  EXPECT_EQ(rebuilt->view.last_seq(), 4);

  std::ostringstream out, err;
  const int code = run_cli({"replay", "--journal", url_, "--node", "n1"}, out, err);
  EXPECT_EQ(code, 0) << err.str();
  EXPECT_NE(
    out.str().find("#1  1970-01-01T00:16:41Z  n1  event  GPU SysLogsXIDError "
                   "unhealthy fatal code=48 action=COMPONENT_RESET GPU_UUID=GPU-1"),
    std::string::npos)
    << out.str();
  EXPECT_NE(out.str().find("#2"), std::string::npos);
  EXPECT_EQ(out.str().find("#3"), std::string::npos); // other node
  EXPECT_NE(err.str().find("3 rows, 1 undecodable (seq 2)"), std::string::npos)
    << err.str();

  std::ostringstream json_out, json_err;
  run_cli({"replay", "--journal", url_, "--json", "--since", "1970-01-01T00:16:43Z"},
          json_out, json_err);
  EXPECT_EQ(json_out.str().find("\"seq\":2"), std::string::npos);
  EXPECT_NE(json_out.str().find("\"seq\":3"), std::string::npos) << json_out.str();
}

TEST_P(fleet_view_test, healthy_event_clears_only_its_entities) {
  ASSERT_TRUE(store_
                ->append({row(1, "n1", xid_event("n1", "GPU-1", false)),
                          row(2, "n1", xid_event("n1", "GPU-2", false)),
                          row(3, "n1", xid_event("n1", "GPU-1", true))})
                .has_value());
  auto rebuilt = rebuild_fleet_view(*store_);
  ASSERT_TRUE(rebuilt.has_value());
  auto active = rebuilt->view.active("n1");
  ASSERT_EQ(active.size(), 1u);
  EXPECT_EQ(active[0].subject.value, "GPU-2");
  ASSERT_TRUE(store_->append({row(4, "n1", xid_event("n1", "", true))}).has_value());
  EXPECT_TRUE(rebuild_fleet_view(*store_)->view.active("n1").empty());
}

// The control plane's rule (healthy_event_clears): a healthy event naming a
// code clears only that code's record; two codes on one GPU are two records.
TEST(fleet_view, a_cancellation_clears_only_its_code) {
  fleet_view view;
  auto cancel = decode_health_event(xid_event("n1", "GPU-1", true));
  ASSERT_TRUE(cancel.has_value());
  cancel->error_codes = {"163"};
  for (auto [i, body] : std::vector<std::pair<int, std::string>>{
         {1, xid_event("n1", "GPU-1", false, "79")},
         {2, xid_event("n1", "GPU-1", false, "163")},
         {3, encode_health_event(*cancel)}})
    ASSERT_TRUE(view.apply(row(i, "n1", body)).has_value());
  auto active = view.active("n1");
  ASSERT_EQ(active.size(), 1u);
  EXPECT_EQ(active[0].error_code, "79");
  auto saved = fleet_view::load(view.save());
  ASSERT_TRUE(saved.has_value());
  EXPECT_EQ(*saved, view);
}

INSTANTIATE_TEST_SUITE_P(stores, fleet_view_test, testing::Values("sqlite", "postgresql"),
                         [](const auto& info) { return info.param; });

TEST(replay_cli, bad_input_names_the_problem) {
  std::ostringstream out, err;
  EXPECT_EQ(run_cli({"replay"}, out, err), 2);
  EXPECT_NE(err.str().find("--journal is required"), std::string::npos);
  std::ostringstream out2, err2;
  EXPECT_EQ(run_cli({"replay", "--journal", "sqlite:/tmp/x.db", "--since", "yesterday"},
                    out2, err2),
            2);
  EXPECT_NE(err2.str().find("--since: not an RFC 3339 timestamp"), std::string::npos)
    << err2.str();
  std::ostringstream out3, err3;
  EXPECT_EQ(
    run_cli({"replay", "--journal", "postgresql://vigil@127.0.0.1:1/x"}, out3, err3), 1);
  EXPECT_NE(err3.str().find("cannot connect"), std::string::npos) << err3.str();
}

} // namespace
} // namespace vigil
