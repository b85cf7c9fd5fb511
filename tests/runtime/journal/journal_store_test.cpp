// One suite, both stores: every test runs on SQLite and on a real PostgreSQL
// server (started by scripts/with-postgres).
#include "runtime/journal/journal_store.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <thread>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <sys/socket.h>
#include <unistd.h>

#include "runtime/journal/journal_schema.hpp"
#include "tests/support/test_databases.hpp"

namespace vigil {
namespace {

journal_record make_record(const std::string& key, const std::string& node = "node-1",
                           std::int64_t second = 1000) {
  return {0,    from_unix(second, 5),
          node, "event",
          key,  R"({"nodeName":")" + node + R"(","key":")" + key + "\"}"};
}

class journal_store_test : public testing::TestWithParam<std::string> {
protected:
  void SetUp() override {
    if (GetParam() == "postgresql") {
      url_ = test::fresh_postgres_database();
      if (url_.empty())
        GTEST_SKIP() << "no PostgreSQL server: run under scripts/with-postgres";
    } else {
      url_ = "sqlite:" + test::fresh_directory() + "/journal.db";
    }
    store_ = open_store();
  }

  std::unique_ptr<journal_store> open_store() {
    auto made = make_journal_store(url_);
    EXPECT_TRUE(made.has_value()) << made.error().to_string();
    auto store = std::move(*made);
    auto opened = store->open();
    EXPECT_TRUE(opened.has_value()) << opened.error().to_string();
    return store;
  }

  std::vector<append_outcome> append(const std::vector<journal_record>& batch) {
    auto out = store_->append(batch);
    EXPECT_TRUE(out.has_value()) << out.error().to_string();
    return out.has_value() ? *out : std::vector<append_outcome>{};
  }

  std::vector<journal_record> read(const journal_query& q = {}) {
    auto rows = store_->read(q);
    EXPECT_TRUE(rows.has_value()) << rows.error().to_string();
    return rows.has_value() ? *rows : std::vector<journal_record>{};
  }

  std::string url_;
  std::unique_ptr<journal_store> store_;
};

TEST_P(journal_store_test, migrates_from_empty_and_reopens) {
  EXPECT_EQ(*store_->last_seq(), 0);
  store_->close();
  auto again = open_store(); // migrations are applied once
  EXPECT_EQ(*again->last_seq(), 0);
}

TEST_P(journal_store_test, batch_keeps_order_and_assigns_increasing_seqs) {
  std::vector<journal_record> batch;
  for (int i = 0; i < 50; ++i)
    batch.push_back(make_record("k" + std::to_string(i)));
  auto outcomes = append(batch);
  ASSERT_EQ(outcomes.size(), 50u);
  for (size_t i = 1; i < outcomes.size(); ++i)
    EXPECT_LT(outcomes[i - 1].seq, outcomes[i].seq);
  auto rows = read();
  ASSERT_EQ(rows.size(), 50u);
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].idempotency_key, "k" + std::to_string(i));
    EXPECT_EQ(rows[i].seq, outcomes[i].seq);
    EXPECT_EQ(rows[i].recorded_at, from_unix(1000, 5));
  }
  EXPECT_EQ(*store_->last_seq(), outcomes.back().seq);
}

TEST_P(journal_store_test, resent_keys_are_stored_once) {
  auto first = append({make_record("a"), make_record("b")});
  auto second = append({make_record("b"), make_record("c"), make_record("c")});
  ASSERT_EQ(second.size(), 3u);
  EXPECT_TRUE(second[0].duplicate);
  EXPECT_EQ(second[0].seq, first[1].seq);
  EXPECT_FALSE(second[1].duplicate);
  EXPECT_TRUE(second[2].duplicate); // the same key twice in one batch
  EXPECT_EQ(second[2].seq, second[1].seq);
  EXPECT_EQ(read().size(), 3u);
}

// Resends come in runs (agents resend requests answered 503): batches with
// and without them, one after another, each get the outcomes of their own
// rows, whichever way the store took them in.
TEST_P(journal_store_test, batches_after_a_resend_are_stored_alike) {
  auto first = append({make_record("a"), make_record("b")});
  auto resent = append({make_record("b"), make_record("c")});
  ASSERT_EQ(resent.size(), 2u);
  EXPECT_TRUE(resent[0].duplicate);
  EXPECT_EQ(resent[0].seq, first[1].seq);
  auto clean = append({make_record("d")});
  ASSERT_EQ(clean.size(), 1u);
  EXPECT_FALSE(clean[0].duplicate);
  EXPECT_GT(clean[0].seq, resent[1].seq);
  auto again = append({make_record("c"), make_record("e")});
  ASSERT_EQ(again.size(), 2u);
  EXPECT_TRUE(again[0].duplicate);
  EXPECT_EQ(again[0].seq, resent[1].seq);
  EXPECT_FALSE(again[1].duplicate);
  for (int i = 0; i < 70; ++i)
    EXPECT_FALSE(append({make_record("f" + std::to_string(i))}).at(0).duplicate);
  auto late = append({make_record("a"), make_record("g")});
  ASSERT_EQ(late.size(), 2u);
  EXPECT_TRUE(late[0].duplicate);
  EXPECT_EQ(late[0].seq, first[0].seq);
  EXPECT_FALSE(late[1].duplicate);
  EXPECT_EQ(read().size(), 76u);
}

// COPY's text format gives backslash, tab and newline a meaning: values
// holding them must come back byte for byte.
TEST_P(journal_store_test, values_with_copy_control_characters_round_trip) {
  journal_record r = make_record("key\\with\ttab", "node\t1\\x");
  r.kind = "kind\nline";
  r.body = R"({"message":"path C:\\dir \"quoted\" \t tab"})";
  append({r});
  auto rows = read();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].idempotency_key, r.idempotency_key);
  EXPECT_EQ(rows[0].node, r.node);
  EXPECT_EQ(rows[0].kind, r.kind);
  EXPECT_EQ(nlohmann::json::parse(rows[0].body), nlohmann::json::parse(r.body));
}

// A node's recent history, however long its past: the last rows, in seq
// order (the console's node timeline).
TEST_P(journal_store_test, reads_the_newest_rows_in_seq_order) {
  std::vector<journal_record> batch;
  for (int i = 0; i < 30; ++i)
    batch.push_back(
      make_record("k" + std::to_string(i), i % 3 == 0 ? "node-1" : "node-2"));
  append(batch);
  journal_query newest;
  newest.node = "node-1";
  newest.limit = 4;
  newest.newest = true;
  auto rows = read(newest);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].idempotency_key, "k18");
  EXPECT_EQ(rows[3].idempotency_key, "k27");
  for (size_t i = 1; i < rows.size(); ++i)
    EXPECT_LT(rows[i - 1].seq, rows[i].seq);
  newest.limit = 100; // fewer rows than the limit: all of them
  EXPECT_EQ(read(newest).size(), 10u);
  newest.node.clear();
  newest.limit = 1;
  rows = read(newest);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].idempotency_key, "k29");
}

TEST_P(journal_store_test, reads_filter_by_seq_node_and_time) {
  append({make_record("a", "node-1", 100), make_record("b", "node-2", 200),
          make_record("c", "node-1", 300), make_record("d", "node-2", 400)});
  journal_query by_node;
  by_node.node = "node-2";
  auto rows = read(by_node);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].idempotency_key, "b");
  journal_query window;
  window.since = from_unix(200, 0);
  window.until = from_unix(300, 999);
  rows = read(window);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].idempotency_key, "c");
  journal_query tail;
  tail.after_seq = rows[0].seq;
  tail.limit = 1;
  rows = read(tail);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].idempotency_key, "c");
}

TEST_P(journal_store_test, snapshots_latest_wins) {
  EXPECT_FALSE(store_->latest_snapshot()->has_value());
  ASSERT_TRUE(store_->put_snapshot({5, from_unix(10, 0), R"({"v":5})"}).has_value());
  ASSERT_TRUE(store_->put_snapshot({9, from_unix(20, 0), R"({"v":9})"}).has_value());
  auto latest = store_->latest_snapshot();
  ASSERT_TRUE(latest.has_value());
  ASSERT_TRUE(latest->has_value());
  EXPECT_EQ((*latest)->seq, 9);
  EXPECT_NE((*latest)->body.find("9"), std::string::npos);
}

TEST_P(journal_store_test, fleet_snapshots_keep_their_rows_and_the_newest_two) {
  auto none = store_->latest_fleet_snapshot();
  ASSERT_TRUE(none.has_value()) << none.error().to_string();
  EXPECT_EQ(none->id, 0);
  for (std::int64_t n = 1; n <= 3; ++n) {
    fleet_snapshot s;
    s.taken_at = from_unix(100 * n, 0);
    s.position = {7 * n, 11 * n};
    s.horizons = R"({"dedup":180})";
    s.rows = {n, 40, 3};
    ASSERT_TRUE(store_->put_fleet_snapshot(s).has_value());
  }
  auto latest = store_->latest_fleet_snapshot();
  ASSERT_TRUE(latest.has_value()) << latest.error().to_string();
  EXPECT_EQ(latest->taken_at, from_unix(300, 0));
  EXPECT_EQ(latest->position, (journal_position{21, 33}));
  EXPECT_EQ(latest->horizons, R"({"dedup":180})");
  EXPECT_EQ(latest->rows, (std::vector<std::int64_t>{3, 40, 3}));
  auto empty = fleet_snapshot{};
  ASSERT_TRUE(store_->put_fleet_snapshot(empty).has_value());
  latest = store_->latest_fleet_snapshot();
  ASSERT_TRUE(latest.has_value());
  EXPECT_TRUE(latest->rows.empty());
}

TEST_P(journal_store_test, reads_the_rows_a_snapshot_names) {
  auto stored =
    append({make_record("a", "node-1", 100), make_record("b", "node-2", 200),
            make_record("c", "node-1", 300), make_record("d", "node-2", 400)});
  journal_query q;
  q.seqs = {stored[3].seq, stored[1].seq, 99999};
  auto rows = read(q);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].idempotency_key, "b");
  EXPECT_EQ(rows[1].idempotency_key, "d");
  EXPECT_EQ(rows[1].recorded_at, from_unix(400, 5));
}

TEST(seq_list, round_trips_and_names_damage) {
  const std::vector<std::int64_t> seqs{1, 20, 300, 9'000'000'000};
  auto back = parse_seq_list(seq_list(seqs));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, seqs);
  EXPECT_TRUE(parse_seq_list("")->empty());
  auto bad = parse_seq_list("1,2,x");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().what.find("character 4"), std::string::npos);
}

// Everything a tail page returned, read on until the tail is dry.
std::vector<std::string> tail_keys(journal_store& store, journal_position& at,
                                   std::size_t limit, const tail_filter& filter = {}) {
  std::vector<std::string> keys;
  for (int reads = 0; reads < 100; ++reads) {
    auto page = store.tail(at, limit, filter);
    EXPECT_TRUE(page.has_value()) << page.error().to_string();
    if (!page)
      break;
    EXPECT_EQ(page->rows.size(), page->positions.size());
    for (const auto& row : page->rows)
      keys.push_back(row.idempotency_key);
    EXPECT_FALSE(page->next < at); // never backwards
    at = page->next;
    if (page->rows.empty())
      break;
  }
  return keys;
}

TEST_P(journal_store_test, the_tail_returns_every_row_once_in_order) {
  append({make_record("a"), make_record("b"), make_record("c")});
  append({make_record("d"), make_record("b")}); // b is stored once
  journal_position at;
  EXPECT_EQ(tail_keys(*store_, at, 2), (std::vector<std::string>{"a", "b", "c", "d"}));
  append({make_record("e")});
  EXPECT_EQ(tail_keys(*store_, at, 2), (std::vector<std::string>{"e"}));
  EXPECT_TRUE(tail_keys(*store_, at, 2).empty());
}

// Two writers: a row whose transaction began first but commits last is not
// passed by the cursor; it comes once it has committed.
TEST_P(journal_store_test, the_tail_waits_for_a_transaction_still_running) {
  if (GetParam() != "postgresql")
    GTEST_SKIP() << "SQLite has one writer";
  PGconn* other = PQconnectdb(url_.c_str());
  ASSERT_EQ(PQstatus(other), CONNECTION_OK);
  PQclear(PQexec(other, "BEGIN"));
  PQclear(PQexec(other, "INSERT INTO journal (recorded_at_ns, node, kind, "
                        "idempotency_key, body) VALUES (1, 'node-1', 'event', 'slow', "
                        "'{}')"));
  append({make_record("quick")}); // commits first, with a later seq
  journal_position at;
  EXPECT_TRUE(tail_keys(*store_, at, 10).empty()); // "slow" is still running
  PQclear(PQexec(other, "COMMIT"));
  PQfinish(other);
  EXPECT_EQ(tail_keys(*store_, at, 10), (std::vector<std::string>{"slow", "quick"}));
}

// A long transaction in another database of the same server (a report, a
// dump, another application) holds no row of this journal: the tail reads
// past it. Before, the horizon was the server's oldest transaction, and
// every replica's tail stood still until it ended.
TEST_P(journal_store_test, a_transaction_in_another_database_does_not_hold_the_tail) {
  if (GetParam() != "postgresql")
    GTEST_SKIP() << "SQLite has one writer";
  PGconn* elsewhere = PQconnectdb(test::fresh_postgres_database().c_str());
  ASSERT_EQ(PQstatus(elsewhere), CONNECTION_OK);
  PQclear(PQexec(elsewhere, "BEGIN"));
  PQclear(PQexec(elsewhere, "SELECT pg_current_xact_id()")); // takes an id, runs on
  append({make_record("after-the-long-one")});
  journal_position at;
  EXPECT_EQ(tail_keys(*store_, at, 10), (std::vector<std::string>{"after-the-long-one"}));
  PQclear(PQexec(elsewhere, "COMMIT"));
  PQfinish(elsewhere);
}

// Sharded (issue 22): rows are stored with their node's shard, and a
// replica's tail reads only its shards' rows, the rows every replica reads
// (no shard) and those written before routing (no shard either); the
// cursor moves past what it left out. A reader with another shard count
// reads every row. SQLite, one process's journal, does not filter.
TEST_P(journal_store_test, a_filtered_tail_reads_its_shards_and_the_fleet_wide_rows) {
  append({make_record("before-routing", "node-2")});
  tail_routing routing;
  routing.shards = 2;
  routing.shard_of = [](const journal_record& row) -> std::optional<std::uint32_t> {
    if (row.kind != "event")
      return std::nullopt; // every replica's
    return row.node == "node-1" ? 0u : 1u;
  };
  store_->set_tail_routing(routing);
  auto quarantine = make_record("q", "node-2");
  quarantine.kind = "quarantine";
  append({make_record("a", "node-1"), make_record("b", "node-2"), quarantine});
  append({make_record("c", "node-1"), make_record("d", "node-2")});
  const bool filters = GetParam() == "postgresql";
  const tail_filter shard_0{2, {0}};
  journal_position at;
  EXPECT_EQ(tail_keys(*store_, at, 2, shard_0),
            filters
              ? (std::vector<std::string>{"before-routing", "a", "q", "c"})
              : (std::vector<std::string>{"before-routing", "a", "b", "q", "c", "d"}));
  append({make_record("e", "node-2")});
  EXPECT_EQ(tail_keys(*store_, at, 2, shard_0),
            filters ? std::vector<std::string>{} : std::vector<std::string>{"e"});
  append({make_record("f", "node-1")});
  EXPECT_EQ(tail_keys(*store_, at, 2, shard_0), (std::vector<std::string>{"f"}));
  journal_position from_start;
  EXPECT_EQ(tail_keys(*store_, from_start, 3, {3, {0}}).size(), 8u); // another K
  journal_position unfiltered;
  EXPECT_EQ(tail_keys(*store_, unfiltered, 100).size(), 8u);
}

// Journal retention: a round deletes the rows recorded before its time, at
// or before its position, that it does not keep; a later row, a kept row
// and a row past the position stay. Rounds go on from where the last one
// stopped until done.
TEST_P(journal_store_test, pruning_deletes_old_rows_no_snapshot_keeps) {
  append({make_record("a", "node-1", 100), make_record("b", "node-1", 200),
          make_record("c", "node-2", 300), make_record("d", "node-2", 400)});
  journal_position at;
  tail_keys(*store_, at, 100);                // the position after d
  append({make_record("e", "node-1", 150)});  // old, but past the position
  append({make_record("f", "node-1", 5000)}); // recent
  auto seq_of = [&](const std::string& key) {
    for (const auto& row : read())
      if (row.idempotency_key == key)
        return row.seq;
    return std::int64_t{-1};
  };
  journal_prune round;
  round.recorded_before = from_unix(1000, 0);
  round.through = at;
  round.keep = {seq_of("b")};
  round.limit = 2;
  std::uint64_t deleted = 0;
  for (int rounds = 0; rounds < 10; ++rounds) {
    auto pruned = store_->prune(round);
    ASSERT_TRUE(pruned.has_value()) << pruned.error().to_string();
    deleted += pruned->deleted;
    if (pruned->done)
      break;
    EXPECT_GT(pruned->scanned_to, round.after_seq);
    round.after_seq = pruned->scanned_to;
  }
  EXPECT_EQ(deleted, 3u); // a, c, d
  std::vector<std::string> left;
  for (const auto& row : read())
    left.push_back(row.idempotency_key);
  EXPECT_EQ(left, (std::vector<std::string>{"b", "e", "f"}));
}

// A node's history read up to where a tail stands (journal_query::through):
// rows after it are the tail's to deliver, never the read's too.
TEST_P(journal_store_test, a_read_through_a_tail_position_stops_there) {
  append({make_record("a"), make_record("x", "node-2")});
  append({make_record("b")});
  journal_position at;
  EXPECT_EQ(tail_keys(*store_, at, 10), (std::vector<std::string>{"a", "x", "b"}));
  append({make_record("c")});
  journal_query q;
  q.node = "node-1";
  q.through = at;
  std::vector<std::string> keys;
  for (const auto& row : read(q))
    keys.push_back(row.idempotency_key);
  EXPECT_EQ(keys, (std::vector<std::string>{"a", "b"}));
  q.newest = true;
  q.limit = 1;
  auto newest = read(q);
  ASSERT_EQ(newest.size(), 1u);
  EXPECT_EQ(newest[0].idempotency_key, "b");
  EXPECT_EQ(tail_keys(*store_, at, 10), (std::vector<std::string>{"c"}));
}

// The pools' remediation slots held in the database (issue 22): a budget of
// 2, a node holding a slot keeps it, a released slot is free again.
TEST_P(journal_store_test, remediation_slots_hold_the_pool_budget) {
  auto budget_of_2 = [](std::size_t others, bool holds) { return holds || others < 2; };
  auto claim = [&](const std::string& pool, const std::string& node) {
    auto c = store_->claim_slot(pool, node, from_unix(1000, 0), budget_of_2);
    EXPECT_TRUE(c.has_value()) << c.error().to_string();
    return c.has_value() ? *c : slot_claim{};
  };
  EXPECT_TRUE(claim("rack-1", "node-1").granted);
  EXPECT_TRUE(claim("rack-1", "node-2").granted);
  auto refused = claim("rack-1", "node-3");
  EXPECT_FALSE(refused.granted);
  EXPECT_EQ(refused.holders, 2u);
  EXPECT_TRUE(claim("rack-2", "node-3").granted); // another pool
  EXPECT_TRUE(claim("rack-1", "node-1").granted); // held already
  ASSERT_TRUE(store_->release_slot("node-1").has_value());
  ASSERT_TRUE(store_->release_slot("node-9").has_value()); // none held: fine
  EXPECT_TRUE(claim("rack-1", "node-4").granted);
  // Moved: node-3 leaves rack-2 for rack-1, whose budget is spent.
  EXPECT_FALSE(claim("rack-1", "node-3").granted);
  // A new connection (another replica, or a restart) sees the same slots.
  auto other = open_store();
  auto again = other->claim_slot("rack-1", "node-5", from_unix(1000, 0), budget_of_2);
  ASSERT_TRUE(again.has_value());
  EXPECT_FALSE(again->granted);
  auto holders = other->slot_holders(); // every pool's
  ASSERT_TRUE(holders.has_value());
  EXPECT_EQ(*holders, (std::vector<std::string>{"node-2", "node-3", "node-4"}));
}

// Replicas claiming at once: the lock per pool lets exactly the budget
// through, never more.
TEST_P(journal_store_test, replicas_claiming_at_once_never_pass_the_budget) {
  if (GetParam() != "postgresql")
    GTEST_SKIP() << "SQLite serves one process";
  constexpr std::size_t budget = 5;
  auto rule = [](std::size_t others, bool holds) { return holds || others < budget; };
  std::atomic<std::size_t> granted{0};
  std::vector<std::thread> replicas;
  for (int r = 0; r < 4; ++r)
    replicas.emplace_back([&, r] {
      auto store = open_store();
      for (int n = 0; n < 25; ++n) {
        auto c = store->claim_slot("rack-1",
                                   "node-" + std::to_string(r) + "-" + std::to_string(n),
                                   from_unix(1000, 0), rule);
        if (c.has_value() && c->granted)
          ++granted;
      }
    });
  for (auto& t : replicas)
    t.join();
  EXPECT_EQ(granted.load(), budget);
}

// The breaker's cordon window held in the database (issue 22): a node counts
// once, a cordon over the limit is refused and records the trip, which every
// connection (replica) then finds until a reset; a reset and the window's
// end forget the cordons before them. PostgreSQL decides by its own clock
// (the asks' times are the replicas'), so the checks here hold by either.
namespace {
cordon_ask ask_cordon(const std::string& node, std::int64_t now_s,
                      std::chrono::nanoseconds window = std::chrono::hours(1),
                      wall_time reset_at = {}) {
  cordon_ask ask;
  ask.node = node;
  ask.now = from_unix(now_s, 0);
  ask.window = window;
  ask.reset_at = reset_at;
  ask.over_limit = [](std::size_t count) -> std::optional<std::string> {
    if (count > 2)
      return std::to_string(count) + " over 2";
    return std::nullopt;
  };
  return ask;
}

cordon_claim claim(journal_store& store, const cordon_ask& ask) {
  auto c = store.claim_cordon(ask);
  EXPECT_TRUE(c.has_value()) << c.error().to_string();
  return c.has_value() ? *c : cordon_claim{};
}
} // namespace

TEST_P(journal_store_test, the_cordon_window_is_decided_across_replicas) {
  auto other = open_store(); // another replica
  EXPECT_TRUE(claim(*store_, ask_cordon("node-1", 1000)).granted);
  auto again = claim(*other, ask_cordon("node-1", 1001)); // counted once
  EXPECT_TRUE(again.granted);
  EXPECT_EQ(again.counted, 1u);
  auto second = claim(*other, ask_cordon("node-2", 1002));
  EXPECT_TRUE(second.granted);
  EXPECT_EQ(second.counted, 2u);
  auto third = claim(*store_, ask_cordon("node-3", 1003));
  EXPECT_FALSE(third.granted);
  EXPECT_TRUE(third.trips_now);
  EXPECT_EQ(third.reason, "3 over 2");
  EXPECT_EQ(third.tripped_at, third.decided_at);
  // The other replica has not read the trip from the journal yet: the
  // database refuses it all the same, even for a node already counted.
  auto found = claim(*other, ask_cordon("node-1", 1004));
  EXPECT_FALSE(found.granted);
  EXPECT_TRUE(found.tripped);
  EXPECT_FALSE(found.trips_now);
  EXPECT_EQ(found.reason, "3 over 2");
  EXPECT_EQ(found.tripped_at, third.tripped_at);
  // An operator's reset on one replica closes the trip and forgets node-1
  // and node-2 for every replica, whatever reset time its asks still carry.
  ASSERT_TRUE(other->reset_cordon_window().has_value());
  auto after_reset = claim(*store_, ask_cordon("node-4", 1006));
  EXPECT_TRUE(after_reset.granted);
  EXPECT_EQ(after_reset.counted, 1u);
  // A reset the asks carry (read from the journal) forgets what was
  // counted at or before it.
  auto past_reset = claim(
    *other, ask_cordon("node-5", 1007, std::chrono::hours(1), after_reset.decided_at));
  EXPECT_TRUE(past_reset.granted);
  EXPECT_EQ(past_reset.counted, 1u);
  // The window moves past node-5's cordon: node-6 is the window's first.
  auto later = claim(*store_, ask_cordon("node-6", 2000, std::chrono::nanoseconds{0}));
  EXPECT_TRUE(later.granted);
  EXPECT_EQ(later.counted, 1u);
}

// Replicas whose clocks disagree by minutes still share one window: the
// database stamps and moves it by its own clock. With the replicas' clocks,
// the one ahead dropped the others' cordons from the window (its "5 minutes
// ago" was their "now") and the breaker counted one where there were three.
TEST_P(journal_store_test, replica_clocks_minutes_apart_share_one_window) {
  if (GetParam() != "postgresql")
    GTEST_SKIP() << "SQLite serves one process: one clock";
  auto ahead = open_store();
  auto behind = open_store();
  auto ask = [](const std::string& node, std::int64_t now_s) {
    auto a = ask_cordon(node, now_s, std::chrono::minutes(5));
    a.over_limit = [](std::size_t) { return std::optional<std::string>{}; };
    return a;
  };
  EXPECT_EQ(claim(*store_, ask("node-1", 100000)).counted, 1u);
  EXPECT_EQ(claim(*ahead, ask("node-2", 100000 + 600)).counted, 2u);
  EXPECT_EQ(claim(*behind, ask("node-3", 100000 - 600)).counted, 3u);
}

// Replicas asking at once: the fleet-wide lock lets exactly the limit
// through, the next one trips the breaker, nothing passes after it.
TEST_P(journal_store_test, replicas_cordoning_at_once_never_pass_the_limit) {
  if (GetParam() != "postgresql")
    GTEST_SKIP() << "SQLite serves one process";
  std::atomic<std::size_t> granted{0};
  std::atomic<std::size_t> trips{0};
  std::vector<std::thread> replicas;
  for (int r = 0; r < 4; ++r)
    replicas.emplace_back([&, r] {
      auto store = open_store();
      for (int n = 0; n < 10; ++n) {
        auto c = store->claim_cordon(
          ask_cordon("node-" + std::to_string(r) + "-" + std::to_string(n), 1000 + n));
        if (c.has_value() && c->granted)
          ++granted;
        if (c.has_value() && c->trips_now)
          ++trips;
      }
    });
  for (auto& t : replicas)
    t.join();
  EXPECT_EQ(granted.load(), 2u);
  EXPECT_EQ(trips.load(), 1u);
}

// A journal written by a vigil before the tail (schema 1) is migrated: its
// rows count as transaction 0 and the tail returns them first.
TEST_P(journal_store_test, rows_from_before_the_tail_are_tailed_first) {
  if (GetParam() != "postgresql")
    GTEST_SKIP() << "the PostgreSQL migration";
  const auto url = test::fresh_postgres_database();
  PGconn* conn = PQconnectdb(url.c_str());
  ASSERT_EQ(PQstatus(conn), CONNECTION_OK);
  for (const auto& sql : journal_migration(sql_dialect::postgresql, 1))
    PQclear(PQexec(conn, sql.c_str()));
  PQclear(PQexec(conn, "CREATE TABLE vigil_schema (version integer NOT NULL)"));
  PQclear(PQexec(conn, "INSERT INTO vigil_schema (version) VALUES (1)"));
  PQclear(PQexec(conn,
                 "INSERT INTO journal (recorded_at_ns, node, kind, idempotency_key, "
                 "body) VALUES (1, 'node-1', 'event', 'old', '{}')"));
  PQfinish(conn);
  auto made = make_journal_store(url);
  ASSERT_TRUE(made.has_value());
  auto store = std::move(*made);
  ASSERT_TRUE(store->open().has_value());
  ASSERT_TRUE(store->append({make_record("new")}).has_value());
  journal_position at;
  EXPECT_EQ(tail_keys(*store, at, 1), (std::vector<std::string>{"old", "new"}));
}

TEST_P(journal_store_test, refuses_a_newer_schema) {
  // Pretend a newer vigil migrated this database.
  auto raw = make_journal_store(url_);
  store_->close();
  if (GetParam() == "postgresql") {
    PGconn* conn = PQconnectdb(url_.c_str());
    PQclear(PQexec(conn, "INSERT INTO vigil_schema (version) VALUES (99)"));
    PQfinish(conn);
  } else {
    // Through the store's own file: append a schema row with sqlite3 itself.
    ASSERT_EQ(std::system(("sqlite3 '" + url_.substr(7)
                           + "' 'INSERT INTO vigil_schema (version) VALUES (99)'")
                            .c_str()),
              0);
  }
  auto opened = (*raw)->open();
  ASSERT_FALSE(opened.has_value());
  EXPECT_NE(opened.error().what.find("version 99, newer than this binary knows"),
            std::string::npos)
    << opened.error().to_string();
}

INSTANTIATE_TEST_SUITE_P(stores, journal_store_test,
                         testing::Values("sqlite", "postgresql"),
                         [](const auto& info) { return info.param; });

TEST(journal_store_url, malformed_urls_name_the_problem) {
  auto bad_scheme = make_journal_store("mysql://db/vigil");
  ASSERT_FALSE(bad_scheme.has_value());
  EXPECT_NE(bad_scheme.error().what.find("neither sqlite:PATH"), std::string::npos);
  auto no_path = make_journal_store("sqlite:");
  ASSERT_FALSE(no_path.has_value());
  auto bad_uri = make_journal_store("postgresql://host/db?nosuchoption=1");
  ASSERT_FALSE(bad_uri.has_value());
  EXPECT_NE(bad_uri.error().what.find("malformed PostgreSQL URL"), std::string::npos)
    << bad_uri.error().to_string();
  auto bad_ssl = make_journal_store("postgresql://host/db?sslmode=sometimes");
  ASSERT_FALSE(bad_ssl.has_value());
  EXPECT_NE(bad_ssl.error().what.find("sslmode 'sometimes'"), std::string::npos);
}

// The journal's session bounds (pq_session_limits): a claim waiting for a
// pool's lock that another session holds ends in an error, and the store is
// usable afterwards (nothing left inside a transaction).
class pq_session_limits_test : public testing::Test {
protected:
  void SetUp() override {
    url_ = test::fresh_postgres_database();
    if (url_.empty())
      GTEST_SKIP() << "no PostgreSQL server: run under scripts/with-postgres";
    holder_ = PQconnectdb(url_.c_str());
    ASSERT_EQ(PQstatus(holder_), CONNECTION_OK) << PQerrorMessage(holder_);
  }
  void TearDown() override { PQfinish(holder_); }

  // Holds rack-1's slot lock (the key journal_store_pq's claims take) in an
  // open transaction of another session.
  void hold_the_pool_lock() {
    for (const char* sql : {"BEGIN", "SELECT pg_advisory_xact_lock(1986948931, "
                                     "hashtext('rack-1'))"}) {
      PGresult* res = PQexec(holder_, sql);
      EXPECT_NE(PQresultStatus(res), PGRES_FATAL_ERROR) << PQerrorMessage(holder_);
      PQclear(res);
    }
  }
  void release_the_pool_lock() { PQclear(PQexec(holder_, "COMMIT")); }

  static expected<slot_claim> claim(journal_store& store) {
    return store.claim_slot("rack-1", "node-1", from_unix(1000, 0),
                            [](std::size_t, bool) { return true; });
  }

  std::string url_;
  PGconn* holder_ = nullptr;
};

TEST_F(pq_session_limits_test, a_wait_for_a_lock_ends_at_vigils_lock_timeout) {
  pq_session_limits limits;
  limits.lock_timeout = std::chrono::milliseconds{100};
  auto made = make_pq_journal_store(url_, limits);
  ASSERT_TRUE(made.has_value());
  auto& store = **made;
  ASSERT_TRUE(store.open().has_value());
  hold_the_pool_lock();
  auto waited = claim(store);
  ASSERT_FALSE(waited.has_value());
  EXPECT_NE(waited.error().what.find("lock timeout"), std::string::npos)
    << waited.error().to_string();
  release_the_pool_lock();
  auto claimed = claim(store);
  ASSERT_TRUE(claimed.has_value()) << claimed.error().to_string();
  EXPECT_TRUE(claimed->granted);
  EXPECT_TRUE(store.append({make_record("after-the-timeout")}).has_value());
}

// An operator's own setting (here in the URL's options) is kept: vigil's
// longer lock timeout does not replace it. Were it replaced, the statement
// timeout (vigil's, 3 s) would end the wait instead.
TEST_F(pq_session_limits_test, an_operators_own_timeout_is_kept) {
  pq_session_limits limits;
  limits.lock_timeout = std::chrono::hours{1};
  limits.statement_timeout = std::chrono::seconds{3};
  auto made = make_pq_journal_store(url_ + "?options=-c%20lock_timeout%3D100ms", limits);
  ASSERT_TRUE(made.has_value());
  auto& store = **made;
  ASSERT_TRUE(store.open().has_value());
  hold_the_pool_lock();
  auto waited = claim(store);
  release_the_pool_lock();
  ASSERT_FALSE(waited.has_value());
  EXPECT_NE(waited.error().what.find("lock timeout"), std::string::npos)
    << waited.error().to_string();
}

// Sets an environment variable (nullopt: unsets it) for one scope.
class scoped_env {
public:
  scoped_env(const char* name, const std::optional<std::string>& value) : name_(name) {
    if (const char* before = std::getenv(name))
      before_ = before;
    set(value);
  }
  ~scoped_env() { set(before_); }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;

private:
  void set(const std::optional<std::string>& value) {
    if (value)
      ::setenv(name_, value->c_str(), 1);
    else
      ::unsetenv(name_);
  }
  const char* name_;
  std::optional<std::string> before_;
};

// vigil's libpq connection defaults give way to an operator's environment:
// libpq reads PGCONNECT_TIMEOUT (or a service file named by PGSERVICE) only
// for a keyword the program did not pass, so vigil's connect_timeout of 10 s
// used to override it.
TEST(journal_store_url, connection_defaults_leave_what_the_environment_sets) {
  const auto all = pq_connection_defaults({});
  const std::vector<std::pair<std::string, std::string>> expected = {
    {"connect_timeout", "10"}, {"keepalives", "1"},
    {"keepalives_idle", "10"}, {"keepalives_interval", "5"},
    {"keepalives_count", "3"}, {"tcp_user_timeout", "25000"}};
  EXPECT_EQ(all, expected);
  const auto left = pq_connection_defaults({"connect_timeout", "keepalives_idle"});
  ASSERT_EQ(left.size(), all.size() - 2);
  for (const auto& [keyword, value] : left)
    EXPECT_TRUE(keyword != "connect_timeout" && keyword != "keepalives_idle") << keyword;
  {
    // Nothing set: every one of vigil's defaults is passed (libpq compiles
    // in none of them).
    scoped_env timeout{"PGCONNECT_TIMEOUT", std::nullopt};
    scoped_env service{"PGSERVICE", std::nullopt};
    EXPECT_EQ(pq_connection_defaults(pq_keywords_set_by_environment()), all);
  }
  {
    scoped_env timeout{"PGCONNECT_TIMEOUT", "3"};
    scoped_env service{"PGSERVICE", std::nullopt};
    const auto passed = pq_connection_defaults(pq_keywords_set_by_environment());
    EXPECT_EQ(passed, pq_connection_defaults({"connect_timeout"}));
  }
  {
    const auto file = testing::TempDir() + "vigil-pg_service.conf";
    {
      std::ofstream out(file);
      out << "[vigil-journal]\nkeepalives_idle=30\ntcp_user_timeout=60000\n";
    }
    scoped_env timeout{"PGCONNECT_TIMEOUT", std::nullopt};
    scoped_env service_file{"PGSERVICEFILE", file};
    scoped_env service{"PGSERVICE", std::string{"vigil-journal"}};
    const auto passed = pq_connection_defaults(pq_keywords_set_by_environment());
    EXPECT_EQ(passed, pq_connection_defaults({"keepalives_idle", "tcp_user_timeout"}));
    std::remove(file.c_str());
  }
}

TEST(journal_store_url, unreachable_database_fails_open_with_its_address) {
  auto store =
    make_journal_store("postgresql://vigil@127.0.0.1:1/vigil?connect_timeout=2");
  ASSERT_TRUE(store.has_value());
  auto opened = (*store)->open();
  ASSERT_FALSE(opened.has_value());
  EXPECT_EQ(opened.error().where, "postgresql://127.0.0.1:1/vigil");
  EXPECT_NE(opened.error().what.find("cannot connect"), std::string::npos);
}

// A host that takes the connection and never answers (a database hung, or
// a proxy in front of one that is gone): open() gives up at the connect
// timeout (the URL's here; vigil's own is 10 s) instead of blocking the
// journal writer. The listener's backlog completes the TCP handshake; no
// one ever reads the startup packet.
TEST(journal_store_url, a_database_that_never_answers_fails_open_at_the_connect_timeout) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const auto port = std::to_string(ntohs(address.sin_port));
  auto store = make_journal_store("postgresql://vigil@127.0.0.1:" + port
                                  + "/vigil?connect_timeout=2&sslmode=disable");
  ASSERT_TRUE(store.has_value());
  auto opened = (*store)->open();
  ::close(listener);
  ASSERT_FALSE(opened.has_value());
  EXPECT_NE(opened.error().what.find("cannot connect"), std::string::npos)
    << opened.error().to_string();
}

} // namespace
} // namespace vigil
