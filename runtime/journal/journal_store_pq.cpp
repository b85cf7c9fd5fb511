// The production journal on PostgreSQL through libpq. A batch is one
// transaction (COPY into a temporary table, then INSERT … SELECT), so it
// commits whole or not at all.
#include <libpq-fe.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/journal/journal_schema.hpp"
#include "runtime/journal/journal_store.hpp"

namespace vigil {

namespace {

// Two ways in. The fast path reserves the batch's seqs and COPYs the rows
// straight into the journal: as fast as PostgreSQL takes rows. A re-sent fact
// makes that COPY fail on the unique idempotency key; the batch is then rolled
// back and goes the checked way: COPY into a per-connection temporary table,
// then one INSERT … SELECT … ON CONFLICT DO NOTHING in arrival order, which
// answers a duplicate with the seq it was first stored under.
constexpr const char* reserve_sql =
  "SELECT nextval('journal_seq_seq') FROM generate_series(1, $1::integer)";

constexpr const char* copy_journal_sql =
  "COPY journal (seq, recorded_at_ns, node, kind, idempotency_key, body, shard, "
  "shard_count) FROM STDIN";

constexpr const char* incoming_table_sql =
  "CREATE TEMP TABLE IF NOT EXISTS journal_incoming (ord integer, recorded_at_ns bigint, "
  "node text, kind text, idempotency_key text, body text, shard integer, "
  "shard_count integer) ON COMMIT DELETE ROWS";

constexpr const char* copy_incoming_sql =
  "COPY journal_incoming (ord, recorded_at_ns, node, kind, idempotency_key, body, "
  "shard, shard_count) FROM STDIN";

constexpr const char* append_sql = R"(
WITH inserted AS (
  INSERT INTO journal (recorded_at_ns, node, kind, idempotency_key, body, shard,
                       shard_count)
  SELECT recorded_at_ns, node, kind, idempotency_key, body::jsonb, shard, shard_count
  FROM journal_incoming ORDER BY ord
  ON CONFLICT (idempotency_key) DO NOTHING
  RETURNING seq, idempotency_key
)
SELECT COALESCE(ins.seq, (SELECT j.seq FROM journal j
                          WHERE j.idempotency_key = i.idempotency_key)),
       ins.seq IS NULL
FROM journal_incoming i LEFT JOIN inserted ins USING (idempotency_key)
ORDER BY i.ord)";

// What a COPY refused for an idempotency key already stored says.
constexpr const char* duplicate_marker = "duplicate idempotency key";

constexpr const char* read_sql =
  "SELECT seq, recorded_at_ns, node, kind, idempotency_key, body::text FROM journal "
  "WHERE seq > $1 AND recorded_at_ns >= $2 AND recorded_at_ns <= $3 "
  "AND ($4 = '' OR node = $4) AND (txid, seq) <= ($6::bigint, $7::bigint) "
  "ORDER BY seq LIMIT $5";
// The tail (journal_store::tail): the horizon first, the oldest transaction
// of this database still running (tail_horizon); then the rows after the
// cursor of transactions before it, in (txid, seq) order. Separate
// statements, so that the rows' query is a range scan of journal_txid_seq:
// with the horizon computed in the same statement the planner scanned and
// sorted the whole journal for every page. A transaction before the horizon
// had ended when it was read, so the rows' statement sees all of its rows.
// A filter ($5 shards > 1) leaves out the rows of shards not in $6 (rows
// without a shard, or taken under another shard count, are read).
//
// The snapshot's own xmin would be the oldest transaction of the whole
// server: a long transaction in another database (a report, a migration, a
// dump) would hold every replica's tail back for as long as it ran. Only
// this database's transactions can write the journal, so the horizon is the
// oldest of the snapshot's running transactions that this database's
// sessions (or its prepared transactions) hold; they are read in a second
// statement, after the snapshot, so that a transaction running at both
// moments cannot be missed (pg_stat_activity shows each session's xid to
// every role).
constexpr const char* tail_snapshot_sql = "SELECT pg_current_snapshot()::text";
constexpr const char* tail_running_sql =
  "SELECT backend_xid::text FROM pg_stat_activity "
  "WHERE datname = current_database() AND backend_xid IS NOT NULL "
  "UNION ALL SELECT transaction::text FROM pg_prepared_xacts "
  "WHERE database = current_database()";
constexpr const char* tail_sql =
  "SELECT seq, recorded_at_ns, node, kind, idempotency_key, body::text, txid "
  "FROM journal WHERE (txid, seq) > ($1::bigint, $2::bigint) AND txid < $4::bigint "
  "AND ($5::integer <= 1 OR shard IS NULL OR shard_count <> $5::integer "
  "OR shard = ANY($6::integer[])) "
  "ORDER BY txid, seq LIMIT $3";

// The tail's horizon from a snapshot as pg_current_snapshot() writes it
// ("xmin:xmax:xip,xip,...", 64-bit transaction ids) and the 32-bit ids of
// this database's running transactions: the oldest running transaction that
// is this database's, or xmax when none is. Two running transactions share
// their low 32 bits only 2^32 ids apart, past what wraparound protection
// lets a cluster reach. nullopt: text that is not a snapshot.
std::optional<std::int64_t> tail_horizon(std::string_view snapshot,
                                         const std::vector<std::uint32_t>& running_here) {
  auto number = [](std::string_view text) -> std::optional<std::int64_t> {
    std::int64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || end != text.data() + text.size() || value < 0)
      return std::nullopt;
    return value;
  };
  const auto first = snapshot.find(':');
  const auto second = snapshot.find(':', first == std::string_view::npos ? 0 : first + 1);
  if (first == std::string_view::npos || second == std::string_view::npos)
    return std::nullopt;
  auto horizon = number(snapshot.substr(first + 1, second - first - 1)); // xmax
  if (!horizon)
    return std::nullopt;
  for (auto xip = snapshot.substr(second + 1); !xip.empty();) {
    const auto comma = xip.find(',');
    const auto xid = number(xip.substr(0, comma));
    if (!xid)
      return std::nullopt;
    const auto low = static_cast<std::uint32_t>(*xid & 0xffffffff);
    if (std::find(running_here.begin(), running_here.end(), low) != running_here.end())
      horizon = std::min(*horizon, *xid);
    xip = comma == std::string_view::npos ? std::string_view{} : xip.substr(comma + 1);
  }
  return horizon;
}

// Remediation slots (journal_store::claim_slot): a transaction-scoped
// advisory lock per pool (the first key names vigil's slot locks), its
// holders, a claim.
constexpr const char* slot_lock_sql =
  "SELECT pg_advisory_xact_lock(1986948931, hashtext($1))";
constexpr const char* slot_holders_sql =
  "SELECT node FROM remediation_slots WHERE pool = $1";
constexpr const char* slot_claim_sql =
  "INSERT INTO remediation_slots (node, pool, claimed_at_ns) VALUES ($1, $2, $3) "
  "ON CONFLICT (node) DO UPDATE SET pool = EXCLUDED.pool, "
  "claimed_at_ns = EXCLUDED.claimed_at_ns";

// The breaker's cordon window (journal_store::claim_cordon): one
// transaction-scoped advisory lock for the fleet (vigil's breaker key, not a
// pool's), taken in a statement of its own (a statement's snapshot predates
// a lock it takes itself), which also reads the database's clock once the
// lock is held: every replica's cordons and trips are stamped, and the
// window moved, by that one clock (microseconds, as PostgreSQL keeps it).
// Then in one statement the rows out of the window or closed by a reset
// dropped and what is left read: the count, whether the node is counted,
// the newest trip (NULLs: none). Its reads filter as the deletes do: they
// see the statement's snapshot, from before the deletes.
constexpr const char* cordon_lock_sql =
  "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint "
  "FROM (SELECT pg_advisory_xact_lock(1986948932, 0)) AS locked";
// An operator's reset (journal_store::reset_cordon_window), under that lock.
constexpr const char* cordon_reset_sql =
  "WITH forgotten AS (DELETE FROM breaker_cordons), "
  "closed AS (DELETE FROM breaker_trips) SELECT 1";
constexpr const char* cordon_read_sql =
  "WITH pruned_cordons AS (DELETE FROM breaker_cordons "
  "WHERE cordoned_at_ns <= $1::bigint), "
  "pruned_trips AS (DELETE FROM breaker_trips WHERE tripped_at_ns <= $2::bigint), "
  "trip AS (SELECT tripped_at_ns, reason FROM breaker_trips "
  "WHERE tripped_at_ns > $2::bigint ORDER BY tripped_at_ns DESC LIMIT 1) "
  "SELECT (SELECT count(*) FROM breaker_cordons WHERE cordoned_at_ns > $1::bigint), "
  "(SELECT coalesce(bool_or(node = $3), false) FROM breaker_cordons "
  "WHERE cordoned_at_ns > $1::bigint), "
  "(SELECT tripped_at_ns FROM trip), (SELECT reason FROM trip)";
constexpr const char* cordon_insert_sql =
  "INSERT INTO breaker_cordons (node, cordoned_at_ns) VALUES ($1, $2::bigint) "
  "ON CONFLICT (node) DO UPDATE SET cordoned_at_ns = EXCLUDED.cordoned_at_ns";
constexpr const char* trip_insert_sql =
  "INSERT INTO breaker_trips (tripped_at_ns, reason) VALUES ($1::bigint, $2)";

// The same rows from the newest back (journal_query::newest).
constexpr const char* read_newest_sql =
  "SELECT seq, recorded_at_ns, node, kind, idempotency_key, body::text FROM journal "
  "WHERE seq > $1 AND recorded_at_ns >= $2 AND recorded_at_ns <= $3 "
  "AND ($4 = '' OR node = $4) AND (txid, seq) <= ($6::bigint, $7::bigint) "
  "ORDER BY seq DESC LIMIT $5";

// Journal retention (journal_store::prune): one round's candidates, in seq
// order, then the deletion of those rows_to_prune picks.
constexpr const char* prune_scan_sql =
  "SELECT seq, txid FROM journal WHERE seq > $1::bigint AND recorded_at_ns < $2::bigint "
  "ORDER BY seq LIMIT $3";
constexpr const char* prune_delete_sql =
  "DELETE FROM journal WHERE seq = ANY($1::bigint[])";

// A fleet snapshot's rows (journal_query::seqs), by primary key.
constexpr const char* read_seqs_sql =
  "SELECT seq, recorded_at_ns, node, kind, idempotency_key, body::text FROM journal "
  "WHERE seq = ANY($1::bigint[]) ORDER BY seq";

using result_ptr = std::unique_ptr<PGresult, decltype(&PQclear)>;

// One field of COPY's text format: backslash, tab, newline and carriage
// return escaped.
void append_copy_field(std::string& out, std::string_view value, char terminator) {
  for (char c : value) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      default: out += c;
    }
  }
  out += terminator;
}

// The first occurrence of each idempotency key, in order; `first_of[i]` is
// the index in `unique` that batch[i] maps to, so a key repeated inside one
// batch is stored once and its later copies are answered as duplicates.
struct deduplicated_batch {
  std::vector<const journal_record*> unique;
  std::vector<size_t> first_of;
};

deduplicated_batch deduplicate(const std::vector<journal_record>& batch) {
  deduplicated_batch out;
  std::unordered_map<std::string_view, size_t> index;
  index.reserve(batch.size());
  for (const auto& r : batch) {
    auto [it, inserted] = index.emplace(r.idempotency_key, out.unique.size());
    if (inserted)
      out.unique.push_back(&r);
    out.first_of.push_back(it->second);
  }
  return out;
}

// COPY text rows: `first[i]` (the seq or the arrival index), then the record
// and its shard (\N: none).
std::string copy_rows(const std::vector<const journal_record*>& rows,
                      const std::vector<std::int64_t>& first,
                      const tail_routing& routing) {
  std::string data;
  size_t bytes = 0;
  for (const auto* r : rows)
    bytes += r->body.size() + r->node.size() + r->kind.size() + r->idempotency_key.size();
  data.reserve(bytes + rows.size() * 64);
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& r = *rows[i];
    data += std::to_string(first[i]);
    data += '\t';
    data += std::to_string(r.recorded_at.time_since_epoch().count());
    data += '\t';
    append_copy_field(data, r.node, '\t');
    append_copy_field(data, r.kind, '\t');
    append_copy_field(data, r.idempotency_key, '\t');
    append_copy_field(data, r.body, '\t');
    if (auto shard = routing(r)) {
      data += std::to_string(*shard);
      data += '\t';
      data += std::to_string(routing.shards);
      data += '\n';
    } else {
      data += "\\N\t\\N\n";
    }
  }
  return data;
}

// What vigil asks of the connection itself unless the URL or the
// environment says otherwise (libpq reads these before the URL, expanded from
// the dbname entry, so each of the URL's own parameters wins; a keyword that
// PGCONNECT_TIMEOUT or the service file PGSERVICE names sets is not passed,
// since libpq would not read the environment for it; a service named by the
// URL's own `service` parameter is read after these, so its settings of
// these keywords belong in the URL instead): give up a connection attempt after 10 s,
// and notice a database host that vanished without closing the connection
// within about 25 s whether the socket is idle (TCP keepalives: 10 s idle,
// then 3 probes 5 s apart) or has data unacknowledged (tcp_user_timeout).
// Without them a black-holed host kept the journal writer blocked for as
// long as the kernel's retransmissions last (about 15 minutes on Linux).
constexpr std::array<std::pair<const char*, const char*>, 6> connection_defaults = {{
  {"connect_timeout", "10"},
  {"keepalives", "1"},
  {"keepalives_idle", "10"},
  {"keepalives_interval", "5"},
  {"keepalives_count", "3"},
  {"tcp_user_timeout", "25000"},
}};

// pq_session_limits applied to the settings still at PostgreSQL's default
// (pg_settings.source): an operator's choice anywhere else stays.
std::string session_limits_sql(const pq_session_limits& limits) {
  auto value = [](std::chrono::milliseconds d) {
    return "'" + std::to_string(d.count()) + "ms'";
  };
  return "SELECT set_config(name, CASE name WHEN 'statement_timeout' THEN "
         + value(limits.statement_timeout) + " WHEN 'lock_timeout' THEN "
         + value(limits.lock_timeout) + " ELSE "
         + value(limits.idle_in_transaction_session_timeout)
         + " END, false) FROM pg_settings WHERE source = 'default' AND name IN "
           "('statement_timeout', 'lock_timeout', "
           "'idle_in_transaction_session_timeout')";
}

bool valid_sslmode(const std::string& mode) {
  for (const char* m :
       {"disable", "allow", "prefer", "require", "verify-ca", "verify-full"})
    if (mode == m)
      return true;
  return false;
}

class pq_journal_store final : public journal_store {
public:
  pq_journal_store(std::string url, std::string description, pq_session_limits limits)
    : url_(std::move(url)), description_(std::move(description)), limits_(limits) {}
  ~pq_journal_store() override { close(); }

  status open() override {
    if (conn_ != nullptr && PQstatus(conn_) == CONNECTION_OK)
      return ok();
    close();
    const auto defaults = pq_connection_defaults(pq_keywords_set_by_environment());
    std::vector<const char*> keywords, values;
    for (const auto& [keyword, value] : defaults) {
      keywords.push_back(keyword.c_str());
      values.push_back(value.c_str());
    }
    keywords.push_back("dbname"); // the URL, expanded
    values.push_back(url_.c_str());
    keywords.push_back(nullptr);
    values.push_back(nullptr);
    conn_ = PQconnectdbParams(keywords.data(), values.data(), 1);
    if (PQstatus(conn_) != CONNECTION_OK) {
      auto err = failure{description_, "cannot connect: " + last_error()};
      close();
      return err;
    }
    // Server notices ("relation already exists, skipping") are not errors.
    PQsetNoticeProcessor(
      conn_, [](void*, const char*) {}, nullptr);
    if (auto st = migrate(); !st) {
      close();
      return st;
    }
    for (const auto& sql : {session_limits_sql(limits_), std::string(incoming_table_sql)})
      if (auto st = exec(sql); !st) {
        close();
        return st;
      }
    for (auto [name, sql, params] :
         {std::tuple{"append", append_sql, 0}, std::tuple{"reserve", reserve_sql, 1}}) {
      result_ptr prepared{PQprepare(conn_, name, sql, params, nullptr), &PQclear};
      if (PQresultStatus(prepared.get()) != PGRES_COMMAND_OK) {
        auto err = failure{description_,
                           std::string("cannot prepare ") + name + ": " + last_error()};
        close();
        return err;
      }
    }
    return ok();
  }

  expected<std::vector<append_outcome>>
  append(const std::vector<journal_record>& batch) override {
    if (auto st = open(); !st)
      return st.error();
    if (batch.empty())
      return std::vector<append_outcome>{};
    const auto dedup = deduplicate(batch);
    auto stored = in_transaction([&] { return append_fast(dedup.unique); });
    if (!stored && stored.error().what.find(duplicate_marker) != std::string::npos)
      stored = in_transaction([&] { return append_checked(dedup.unique); });
    if (!stored)
      return stored.error();
    std::vector<append_outcome> out;
    out.reserve(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      const size_t u = dedup.first_of[i];
      const bool repeat_in_batch = dedup.unique[u] != &batch[i];
      out.push_back({(*stored)[u].seq, (*stored)[u].duplicate || repeat_in_batch});
    }
    return out;
  }

  expected<std::vector<journal_record>> read(const journal_query& q) override {
    if (auto st = open(); !st)
      return st.error();
    const auto after = std::to_string(q.after_seq);
    const auto since =
      std::to_string(q.since ? q.since->time_since_epoch().count() : INT64_MIN);
    const auto until =
      std::to_string(q.until ? q.until->time_since_epoch().count() : INT64_MAX);
    const auto limit = std::to_string(q.limit);
    const auto seqs = "{" + seq_list(q.seqs) + "}"; // a bigint[]
    const char* seq_params[] = {seqs.c_str()};
    const auto through_txid = std::to_string(q.through ? q.through->txid : INT64_MAX);
    const auto through_seq = std::to_string(q.through ? q.through->seq : INT64_MAX);
    const char* params[] = {after.c_str(),      since.c_str(), until.c_str(),
                            q.node.c_str(),     limit.c_str(), through_txid.c_str(),
                            through_seq.c_str()};
    result_ptr res{
      q.seqs.empty()
        ? PQexecParams(conn_, q.newest ? read_newest_sql : read_sql, 7, nullptr, params,
                       nullptr, nullptr, 0)
        : PQexecParams(conn_, read_seqs_sql, 1, nullptr, seq_params, nullptr, nullptr, 0),
      &PQclear};
    if (PQresultStatus(res.get()) != PGRES_TUPLES_OK)
      return fail("read failed");
    std::vector<journal_record> rows;
    rows.reserve(static_cast<size_t>(PQntuples(res.get())));
    for (int row = 0; row < PQntuples(res.get()); ++row) {
      auto text = [&](int col) { return std::string(PQgetvalue(res.get(), row, col)); };
      rows.push_back({std::stoll(text(0)),
                      wall_time{std::chrono::nanoseconds{std::stoll(text(1))}}, text(2),
                      text(3), text(4), text(5)});
    }
    if (q.newest)
      std::reverse(rows.begin(), rows.end());
    return rows;
  }

  expected<slot_claim> claim_slot(const std::string& pool, const std::string& node,
                                  wall_time now, const slot_rule& admits) override {
    if (auto st = open(); !st)
      return st.error();
    return in_transaction([&]() -> expected<slot_claim> {
      // Claims on one pool wait for each other until their transactions end.
      const char* lock_params[] = {pool.c_str()};
      result_ptr locked{
        PQexecParams(conn_, slot_lock_sql, 1, nullptr, lock_params, nullptr, nullptr, 0),
        &PQclear};
      if (PQresultStatus(locked.get()) != PGRES_TUPLES_OK)
        return fail("cannot lock the pool's slots");
      result_ptr holders{PQexecParams(conn_, slot_holders_sql, 1, nullptr, lock_params,
                                      nullptr, nullptr, 0),
                         &PQclear};
      if (PQresultStatus(holders.get()) != PGRES_TUPLES_OK)
        return fail("cannot read the pool's slots");
      slot_claim claim;
      bool holds = false;
      for (int row = 0; row < PQntuples(holders.get()); ++row) {
        if (node == PQgetvalue(holders.get(), row, 0))
          holds = true;
        else
          ++claim.holders;
      }
      claim.granted = admits(claim.holders, holds);
      if (claim.granted && !holds) {
        const auto at = std::to_string(now.time_since_epoch().count());
        const char* params[] = {node.c_str(), pool.c_str(), at.c_str()};
        result_ptr inserted{
          PQexecParams(conn_, slot_claim_sql, 3, nullptr, params, nullptr, nullptr, 0),
          &PQclear};
        if (PQresultStatus(inserted.get()) != PGRES_COMMAND_OK)
          return fail("cannot claim the slot");
      }
      return claim;
    });
  }

  expected<std::vector<std::string>> slot_holders() override {
    if (auto st = open(); !st)
      return st.error();
    result_ptr res{PQexec(conn_, "SELECT node FROM remediation_slots ORDER BY node"),
                   &PQclear};
    if (PQresultStatus(res.get()) != PGRES_TUPLES_OK)
      return fail("cannot read the slots");
    std::vector<std::string> nodes;
    for (int row = 0; row < PQntuples(res.get()); ++row)
      nodes.emplace_back(PQgetvalue(res.get(), row, 0));
    return nodes;
  }

  expected<cordon_claim> claim_cordon(const cordon_ask& ask) override {
    if (auto st = open(); !st)
      return st.error();
    return in_transaction([&]() -> expected<cordon_claim> {
      auto run = [&](const char* sql, std::vector<std::string> values,
                     ExecStatusType expect) -> expected<result_ptr> {
        std::vector<const char*> params;
        for (const auto& v : values)
          params.push_back(v.c_str());
        result_ptr res{PQexecParams(conn_, sql, static_cast<int>(params.size()), nullptr,
                                    params.data(), nullptr, nullptr, 0),
                       &PQclear};
        if (PQresultStatus(res.get()) != expect)
          return fail("cannot decide the cordon");
        return res;
      };
      auto ns = [](wall_time t) { return std::to_string(t.time_since_epoch().count()); };
      // Cordons asked at once on several replicas wait for each other.
      auto locked = run(cordon_lock_sql, {}, PGRES_TUPLES_OK);
      if (!locked)
        return locked.error();
      const wall_time now{
        std::chrono::microseconds{std::stoll(PQgetvalue(locked->get(), 0, 0))}};
      auto read = run(cordon_read_sql,
                      {ns(cordon_window_start(ask, now)), ns(ask.reset_at), ask.node},
                      PGRES_TUPLES_OK);
      if (!read)
        return read.error();
      PGresult* r = read->get();
      std::optional<std::pair<wall_time, std::string>> trip;
      if (!PQgetisnull(r, 0, 2))
        trip.emplace(wall_time{std::chrono::nanoseconds{std::stoll(PQgetvalue(r, 0, 2))}},
                     PQgetvalue(r, 0, 3));
      const bool holds = PQgetvalue(r, 0, 1)[0] == 't';
      auto claim = decide_cordon(ask, now, trip, std::stoull(PQgetvalue(r, 0, 0)), holds);
      if (claim.trips_now) {
        if (auto r = run(trip_insert_sql, {ns(claim.tripped_at), claim.reason},
                         PGRES_COMMAND_OK);
            !r)
          return r.error();
      } else if (claim.granted && !holds) {
        if (auto r = run(cordon_insert_sql, {ask.node, ns(now)}, PGRES_COMMAND_OK); !r)
          return r.error();
      }
      return claim;
    });
  }

  expected<cordon_window_reset> reset_cordon_window() override {
    if (auto st = open(); !st)
      return st.error();
    return in_transaction([&]() -> expected<cordon_window_reset> {
      result_ptr locked{PQexec(conn_, cordon_lock_sql), &PQclear};
      if (PQresultStatus(locked.get()) != PGRES_TUPLES_OK)
        return fail("cannot reset the breaker's window");
      result_ptr reset{PQexec(conn_, cordon_reset_sql), &PQclear};
      if (PQresultStatus(reset.get()) != PGRES_TUPLES_OK)
        return fail("cannot reset the breaker's window");
      return cordon_window_reset{
        wall_time{std::chrono::microseconds{std::stoll(PQgetvalue(locked.get(), 0, 0))}}};
    });
  }

  expected<journal_pruned> prune(const journal_prune& round) override {
    if (auto st = open(); !st)
      return st.error();
    return in_transaction([&]() -> expected<journal_pruned> {
      const auto after = std::to_string(round.after_seq);
      const auto before =
        std::to_string(round.recorded_before.time_since_epoch().count());
      const auto limit = std::to_string(std::max<std::size_t>(round.limit, 1));
      const char* scan_params[] = {after.c_str(), before.c_str(), limit.c_str()};
      result_ptr scan{
        PQexecParams(conn_, prune_scan_sql, 3, nullptr, scan_params, nullptr, nullptr, 0),
        &PQclear};
      if (PQresultStatus(scan.get()) != PGRES_TUPLES_OK)
        return fail("cannot scan the journal for retention");
      std::vector<journal_position> scanned;
      for (int row = 0; row < PQntuples(scan.get()); ++row)
        scanned.push_back({std::stoll(PQgetvalue(scan.get(), row, 1)),
                           std::stoll(PQgetvalue(scan.get(), row, 0))});
      journal_pruned pruned;
      pruned.scanned_to = scanned.empty() ? round.after_seq : scanned.back().seq;
      pruned.done = scanned.size() < std::max<std::size_t>(round.limit, 1);
      const auto doomed = rows_to_prune(round, scanned);
      if (doomed.empty())
        return pruned;
      const auto seqs = "{" + seq_list(doomed) + "}";
      const char* delete_params[] = {seqs.c_str()};
      result_ptr deleted{PQexecParams(conn_, prune_delete_sql, 1, nullptr, delete_params,
                                      nullptr, nullptr, 0),
                         &PQclear};
      if (PQresultStatus(deleted.get()) != PGRES_COMMAND_OK)
        return fail("cannot delete old journal rows");
      pruned.deleted = std::stoull(PQcmdTuples(deleted.get()));
      return pruned;
    });
  }

  status release_slot(const std::string& node) override {
    if (auto st = open(); !st)
      return st;
    const char* params[] = {node.c_str()};
    result_ptr res{PQexecParams(conn_, "DELETE FROM remediation_slots WHERE node = $1", 1,
                                nullptr, params, nullptr, nullptr, 0),
                   &PQclear};
    if (PQresultStatus(res.get()) != PGRES_COMMAND_OK)
      return fail("cannot release the slot");
    return ok();
  }

  expected<journal_tail_page> tail(const journal_position& after, std::size_t limit,
                                   const tail_filter& filter) override {
    if (auto st = open(); !st)
      return st.error();
    result_ptr snapshot_res{PQexec(conn_, tail_snapshot_sql), &PQclear};
    if (PQresultStatus(snapshot_res.get()) != PGRES_TUPLES_OK)
      return fail("tail read failed");
    result_ptr running_res{PQexec(conn_, tail_running_sql), &PQclear};
    if (PQresultStatus(running_res.get()) != PGRES_TUPLES_OK)
      return fail("tail read failed");
    std::vector<std::uint32_t> running_here;
    for (int row = 0; row < PQntuples(running_res.get()); ++row)
      running_here.push_back(
        static_cast<std::uint32_t>(std::stoul(PQgetvalue(running_res.get(), row, 0))));
    const auto found = tail_horizon(PQgetvalue(snapshot_res.get(), 0, 0), running_here);
    if (!found)
      return failure{description_, std::string("tail read failed: not a snapshot: ")
                                     + PQgetvalue(snapshot_res.get(), 0, 0)};
    const std::int64_t horizon = *found;
    const auto txid = std::to_string(after.txid);
    const auto seq = std::to_string(after.seq);
    const auto n = std::to_string(std::max<std::size_t>(limit, 1));
    const auto before = std::to_string(horizon);
    const auto shards = std::to_string(filter.shards);
    std::string owned = "{"; // an integer[]
    for (auto shard : filter.owned)
      owned += (owned.size() > 1 ? "," : "") + std::to_string(shard);
    owned += "}";
    const char* params[] = {txid.c_str(),   seq.c_str(),    n.c_str(),
                            before.c_str(), shards.c_str(), owned.c_str()};
    result_ptr res{PQexecParams(conn_, tail_sql, 6, nullptr, params, nullptr, nullptr, 0),
                   &PQclear};
    if (PQresultStatus(res.get()) != PGRES_TUPLES_OK)
      return fail("tail read failed");
    journal_tail_page page;
    page.next = after;
    for (int row = 0; row < PQntuples(res.get()); ++row) {
      auto text = [&](int col) { return std::string(PQgetvalue(res.get(), row, col)); };
      page.rows.push_back({std::stoll(text(0)),
                           wall_time{std::chrono::nanoseconds{std::stoll(text(1))}},
                           text(2), text(3), text(4), text(5)});
      page.positions.push_back({std::stoll(text(6)), page.rows.back().seq});
    }
    if (page.rows.size() >= std::max<std::size_t>(limit, 1))
      page.next = page.positions.back(); // more may follow: read on from here
    else if (horizon > after.txid)
      // Every transaction before the horizon has ended and was read: the
      // next read starts at the horizon.
      page.next = {horizon, 0};
    else if (!page.positions.empty())
      page.next = page.positions.back();
    return page;
  }

  status put_fleet_snapshot(const fleet_snapshot& s) override {
    if (auto st = open(); !st)
      return st;
    const auto taken = std::to_string(s.taken_at.time_since_epoch().count());
    const auto txid = std::to_string(s.position.txid);
    const auto seq = std::to_string(s.position.seq);
    const auto rows = seq_list(s.rows);
    const char* params[] = {taken.c_str(), txid.c_str(), seq.c_str(), s.horizons.c_str(),
                            rows.c_str()};
    return in_transaction([&]() -> status {
      result_ptr res{PQexecParams(conn_,
                                  "INSERT INTO fleet_snapshots (taken_at_ns, txid, seq,"
                                  " horizons, row_seqs) VALUES ($1, $2, $3, $4, $5)",
                                  5, nullptr, params, nullptr, nullptr, 0),
                     &PQclear};
      if (PQresultStatus(res.get()) != PGRES_COMMAND_OK)
        return fail("cannot store the fleet snapshot");
      return exec("DELETE FROM fleet_snapshots WHERE id NOT IN"
                  " (SELECT id FROM fleet_snapshots ORDER BY id DESC LIMIT 2)");
    });
  }

  expected<fleet_snapshot> latest_fleet_snapshot() override {
    if (auto st = open(); !st)
      return st.error();
    result_ptr res{PQexec(conn_, "SELECT id, taken_at_ns, txid, seq, horizons, row_seqs"
                                 " FROM fleet_snapshots ORDER BY id DESC LIMIT 1"),
                   &PQclear};
    if (PQresultStatus(res.get()) != PGRES_TUPLES_OK)
      return fail("cannot read fleet snapshots");
    if (PQntuples(res.get()) == 0)
      return fleet_snapshot{};
    auto text = [&](int col) { return std::string(PQgetvalue(res.get(), 0, col)); };
    auto rows = parse_seq_list(text(5));
    if (!rows)
      return failure{description_,
                     "fleet snapshot " + text(0) + ": " + rows.error().what};
    return fleet_snapshot{std::stoll(text(0)),
                          wall_time{std::chrono::nanoseconds{std::stoll(text(1))}},
                          journal_position{std::stoll(text(2)), std::stoll(text(3))},
                          text(4), std::move(*rows)};
  }

  status put_snapshot(const journal_snapshot& s) override {
    if (auto st = open(); !st)
      return st;
    const auto seq = std::to_string(s.seq);
    const auto taken = std::to_string(s.taken_at.time_since_epoch().count());
    const char* params[] = {seq.c_str(), taken.c_str(), s.body.c_str()};
    result_ptr res{
      PQexecParams(conn_,
                   "INSERT INTO journal_snapshots (seq, taken_at_ns, body) "
                   "VALUES ($1, $2, $3::jsonb) ON CONFLICT (seq) DO UPDATE "
                   "SET taken_at_ns = EXCLUDED.taken_at_ns, body = EXCLUDED.body",
                   3, nullptr, params, nullptr, nullptr, 0),
      &PQclear};
    if (PQresultStatus(res.get()) != PGRES_COMMAND_OK)
      return fail("cannot store the snapshot");
    return ok();
  }

  expected<std::optional<journal_snapshot>> latest_snapshot() override {
    if (auto st = open(); !st)
      return st.error();
    result_ptr res{PQexec(conn_, "SELECT seq, taken_at_ns, body::text FROM "
                                 "journal_snapshots ORDER BY seq DESC LIMIT 1"),
                   &PQclear};
    if (PQresultStatus(res.get()) != PGRES_TUPLES_OK)
      return fail("cannot read snapshots");
    if (PQntuples(res.get()) == 0)
      return std::optional<journal_snapshot>{};
    return std::optional<journal_snapshot>{journal_snapshot{
      std::stoll(PQgetvalue(res.get(), 0, 0)),
      wall_time{std::chrono::nanoseconds{std::stoll(PQgetvalue(res.get(), 0, 1))}},
      PQgetvalue(res.get(), 0, 2)}};
  }

  expected<std::int64_t> last_seq() override {
    if (auto st = open(); !st)
      return st.error();
    result_ptr res{PQexec(conn_, "SELECT COALESCE(MAX(seq), 0) FROM journal"), &PQclear};
    if (PQresultStatus(res.get()) != PGRES_TUPLES_OK)
      return fail("cannot read the last seq");
    return std::stoll(PQgetvalue(res.get(), 0, 0));
  }

  void close() override {
    if (conn_ != nullptr)
      PQfinish(conn_);
    conn_ = nullptr;
  }

  std::string describe() const override { return description_; }

private:
  std::string last_error() const {
    std::string msg = conn_ ? PQerrorMessage(conn_) : "no connection";
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' '))
      msg.pop_back();
    return msg;
  }

  // A failed statement: report it, and drop a broken connection so the next
  // call reconnects.
  failure fail(const std::string& what) {
    failure f{description_, what + ": " + last_error()};
    if (PQstatus(conn_) != CONNECTION_OK)
      close();
    return f;
  }

  // Runs `body` between BEGIN and COMMIT; rolls back when it fails or
  // throws (a connection left inside a transaction would hold its locks and
  // fold the next call's statements into it).
  template <class Body>
  auto in_transaction(Body body) -> decltype(body()) {
    if (auto st = exec("BEGIN"); !st)
      return fail("cannot begin");
    auto result = [&] {
      try {
        return body();
      } catch (...) {
        exec("ROLLBACK");
        throw;
      }
    }();
    if (!result) {
      exec("ROLLBACK");
      return result;
    }
    if (auto st = exec("COMMIT"); !st)
      return fail("commit failed");
    return result;
  }

  // Sends `data` to a COPY already started by `sql`.
  status copy_in(const char* sql, const std::string& data) {
    result_ptr started{PQexec(conn_, sql), &PQclear};
    if (PQresultStatus(started.get()) != PGRES_COPY_IN)
      return fail("cannot start COPY");
    if (PQputCopyData(conn_, data.data(), static_cast<int>(data.size())) != 1
        || PQputCopyEnd(conn_, nullptr) != 1)
      return fail("COPY failed");
    status outcome = ok();
    for (PGresult* r; (r = PQgetResult(conn_)) != nullptr;) {
      result_ptr copied{r, &PQclear};
      if (PQresultStatus(r) != PGRES_COMMAND_OK && outcome) {
        const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        const bool duplicate = state != nullptr && std::string_view{state} == "23505";
        outcome = fail(duplicate ? duplicate_marker : "COPY failed");
      }
    }
    return outcome;
  }

  // Reserve one seq per row and COPY the rows straight into the journal.
  expected<std::vector<append_outcome>>
  append_fast(const std::vector<const journal_record*>& rows) {
    const auto n = std::to_string(rows.size());
    const char* params[] = {n.c_str()};
    result_ptr res{PQexecPrepared(conn_, "reserve", 1, params, nullptr, nullptr, 0),
                   &PQclear};
    if (PQresultStatus(res.get()) != PGRES_TUPLES_OK
        || static_cast<size_t>(PQntuples(res.get())) != rows.size())
      return fail("cannot reserve seqs");
    std::vector<std::int64_t> seqs;
    seqs.reserve(rows.size());
    for (int row = 0; row < PQntuples(res.get()); ++row)
      seqs.push_back(std::stoll(PQgetvalue(res.get(), row, 0)));
    if (auto st = copy_in(copy_journal_sql, copy_rows(rows, seqs, routing_)); !st)
      return st.error();
    std::vector<append_outcome> out;
    out.reserve(rows.size());
    for (auto seq : seqs)
      out.push_back({seq, false});
    return out;
  }

  // COPY into journal_incoming, then move the rows into the journal, skipping
  // idempotency keys it already holds; one outcome per row, in order.
  expected<std::vector<append_outcome>>
  append_checked(const std::vector<const journal_record*>& rows) {
    std::vector<std::int64_t> order(rows.size());
    for (size_t i = 0; i < rows.size(); ++i)
      order[i] = static_cast<std::int64_t>(i);
    if (auto st = copy_in(copy_incoming_sql, copy_rows(rows, order, routing_)); !st)
      return st.error();
    result_ptr res{PQexecPrepared(conn_, "append", 0, nullptr, nullptr, nullptr, 0),
                   &PQclear};
    if (PQresultStatus(res.get()) != PGRES_TUPLES_OK)
      return fail("append failed");
    if (static_cast<size_t>(PQntuples(res.get())) != rows.size())
      return failure{description_, "append returned "
                                     + std::to_string(PQntuples(res.get())) + " rows for "
                                     + std::to_string(rows.size())};
    std::vector<append_outcome> out;
    out.reserve(rows.size());
    for (int row = 0; row < PQntuples(res.get()); ++row)
      out.push_back({std::stoll(PQgetvalue(res.get(), row, 0)),
                     PQgetvalue(res.get(), row, 1)[0] == 't'});
    return out;
  }

  status exec(const std::string& sql) {
    result_ptr res{PQexec(conn_, sql.c_str()), &PQclear};
    const auto st = PQresultStatus(res.get());
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
      return failure{description_, sql.substr(0, 60) + ": " + last_error()};
    return ok();
  }

  status migrate() {
    // The advisory lock serialises migrations of replicas starting together.
    if (auto st = exec("BEGIN"); !st)
      return st;
    auto abort = [this](status st) {
      exec("ROLLBACK");
      return st;
    };
    for (const char* sql : {"SELECT pg_advisory_xact_lock(7447001)",
                            "CREATE TABLE IF NOT EXISTS vigil_schema "
                            "(version integer NOT NULL)"})
      if (auto st = exec(sql); !st)
        return abort(st);
    result_ptr res{PQexec(conn_, "SELECT COALESCE(MAX(version), 0) FROM vigil_schema"),
                   &PQclear};
    if (PQresultStatus(res.get()) != PGRES_TUPLES_OK)
      return abort(
        failure{description_, "cannot read the schema version: " + last_error()});
    const int found = std::stoi(PQgetvalue(res.get(), 0, 0));
    if (found > journal_schema_version)
      return abort(
        failure{description_, newer_schema_message(found, journal_schema_version)});
    for (int v = found + 1; v <= journal_schema_version; ++v) {
      for (const auto& sql : journal_migration(sql_dialect::postgresql, v))
        if (auto st = exec(sql); !st)
          return abort(st);
      if (auto st =
            exec("INSERT INTO vigil_schema (version) VALUES (" + std::to_string(v) + ")");
          !st)
        return abort(st);
    }
    return exec("COMMIT");
  }

  std::string url_;
  std::string description_;
  pq_session_limits limits_;
  PGconn* conn_ = nullptr;
};

} // namespace

std::vector<std::pair<std::string, std::string>>
pq_connection_defaults(const std::set<std::string>& set_elsewhere) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [keyword, value] : connection_defaults)
    if (set_elsewhere.count(keyword) == 0)
      out.emplace_back(keyword, value);
  return out;
}

std::set<std::string> pq_keywords_set_by_environment() {
  std::set<std::string> out;
  PQconninfoOption* defaults = PQconndefaults();
  if (defaults == nullptr) // out of memory: vigil's defaults, then
    return out;
  // PQconndefaults also reports libpq's compiled-in defaults (port, sslmode
  // and more) and the OS user: a value equal to the compiled one is not the
  // environment's.
  for (const auto* option = defaults; option->keyword != nullptr; ++option)
    if (option->val != nullptr && *option->val != '\0'
        && (option->compiled == nullptr
            || std::strcmp(option->val, option->compiled) != 0))
      out.insert(option->keyword);
  PQconninfoFree(defaults);
  return out;
}

expected<std::unique_ptr<journal_store>> make_pq_journal_store(const std::string& url,
                                                               pq_session_limits limits) {
  char* err = nullptr;
  PQconninfoOption* options = PQconninfoParse(url.c_str(), &err);
  if (options == nullptr) {
    std::string msg = err ? err : "cannot parse";
    PQfreemem(err);
    while (!msg.empty() && msg.back() == '\n')
      msg.pop_back();
    return failure{"journal url", "malformed PostgreSQL URL: " + msg};
  }
  std::string host = "localhost", port = "5432", dbname, sslmode;
  for (auto* o = options; o->keyword != nullptr; ++o) {
    if (o->val == nullptr)
      continue;
    const std::string key = o->keyword;
    if (key == "host" || key == "hostaddr")
      host = o->val;
    else if (key == "port")
      port = o->val;
    else if (key == "dbname")
      dbname = o->val;
    else if (key == "sslmode")
      sslmode = o->val;
  }
  PQconninfoFree(options);
  if (!sslmode.empty() && !valid_sslmode(sslmode))
    return failure{"journal url", "sslmode '" + sslmode
                                    + "' is not one of disable, allow, prefer, require, "
                                      "verify-ca, verify-full"};
  auto description = "postgresql://" + host + ":" + port + "/" + dbname;
  return std::unique_ptr<journal_store>(
    std::make_unique<pq_journal_store>(url, std::move(description), limits));
}

} // namespace vigil
