// The journal: an append-only log of every event vigil learns and every
// decision it takes (ARCHITECTURE.md §2, §5). One interface, two stores that
// share one schema: PostgreSQL in production, SQLite embedded.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "messages/expected.hpp"
#include "messages/wall_time.hpp"

namespace vigil {

/// Schema versions this binary knows; migrations bring a store up to the last.
constexpr int journal_schema_version = 6;

/// One journal row. `body` is JSON text: a HealthEvent for kind "event",
/// a decision or side effect for the other kinds.
struct journal_record {
  std::int64_t seq = 0; ///< assigned by the store; 0 before it is stored
  wall_time recorded_at{};
  std::string node;            ///< empty for fleet-wide rows
  std::string kind;            ///< "event", "quarantined", "breaker_tripped", …
  std::string idempotency_key; ///< unique: a re-sent fact is stored once
  std::string body;
};

/// What happened to one appended record.
struct append_outcome {
  std::int64_t seq = 0;   ///< the row's sequence number (the first copy's, if duplicate)
  bool duplicate = false; ///< the key was stored before; nothing was written

  friend bool operator==(const append_outcome& a, const append_outcome& b) {
    return a.seq == b.seq && a.duplicate == b.duplicate;
  }
};

/// A place in the journal's commit order, the tail's cursor: rows ordered by
/// the transaction that wrote them (PostgreSQL's 64-bit transaction id;
/// always 0 in SQLite, whose one writer commits in seq order), then by seq.
struct journal_position {
  std::int64_t txid = 0;
  std::int64_t seq = 0;

  friend bool operator<(const journal_position& a, const journal_position& b) {
    return a.txid != b.txid ? a.txid < b.txid : a.seq < b.seq;
  }
  friend bool operator==(const journal_position& a, const journal_position& b) {
    return a.txid == b.txid && a.seq == b.seq;
  }
};

struct journal_query {
  std::int64_t after_seq = 0; ///< rows with seq > after_seq
  std::optional<wall_time> since;
  std::optional<wall_time> until;
  std::string node; ///< empty: every node
  std::size_t limit = 10000;
  /// The last `limit` matching rows rather than the first (still returned in
  /// seq order): a node's recent history, however long its past.
  bool newest = false;
  /// Only rows at or before this place in commit order (journal_store::tail):
  /// sharded, a node's history up to where the fleet's tail has read, so
  /// that the rows after it come once, from the tail.
  std::optional<journal_position> through;
  /// Only these rows, in seq order (a fleet snapshot's, issue 22); the other
  /// fields are ignored then. Empty: no such filter.
  std::vector<std::int64_t> seqs;
};

/// One read of the tail: rows in commit order, each with its position.
struct journal_tail_page {
  std::vector<journal_record> rows;
  std::vector<journal_position> positions; ///< rows[i]'s position
  journal_position next;                   ///< where the next read starts
};

/// Sharded (issue 22): the rows one replica's tail reads, those of the
/// shards it owns and every row stored without a shard (the rows every
/// replica reads: journal_store::tail_routing). `shards` ≤ 1: every row. A
/// store may return more than the filter asks for, never less: the reader
/// still checks each row (SQLite, one process's journal, returns them all).
struct tail_filter {
  std::uint32_t shards = 0;
  std::vector<std::uint32_t> owned;
};

/// How the writer stores each row's shard, for tail_filter: rows whose
/// node's shard owner alone reads them get shard_of(row); every replica's
/// rows (none) and everything written without routing have no shard.
/// `shards` is the K the shard was taken under; a reader with another K
/// reads those rows whatever their shard.
struct tail_routing {
  std::uint32_t shards = 0;
  std::function<std::optional<std::uint32_t>(const journal_record&)> shard_of;

  /// The row's shard to store; none: every replica's tail reads it.
  std::optional<std::uint32_t> operator()(const journal_record& row) const {
    return shards > 1 && shard_of ? shard_of(row) : std::nullopt;
  }
};

/// Journal retention (journal.retention_days): one round of journal_store::
/// prune. The rows scanned are those after `after_seq` recorded before
/// `recorded_before`, in seq order, at most `limit`; of them, those at or
/// before `through` in commit order and not in `keep` are deleted.
struct journal_prune {
  std::int64_t after_seq = 0;
  wall_time recorded_before{};
  journal_position through;
  std::vector<std::int64_t> keep; ///< sorted ascending
  std::size_t limit = 10000;
};

/// What one round of pruning did.
struct journal_pruned {
  std::uint64_t deleted = 0;
  std::int64_t scanned_to = 0; ///< the next round's after_seq
  bool done = false;           ///< fewer than `limit` rows were left to scan
};

/// What a claim on one of a pool's remediation slots found.
struct slot_claim {
  bool granted = false;
  /// Nodes holding one of the pool's slots when the claim was decided
  /// (without the claiming node).
  std::size_t holders = 0;
};

/// Decides a claim from the pool's other holders and whether the node holds
/// a slot already (the breaker's rule, control::pool_admits).
using slot_rule = std::function<bool(std::size_t others, bool holds)>;

/// A new cordon asked of the fleet-wide window (issue 22, sharded).
struct cordon_ask {
  std::string node;
  /// The asking replica's clock. A store with a clock of its own (PostgreSQL)
  /// decides, stamps and moves the window by that clock instead, so a
  /// replica whose clock is off neither drops the others' cordons from the
  /// window early nor has its own dropped late.
  wall_time now{};
  /// The breaker's window: cordons at or before max(now - window, reset_at)
  /// are out of it (cordon_window_start).
  std::chrono::nanoseconds window{};
  /// Trips at or before this were closed by a reset, and cordons at or
  /// before it are forgotten.
  wall_time reset_at{};
  /// Why `count` nodes cordoned within the window would pass a limit; none
  /// when they would not (control::cordon_limit_exceeded).
  std::function<std::optional<std::string>(std::size_t count)> over_limit;
};

/// What the ask found.
struct cordon_claim {
  bool granted = false;
  /// Refused because a replica's breaker had tripped (since the reset), or
  /// because this cordon tripped it now; `reason` is the trip's, `tripped_at`
  /// its time.
  bool tripped = false;
  bool trips_now = false;
  std::string reason;
  wall_time tripped_at{};
  /// Nodes counted in the window once the ask was decided.
  std::size_t counted = 0;
  /// When it was decided: the database's clock, or the ask's `now`.
  wall_time decided_at{};
};

/// Where the window of an ask decided at `now` starts: cordons at or before
/// it are not counted (the window's length back, or the last reset).
inline wall_time cordon_window_start(const cordon_ask& ask, wall_time now) {
  return std::max(now - ask.window, ask.reset_at);
}

/// What a reset of the fleet-wide window did: when, by the database's clock
/// (none: the store has no clock of its own; the replica's is used).
struct cordon_window_reset {
  std::optional<wall_time> at;
};

struct journal_snapshot {
  std::int64_t seq = 0; ///< the state includes every row up to and including seq
  wall_time taken_at{};
  std::string body;
};

/// The fleet's rebuild snapshot (issue 22): the rows of the journal up to
/// `position` (in commit order) that can still shape the fleet's state, in
/// the order a rebuild folds them; a rebuild folds them, then the tail after
/// `position`. Which rows those are is fleet_snapshot.hpp's rule; `horizons`
/// records the windows it assumed (JSON), so a snapshot taken with shorter
/// ones is not used.
struct fleet_snapshot {
  std::int64_t id = 0; ///< assigned by the store; 0: none
  wall_time taken_at{};
  journal_position position;
  std::string horizons;
  std::vector<std::int64_t> rows;
};

class journal_store {
public:
  virtual ~journal_store() = default;

  /// Connects (again) if needed and applies migrations up to
  /// journal_schema_version; refuses a schema newer than this binary knows.
  virtual status open() = 0;

  /// Appends a batch in one transaction: all rows are stored or none.
  /// Outcomes come back in the order of `batch`.
  virtual expected<std::vector<append_outcome>>
  append(const std::vector<journal_record>& batch) = 0;

  /// Rows in seq order matching `query`.
  virtual expected<std::vector<journal_record>> read(const journal_query& query) = 0;

  /// The rows after `after` in commit order, at most `limit`: several
  /// processes append to one PostgreSQL journal, and a seq taken early may
  /// commit after a later one, so a cursor on seq could pass a row before it
  /// is visible. The tail returns only rows of transactions older than the
  /// oldest one still running, ordered by transaction: a row that commits
  /// later always lands after the cursor. Reading on from `next` returns
  /// every row exactly once. From {} it starts at the beginning. `filter`
  /// leaves other shards' rows in the database (sharded, a replica's tail
  /// reads its own shards' rows and the fleet-wide ones); `next` moves past
  /// the rows it left out.
  virtual expected<journal_tail_page> tail(const journal_position& after,
                                           std::size_t limit,
                                           const tail_filter& filter = {}) = 0;

  /// Set before the first append: each row is stored with its shard
  /// (tail_filter). Without it rows have none and every tail reads them.
  virtual void set_tail_routing(tail_routing routing) { routing_ = std::move(routing); }

  /// Remediation slots across replicas (issue 22, sharded): one row per node
  /// holding a slot of its pool, kept in the journal's database so that the
  /// per-pool budget holds fleet-wide and survives a shard's handover. The
  /// pool's holders are read and the claim written under a lock per pool
  /// (PostgreSQL: a transaction-scoped advisory lock), so replicas claiming
  /// at once never pass the budget. A granted claim of a node holding a slot
  /// elsewhere moves it to `pool`.
  virtual expected<slot_claim> claim_slot(const std::string& pool,
                                          const std::string& node, wall_time now,
                                          const slot_rule& admits) = 0;
  /// Gives `node`'s slot back (none held: nothing to do).
  virtual status release_slot(const std::string& node) = 0;
  /// The nodes holding a slot, of every pool.
  virtual expected<std::vector<std::string>> slot_holders() = 0;

  /// The circuit breaker's cordon window across replicas (issue 22,
  /// sharded; seed 003 "Blast Radius Control"): the nodes newly cordoned
  /// fleet-wide and the trip, kept in the journal's database and decided
  /// under one fleet-wide lock, so the replicas' cordons together never pass
  /// the limits, a window's first cordon is the fleet's first (not each
  /// replica's), and a trip on one replica refuses the cordons every other
  /// one asks for from then on. A node counted in the window counts once;
  /// a cordon over a limit is refused and records the trip. Rows out of
  /// the window are dropped on the way.
  virtual expected<cordon_claim> claim_cordon(const cordon_ask& ask) = 0;
  /// An operator's reset of the breaker, sharded: under the same lock the
  /// fleet's trip is closed and its window forgotten, so no replica's next
  /// ask finds either, whatever its clock or its tail has read.
  virtual expected<cordon_window_reset> reset_cordon_window() = 0;

  /// Deletes old rows no snapshot needs (journal_prune), in one
  /// transaction per round.
  virtual expected<journal_pruned> prune(const journal_prune& round) = 0;

  /// Stores a fleet snapshot and drops all but the newest two.
  virtual status put_fleet_snapshot(const fleet_snapshot& snapshot) = 0;
  /// The newest fleet snapshot; id 0 when there is none.
  virtual expected<fleet_snapshot> latest_fleet_snapshot() = 0;

  virtual status put_snapshot(const journal_snapshot& snapshot) = 0;
  virtual expected<std::optional<journal_snapshot>> latest_snapshot() = 0;

  /// Highest seq stored, 0 when empty.
  virtual expected<std::int64_t> last_seq() = 0;

  /// Drops the connection; the next open() reconnects. Used after a failure.
  virtual void close() = 0;

  /// "postgresql://host:port/db" or "sqlite:PATH", without credentials.
  virtual std::string describe() const = 0;

protected:
  tail_routing routing_;
};

/// "sqlite:PATH" or "postgresql://…" (also "postgres://…"); a malformed URL
/// fails here, naming what is wrong. Nothing is connected until open().
expected<std::unique_ptr<journal_store>> make_journal_store(const std::string& url);

std::unique_ptr<journal_store> make_sqlite_journal_store(std::string path);

/// Of one prune round's scanned rows (seq order; their positions), the seqs
/// it deletes: those at or before the round's `through`, not kept. The one
/// copy of the rule, for both stores.
std::vector<std::int64_t> rows_to_prune(const journal_prune& round,
                                        const std::vector<journal_position>& scanned);

/// A fleet snapshot's row seqs as stored: "1,2,3".
std::string seq_list(const std::vector<std::int64_t>& seqs);
/// And back; a damaged list fails, naming where.
expected<std::vector<std::int64_t>> parse_seq_list(const std::string& text);

/// claim_cordon's decision, the same in both stores, from what the store read
/// under its lock: the newest trip after the reset (none: untripped), the
/// nodes counted in the window and whether `ask.node` is one of them.
/// `now` is when it is decided (the store's clock or the ask's).
cordon_claim decide_cordon(const cordon_ask& ask, wall_time now,
                           const std::optional<std::pair<wall_time, std::string>>& trip,
                           std::size_t counted, bool holds);
/// How long the journal's PostgreSQL session lets one statement run, wait for
/// a lock (the pool and breaker advisory locks among them) and sit idle inside
/// a transaction, applied to each setting that nobody else chose: left at
/// PostgreSQL's default by the URL's `options`, the role, the database and the
/// server's configuration. So a replica stuck in a transaction cannot hold the
/// fleet's breaker lock for ever, and a wait for a lock ends in an error the
/// writer retries instead of an unbounded block. Migrations run without them.
struct pq_session_limits {
  std::chrono::milliseconds statement_timeout{60'000};
  std::chrono::milliseconds lock_timeout{30'000};
  std::chrono::milliseconds idle_in_transaction_session_timeout{60'000};
};

expected<std::unique_ptr<journal_store>>
make_pq_journal_store(const std::string& url, pq_session_limits limits = {});

/// The libpq connection parameters vigil sets when nobody else did (a connect
/// timeout, TCP keepalives, a TCP user timeout: journal_store_pq.cpp says
/// why), as keyword and value, less each keyword in `set_elsewhere`. The
/// URL's own parameters win over these in any case.
std::vector<std::pair<std::string, std::string>>
pq_connection_defaults(const std::set<std::string>& set_elsewhere);

/// The libpq keywords the environment sets for every connection (its PG*
/// variables, PGCONNECT_TIMEOUT among them, and a service file named by
/// PGSERVICE), as libpq's PQconndefaults reports them, less the values
/// compiled into libpq. vigil's defaults leave these alone: libpq reads the
/// environment only for what the program did not pass. (A URL naming a
/// service of its own with PGSERVICE also set: this reports PGSERVICE's.)
std::set<std::string> pq_keywords_set_by_environment();

} // namespace vigil
