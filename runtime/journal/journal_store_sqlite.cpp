// The embedded journal: one SQLite file in WAL mode with synchronous=FULL, so
// a committed batch survives a power cut. For `vigil demo` and single machines.
#include <sqlite3.h>

#include <algorithm>
#include <string>

#include "runtime/journal/journal_schema.hpp"
#include "runtime/journal/journal_store.hpp"

namespace vigil {

namespace {

// A prepared statement that finalises itself.
class statement {
public:
  statement(sqlite3* db, const char* sql) : db_(db) {
    rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
  }
  ~statement() { sqlite3_finalize(stmt_); }
  statement(const statement&) = delete;
  statement& operator=(const statement&) = delete;

  bool ok() const { return rc_ == SQLITE_OK; }
  sqlite3_stmt* get() { return stmt_; }
  void bind(int i, std::int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  void bind_null(int i) { sqlite3_bind_null(stmt_, i); }
  void bind(int i, const std::string& v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
  }
  /// Bound without a copy: a temporary would be gone before step().
  void bind(int i, std::string&& v) = delete;
  int step() { return sqlite3_step(stmt_); }
  void reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  std::int64_t integer(int col) { return sqlite3_column_int64(stmt_, col); }
  std::string text(int col) {
    auto p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, col)))
             : std::string();
  }

private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  int rc_;
};

std::int64_t to_ns(wall_time t) {
  return t.time_since_epoch().count();
}

wall_time from_ns(std::int64_t ns) {
  return wall_time{std::chrono::nanoseconds{ns}};
}

class sqlite_journal_store final : public journal_store {
public:
  explicit sqlite_journal_store(std::string path) : path_(std::move(path)) {}
  ~sqlite_journal_store() override { close(); }

  status open() override {
    if (db_ != nullptr)
      return ok();
    if (sqlite3_open_v2(path_.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                        nullptr)
        != SQLITE_OK) {
      auto err = error("cannot open");
      close();
      return err;
    }
    sqlite3_busy_timeout(db_, 5000);
    for (const char* pragma : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL"})
      if (auto st = exec(pragma); !st) {
        close();
        return st;
      }
    if (auto st = migrate(); !st) {
      close();
      return st;
    }
    return ok();
  }

  expected<std::vector<append_outcome>>
  append(const std::vector<journal_record>& batch) override {
    if (auto st = open(); !st)
      return st.error();
    if (auto st = exec("BEGIN IMMEDIATE"); !st)
      return st.error();
    std::vector<append_outcome> out;
    out.reserve(batch.size());
    statement insert(db_, "INSERT INTO journal (recorded_at_ns, node, kind, "
                          "idempotency_key, body, shard, shard_count) "
                          "VALUES (?, ?, ?, ?, ?, ?, ?) "
                          "ON CONFLICT (idempotency_key) DO NOTHING RETURNING seq");
    statement existing(db_, "SELECT seq FROM journal WHERE idempotency_key = ?");
    if (!insert.ok() || !existing.ok())
      return rollback("cannot prepare the append");
    for (const auto& r : batch) {
      insert.bind(1, to_ns(r.recorded_at));
      insert.bind(2, r.node);
      insert.bind(3, r.kind);
      insert.bind(4, r.idempotency_key);
      insert.bind(5, r.body);
      if (auto shard = routing_(r)) {
        insert.bind(6, static_cast<std::int64_t>(*shard));
        insert.bind(7, static_cast<std::int64_t>(routing_.shards));
      } else {
        insert.bind_null(6);
        insert.bind_null(7);
      }
      int rc = insert.step();
      if (rc == SQLITE_ROW) {
        out.push_back({insert.integer(0), false});
        rc = insert.step();
      } else if (rc == SQLITE_DONE) {
        existing.bind(1, r.idempotency_key);
        if (existing.step() != SQLITE_ROW)
          return rollback("duplicate key vanished");
        out.push_back({existing.integer(0), true});
        existing.reset();
      }
      if (rc != SQLITE_DONE)
        return rollback("append failed");
      insert.reset();
    }
    if (auto st = exec("COMMIT"); !st)
      return rollback("commit failed");
    return out;
  }

  expected<std::vector<journal_record>> read(const journal_query& q) override {
    if (auto st = open(); !st)
      return st.error();
    if (!q.seqs.empty())
      return read_seqs(q.seqs);
    const std::string sql =
      std::string(
        "SELECT seq, recorded_at_ns, node, kind, idempotency_key, body "
        "FROM journal WHERE seq > ? AND recorded_at_ns >= ? AND "
        "recorded_at_ns <= ? AND (? = '' OR node = ?) AND (txid, seq) <= (?, ?) ")
      + (q.newest ? "ORDER BY seq DESC LIMIT ?" : "ORDER BY seq LIMIT ?");
    statement select(db_, sql.c_str());
    if (!select.ok())
      return error("cannot prepare the read").error();
    select.bind(1, q.after_seq);
    select.bind(2, q.since ? to_ns(*q.since) : INT64_MIN);
    select.bind(3, q.until ? to_ns(*q.until) : INT64_MAX);
    select.bind(4, q.node);
    select.bind(5, q.node);
    select.bind(6, q.through ? q.through->txid : INT64_MAX);
    select.bind(7, q.through ? q.through->seq : INT64_MAX);
    select.bind(8, static_cast<std::int64_t>(q.limit));
    std::vector<journal_record> rows;
    int rc;
    while ((rc = select.step()) == SQLITE_ROW)
      rows.push_back({select.integer(0), from_ns(select.integer(1)), select.text(2),
                      select.text(3), select.text(4), select.text(5)});
    if (rc != SQLITE_DONE)
      return error("read failed").error();
    if (q.newest)
      std::reverse(rows.begin(), rows.end());
    return rows;
  }

  // A fleet snapshot's rows (journal_query::seqs), by primary key.
  expected<std::vector<journal_record>> read_seqs(const std::vector<std::int64_t>& seqs) {
    statement select(db_, "SELECT seq, recorded_at_ns, node, kind, idempotency_key, body "
                          "FROM journal WHERE seq IN (SELECT value FROM json_each(?)) "
                          "ORDER BY seq");
    if (!select.ok())
      return error("cannot prepare the read").error();
    const auto list = "[" + seq_list(seqs) + "]"; // bound without a copy
    select.bind(1, list);
    std::vector<journal_record> rows;
    int rc;
    while ((rc = select.step()) == SQLITE_ROW)
      rows.push_back({select.integer(0), from_ns(select.integer(1)), select.text(2),
                      select.text(3), select.text(4), select.text(5)});
    if (rc != SQLITE_DONE)
      return error("read failed").error();
    return rows;
  }

  // One writer at a time: seq order is commit order, so the tail is by seq.
  // One process's journal: no other replica's rows to leave out; the filter
  // is not applied (tail_filter allows more rows, never fewer).
  expected<journal_tail_page> tail(const journal_position& after, std::size_t limit,
                                   const tail_filter&) override {
    journal_query q;
    q.after_seq = after.seq;
    q.limit = std::max<std::size_t>(limit, 1);
    auto rows = read(q);
    if (!rows)
      return rows.error();
    journal_tail_page page;
    page.next = after;
    for (const auto& row : *rows)
      page.positions.push_back({0, row.seq});
    if (!page.positions.empty())
      page.next = page.positions.back();
    page.rows = std::move(*rows);
    return page;
  }

  // One writer at a time (BEGIN IMMEDIATE): the read and the claim are one.
  expected<slot_claim> claim_slot(const std::string& pool, const std::string& node,
                                  wall_time now, const slot_rule& admits) override {
    if (auto st = open(); !st)
      return st.error();
    if (auto st = exec("BEGIN IMMEDIATE"); !st)
      return st.error();
    statement holders(db_, "SELECT node FROM remediation_slots WHERE pool = ?");
    if (!holders.ok())
      return rollback("cannot prepare the slot claim");
    holders.bind(1, pool);
    slot_claim claim;
    bool holds = false;
    int rc;
    while ((rc = holders.step()) == SQLITE_ROW) {
      if (holders.text(0) == node)
        holds = true;
      else
        ++claim.holders;
    }
    if (rc != SQLITE_DONE)
      return rollback("cannot read the pool's slots");
    claim.granted = admits(claim.holders, holds);
    if (claim.granted && !holds) {
      statement insert(db_,
                       "INSERT INTO remediation_slots (node, pool, claimed_at_ns) "
                       "VALUES (?, ?, ?) ON CONFLICT (node) DO UPDATE SET "
                       "pool = excluded.pool, claimed_at_ns = excluded.claimed_at_ns");
      if (!insert.ok())
        return rollback("cannot prepare the slot claim");
      insert.bind(1, node);
      insert.bind(2, pool);
      insert.bind(3, to_ns(now));
      if (insert.step() != SQLITE_DONE)
        return rollback("cannot claim the slot");
    }
    if (auto st = exec("COMMIT"); !st)
      return rollback("commit failed");
    return claim;
  }

  expected<std::vector<std::string>> slot_holders() override {
    if (auto st = open(); !st)
      return st.error();
    statement select(db_, "SELECT node FROM remediation_slots ORDER BY node");
    if (!select.ok())
      return failure{describe(), "cannot read the slots"};
    std::vector<std::string> nodes;
    int rc;
    while ((rc = select.step()) == SQLITE_ROW)
      nodes.push_back(select.text(0));
    if (rc != SQLITE_DONE)
      return failure{describe(), "cannot read the slots"};
    return nodes;
  }

  // The breaker's cordon window (journal_store::claim_cordon), under the
  // one writer's lock like the slots. One process writes the file: its own
  // clock, the ask's, is the only one.
  expected<cordon_claim> claim_cordon(const cordon_ask& ask) override {
    if (auto st = open(); !st)
      return st.error();
    if (auto st = exec("BEGIN IMMEDIATE"); !st)
      return st.error();
    auto done = [&](statement& st) { return st.ok() && st.step() == SQLITE_DONE; };
    statement prune_cordons(db_, "DELETE FROM breaker_cordons WHERE cordoned_at_ns <= ?");
    prune_cordons.bind(1, to_ns(cordon_window_start(ask, ask.now)));
    statement prune_trips(db_, "DELETE FROM breaker_trips WHERE tripped_at_ns <= ?");
    prune_trips.bind(1, to_ns(ask.reset_at));
    if (!done(prune_cordons) || !done(prune_trips))
      return rollback("cannot prune the breaker's window");
    statement newest(db_, "SELECT tripped_at_ns, reason FROM breaker_trips "
                          "ORDER BY tripped_at_ns DESC LIMIT 1");
    std::optional<std::pair<wall_time, std::string>> trip;
    if (!newest.ok())
      return rollback("cannot read the breaker's trip");
    if (int rc = newest.step(); rc == SQLITE_ROW)
      trip.emplace(from_ns(newest.integer(0)), newest.text(1));
    else if (rc != SQLITE_DONE)
      return rollback("cannot read the breaker's trip");
    newest.reset();
    statement count(db_,
                    "SELECT count(*), coalesce(max(node = ?), 0) FROM breaker_cordons");
    if (!count.ok())
      return rollback("cannot count the breaker's window");
    count.bind(1, ask.node);
    if (count.step() != SQLITE_ROW)
      return rollback("cannot count the breaker's window");
    const bool holds = count.integer(1) != 0;
    auto claim = decide_cordon(ask, ask.now, trip,
                               static_cast<std::size_t>(count.integer(0)), holds);
    count.reset();
    if (claim.trips_now) {
      statement insert(db_,
                       "INSERT INTO breaker_trips (tripped_at_ns, reason) VALUES (?, ?)");
      insert.bind(1, to_ns(claim.tripped_at));
      insert.bind(2, claim.reason);
      if (!done(insert))
        return rollback("cannot record the breaker's trip");
    } else if (claim.granted && !holds) {
      statement insert(db_, "INSERT INTO breaker_cordons (node, cordoned_at_ns) "
                            "VALUES (?, ?) ON CONFLICT (node) DO UPDATE SET "
                            "cordoned_at_ns = excluded.cordoned_at_ns");
      insert.bind(1, ask.node);
      insert.bind(2, to_ns(ask.now));
      if (!done(insert))
        return rollback("cannot count the cordon");
    }
    if (auto st = exec("COMMIT"); !st)
      return rollback("commit failed");
    return claim;
  }

  expected<cordon_window_reset> reset_cordon_window() override {
    if (auto st = open(); !st)
      return st.error();
    if (auto st = exec("BEGIN IMMEDIATE"); !st)
      return st.error();
    if (!exec("DELETE FROM breaker_cordons") || !exec("DELETE FROM breaker_trips"))
      return rollback("cannot reset the breaker's window");
    if (auto st = exec("COMMIT"); !st)
      return rollback("commit failed");
    return cordon_window_reset{};
  }

  expected<journal_pruned> prune(const journal_prune& round) override {
    if (auto st = open(); !st)
      return st.error();
    if (auto st = exec("BEGIN IMMEDIATE"); !st)
      return st.error();
    statement scan(db_, "SELECT seq FROM journal WHERE seq > ? AND recorded_at_ns < ? "
                        "ORDER BY seq LIMIT ?");
    if (!scan.ok())
      return rollback("cannot scan the journal for retention");
    scan.bind(1, round.after_seq);
    scan.bind(2, to_ns(round.recorded_before));
    scan.bind(3, static_cast<std::int64_t>(std::max<std::size_t>(round.limit, 1)));
    std::vector<journal_position> scanned; // txid 0: one writer, seq order
    int rc;
    while ((rc = scan.step()) == SQLITE_ROW)
      scanned.push_back({0, scan.integer(0)});
    if (rc != SQLITE_DONE)
      return rollback("cannot scan the journal for retention");
    journal_pruned pruned;
    pruned.scanned_to = scanned.empty() ? round.after_seq : scanned.back().seq;
    pruned.done = scanned.size() < std::max<std::size_t>(round.limit, 1);
    statement remove(db_, "DELETE FROM journal WHERE seq = ?");
    if (!remove.ok())
      return rollback("cannot delete old journal rows");
    for (auto seq : rows_to_prune(round, scanned)) {
      remove.bind(1, seq);
      if (remove.step() != SQLITE_DONE)
        return rollback("cannot delete old journal rows");
      remove.reset();
      ++pruned.deleted;
    }
    if (auto st = exec("COMMIT"); !st)
      return rollback("commit failed");
    return pruned;
  }

  status release_slot(const std::string& node) override {
    if (auto st = open(); !st)
      return st;
    statement remove(db_, "DELETE FROM remediation_slots WHERE node = ?");
    remove.bind(1, node);
    if (!remove.ok() || remove.step() != SQLITE_DONE)
      return error("cannot release the slot");
    return ok();
  }

  status put_fleet_snapshot(const fleet_snapshot& s) override {
    if (auto st = open(); !st)
      return st;
    if (auto st = exec("BEGIN IMMEDIATE"); !st)
      return st;
    const auto rows = seq_list(s.rows); // bound without a copy
    statement insert(db_, "INSERT INTO fleet_snapshots (taken_at_ns, txid, seq, horizons,"
                          " row_seqs) VALUES (?, ?, ?, ?, ?)");
    insert.bind(1, to_ns(s.taken_at));
    insert.bind(2, s.position.txid);
    insert.bind(3, s.position.seq);
    insert.bind(4, s.horizons);
    insert.bind(5, rows);
    if (!insert.ok() || insert.step() != SQLITE_DONE)
      return rollback("cannot store the fleet snapshot");
    if (auto st = exec("DELETE FROM fleet_snapshots WHERE id NOT IN"
                       " (SELECT id FROM fleet_snapshots ORDER BY id DESC LIMIT 2)");
        !st)
      return rollback("cannot drop old fleet snapshots");
    if (auto st = exec("COMMIT"); !st)
      return rollback("commit failed");
    return ok();
  }

  expected<fleet_snapshot> latest_fleet_snapshot() override {
    if (auto st = open(); !st)
      return st.error();
    statement select(db_, "SELECT id, taken_at_ns, txid, seq, horizons, row_seqs"
                          " FROM fleet_snapshots ORDER BY id DESC LIMIT 1");
    if (!select.ok())
      return error("cannot read fleet snapshots").error();
    const int rc = select.step();
    if (rc == SQLITE_DONE)
      return fleet_snapshot{};
    if (rc != SQLITE_ROW)
      return error("cannot read fleet snapshots").error();
    auto rows = parse_seq_list(select.text(5));
    if (!rows)
      return failure{describe(), "fleet snapshot " + std::to_string(select.integer(0))
                                   + ": " + rows.error().what};
    return fleet_snapshot{select.integer(0), from_ns(select.integer(1)),
                          journal_position{select.integer(2), select.integer(3)},
                          select.text(4), std::move(*rows)};
  }

  status put_snapshot(const journal_snapshot& s) override {
    if (auto st = open(); !st)
      return st;
    statement insert(db_, "INSERT OR REPLACE INTO journal_snapshots (seq, taken_at_ns, "
                          "body) VALUES (?, ?, ?)");
    insert.bind(1, s.seq);
    insert.bind(2, to_ns(s.taken_at));
    insert.bind(3, s.body);
    if (!insert.ok() || insert.step() != SQLITE_DONE)
      return error("cannot store the snapshot");
    return ok();
  }

  expected<std::optional<journal_snapshot>> latest_snapshot() override {
    if (auto st = open(); !st)
      return st.error();
    statement select(db_, "SELECT seq, taken_at_ns, body FROM journal_snapshots "
                          "ORDER BY seq DESC LIMIT 1");
    if (!select.ok())
      return error("cannot read snapshots").error();
    const int rc = select.step();
    if (rc == SQLITE_DONE)
      return std::optional<journal_snapshot>{};
    if (rc != SQLITE_ROW)
      return error("cannot read snapshots").error();
    return std::optional<journal_snapshot>{
      journal_snapshot{select.integer(0), from_ns(select.integer(1)), select.text(2)}};
  }

  expected<std::int64_t> last_seq() override {
    if (auto st = open(); !st)
      return st.error();
    statement select(db_, "SELECT COALESCE(MAX(seq), 0) FROM journal");
    if (!select.ok() || select.step() != SQLITE_ROW)
      return error("cannot read the last seq").error();
    return select.integer(0);
  }

  void close() override {
    if (db_ != nullptr)
      sqlite3_close_v2(db_);
    db_ = nullptr;
  }

  std::string describe() const override { return "sqlite:" + path_; }

private:
  status exec(const char* sql) {
    char* msg = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &msg) == SQLITE_OK)
      return ok();
    failure f{describe(), std::string(sql) + ": " + (msg ? msg : "failed")};
    sqlite3_free(msg);
    return f;
  }

  status error(const std::string& what) const {
    return failure{describe(),
                   what + ": " + (db_ ? sqlite3_errmsg(db_) : "no database handle")};
  }

  failure rollback(const std::string& what) {
    auto err = error(what).error();
    exec("ROLLBACK");
    return err;
  }

  status migrate() {
    if (auto st =
          exec("CREATE TABLE IF NOT EXISTS vigil_schema (version integer NOT NULL)");
        !st)
      return st;
    statement current(db_, "SELECT COALESCE(MAX(version), 0) FROM vigil_schema");
    if (!current.ok() || current.step() != SQLITE_ROW)
      return error("cannot read the schema version");
    const auto found = static_cast<int>(current.integer(0));
    if (found > journal_schema_version)
      return failure{describe(), newer_schema_message(found, journal_schema_version)};
    for (int v = found + 1; v <= journal_schema_version; ++v) {
      if (auto st = exec("BEGIN IMMEDIATE"); !st)
        return st;
      for (const auto& sql : journal_migration(sql_dialect::sqlite, v))
        if (auto st = exec(sql.c_str()); !st) {
          exec("ROLLBACK");
          return st;
        }
      const auto record =
        "INSERT INTO vigil_schema (version) VALUES (" + std::to_string(v) + ")";
      if (auto st = exec(record.c_str()); !st) {
        exec("ROLLBACK");
        return st;
      }
      if (auto st = exec("COMMIT"); !st)
        return st;
    }
    return ok();
  }

  std::string path_;
  sqlite3* db_ = nullptr;
};

} // namespace

std::unique_ptr<journal_store> make_sqlite_journal_store(std::string path) {
  return std::make_unique<sqlite_journal_store>(std::move(path));
}

} // namespace vigil
