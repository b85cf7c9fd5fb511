// The production journal on PostgreSQL through libpq. A batch is one
// statement (unnest of parameter arrays), so it commits whole or not at all,
// and ON CONFLICT on the idempotency key turns a re-sent fact into a duplicate.
#include <libpq-fe.h>

#include <memory>

#include "runtime/journal/journal_schema.hpp"
#include "runtime/journal/journal_store.hpp"

namespace vigil {

namespace {

constexpr const char* append_sql = R"(
WITH input AS (
  SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[])
    WITH ORDINALITY AS t(recorded_at_ns, node, kind, idempotency_key, body, ord)
), inserted AS (
  INSERT INTO journal (recorded_at_ns, node, kind, idempotency_key, body)
  SELECT recorded_at_ns, node, kind, idempotency_key, body::jsonb FROM input ORDER BY ord
  ON CONFLICT (idempotency_key) DO NOTHING
  RETURNING seq, idempotency_key
)
SELECT COALESCE(ins.seq, (SELECT j.seq FROM journal j
                          WHERE j.idempotency_key = i.idempotency_key)),
       (ins.seq IS NULL OR i.rn > 1)
FROM (SELECT ord, idempotency_key,
             row_number() OVER (PARTITION BY idempotency_key ORDER BY ord) AS rn
      FROM input) i
LEFT JOIN inserted ins ON ins.idempotency_key = i.idempotency_key
ORDER BY i.ord)";

constexpr const char* read_sql =
  "SELECT seq, recorded_at_ns, node, kind, idempotency_key, body::text FROM journal "
  "WHERE seq > $1 AND recorded_at_ns >= $2 AND recorded_at_ns <= $3 "
  "AND ($4 = '' OR node = $4) ORDER BY seq LIMIT $5";

using result_ptr = std::unique_ptr<PGresult, decltype(&PQclear)>;

// PostgreSQL array literal of text values: {"a","b\"c"}.
void append_array_item(std::string& out, const std::string& value) {
  out += out.size() == 1 ? "\"" : ",\"";
  for (char c : value) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  out += '"';
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
  pq_journal_store(std::string url, std::string description)
    : url_(std::move(url)), description_(std::move(description)) {}
  ~pq_journal_store() override { close(); }

  status open() override {
    if (conn_ != nullptr && PQstatus(conn_) == CONNECTION_OK)
      return ok();
    close();
    conn_ = PQconnectdb(url_.c_str());
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
    result_ptr prepared{PQprepare(conn_, "append", append_sql, 5, nullptr), &PQclear};
    if (PQresultStatus(prepared.get()) != PGRES_COMMAND_OK) {
      auto err = failure{description_, "cannot prepare the append: " + last_error()};
      close();
      return err;
    }
    return ok();
  }

  expected<std::vector<append_outcome>>
  append(const std::vector<journal_record>& batch) override {
    if (auto st = open(); !st)
      return st.error();
    std::string times = "{", nodes = "{", kinds = "{", keys = "{", bodies = "{";
    for (const auto& r : batch) {
      times += (times.size() == 1 ? "" : ",")
               + std::to_string(r.recorded_at.time_since_epoch().count());
      append_array_item(nodes, r.node);
      append_array_item(kinds, r.kind);
      append_array_item(keys, r.idempotency_key);
      append_array_item(bodies, r.body);
    }
    for (auto* array : {&times, &nodes, &kinds, &keys, &bodies})
      *array += '}';
    const char* params[] = {times.c_str(), nodes.c_str(), kinds.c_str(), keys.c_str(),
                            bodies.c_str()};
    result_ptr res{PQexecPrepared(conn_, "append", 5, params, nullptr, nullptr, 0),
                   &PQclear};
    if (PQresultStatus(res.get()) != PGRES_TUPLES_OK)
      return fail("append failed");
    std::vector<append_outcome> out;
    out.reserve(batch.size());
    for (int row = 0; row < PQntuples(res.get()); ++row)
      out.push_back({std::stoll(PQgetvalue(res.get(), row, 0)),
                     PQgetvalue(res.get(), row, 1)[0] == 't'});
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
    const char* params[] = {after.c_str(), since.c_str(), until.c_str(), q.node.c_str(),
                            limit.c_str()};
    result_ptr res{PQexecParams(conn_, read_sql, 5, nullptr, params, nullptr, nullptr, 0),
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
    return rows;
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
  PGconn* conn_ = nullptr;
};

} // namespace

expected<std::unique_ptr<journal_store>> make_pq_journal_store(const std::string& url) {
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
    std::make_unique<pq_journal_store>(url, std::move(description)));
}

} // namespace vigil
