// The journal schema, one list of migrations for both stores. The dialects
// differ only in the sequence column and the body type (jsonb vs TEXT).
#pragma once

#include <string>
#include <vector>

namespace vigil {

enum class sql_dialect { postgresql, sqlite };

/// Statements that bring the schema from version - 1 to `version` (1-based).
inline std::vector<std::string> journal_migration(sql_dialect d, int version) {
  const bool pg = d == sql_dialect::postgresql;
  switch (version) {
    case 1:
      return {
        std::string("CREATE TABLE journal (")
          + (pg ? "seq bigserial PRIMARY KEY" : "seq INTEGER PRIMARY KEY AUTOINCREMENT")
          + ", recorded_at_ns bigint NOT NULL, node text NOT NULL, kind text NOT NULL,"
            " idempotency_key text NOT NULL UNIQUE, body "
          + (pg ? "jsonb" : "text") + " NOT NULL)",
        "CREATE INDEX journal_node_seq ON journal (node, seq)",
        "CREATE INDEX journal_recorded_at ON journal (recorded_at_ns)",
        std::string("CREATE TABLE journal_snapshots (seq bigint PRIMARY KEY,"
                    " taken_at_ns bigint NOT NULL, body ")
          + (pg ? "jsonb" : "text") + " NOT NULL)",
      };
    case 2:
      // The writing transaction of each row, for the tail's commit order
      // (journal_store::tail). Rows from before count as transaction 0: the
      // constant default fills them without rewriting the table; new rows get
      // their own transaction's id.
      if (!pg)
        return {"ALTER TABLE journal ADD COLUMN txid INTEGER NOT NULL DEFAULT 0"};
      return {
        "ALTER TABLE journal ADD COLUMN txid bigint NOT NULL DEFAULT 0",
        "ALTER TABLE journal ALTER COLUMN txid SET DEFAULT "
        "(pg_current_xact_id()::text::bigint)",
        "CREATE INDEX journal_txid_seq ON journal (txid, seq)",
      };
    case 3:
      // Remediation slots held fleet-wide (journal_store::claim_slot).
      return {
        "CREATE TABLE remediation_slots (node text PRIMARY KEY, pool text NOT NULL,"
        " claimed_at_ns bigint NOT NULL)",
        "CREATE INDEX remediation_slots_pool ON remediation_slots (pool)",
      };
    case 4:
      // The fleet's rebuild snapshots (journal_store::put_fleet_snapshot):
      // a position and the seqs of the rows that still matter, as a JSON
      // array.
      return {
        std::string("CREATE TABLE fleet_snapshots (")
          + (pg ? "id bigserial PRIMARY KEY" : "id INTEGER PRIMARY KEY AUTOINCREMENT")
          + ", taken_at_ns bigint NOT NULL, txid bigint NOT NULL, seq bigint NOT NULL,"
            " horizons text NOT NULL, row_seqs text NOT NULL)",
      };
    case 5:
      // The breaker's cordon window and trip, fleet-wide (issue 22,
      // journal_store::claim_cordon).
      return {
        "CREATE TABLE breaker_cordons (node text PRIMARY KEY,"
        " cordoned_at_ns bigint NOT NULL)",
        "CREATE TABLE breaker_trips (tripped_at_ns bigint NOT NULL, reason text NOT "
        "NULL)",
      };
    case 6:
      // Each row's shard and the shard count it was taken under (issue 22,
      // journal_store::tail_routing): a sharded replica's tail leaves the
      // other shards' rows in the database. NULL: every replica reads it
      // (fleet-wide rows, and every row written before this version).
      return {
        "ALTER TABLE journal ADD COLUMN shard integer",
        "ALTER TABLE journal ADD COLUMN shard_count integer",
      };
    default: return {};
  }
}

/// The message when the database is ahead of this binary.
inline std::string newer_schema_message(int found, int known) {
  return "the journal schema is version " + std::to_string(found)
         + ", newer than this binary knows (" + std::to_string(known)
         + "); run a vigil release that knows it";
}

} // namespace vigil
