// The fleet's rebuild snapshot (issue 22, ARCHITECTURE.md §5): which journal
// rows still shape the fleet's state. A restart folds a snapshot's rows and
// then the tail after its position, instead of every row ever written.
//
// A snapshot is a subset of the journal's own rows, so a rebuild from it
// runs the same code as a full one. Per node, the rows since its last point
// of rest: no active record (tracking every record any quarantine policy
// could, seed 000 §2.2), no NIC port down waiting for the drop rule, no
// fabric port down, no CR without an outcome, and every earlier event past
// the longest window a rule could look back at it from (seed 002 §6:
// dedup, repeated XIDs, NIC flap/drop, fabric incidents). Remediation
// attempts within the remediation window or still open; the breaker's state
// and the cordons within its window. The node model here is the production
// correlator and active set; the equivalence with a full replay is tested
// through the fleet itself (fleet_snapshot_test).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/control/rules/correlation_rules.hpp"
#include "actors/control/rules/quarantine_rules.hpp"
#include "actors/protocol/control_messages.hpp"
#include "messages/health_event.hpp"
#include "runtime/journal/journal_store.hpp"

namespace vigil {

/// What one journal row is to a rebuild. fold_rows() folds it; the snapshot
/// builder decides from it how long it matters: one reading of each kind.
struct folded_row {
  enum class kind {
    ignored,
    breaker_state,  ///< a trip or a reset
    breaker_cordon, ///< a quarantine the breaker counted
    drain_mark,     ///< a completed drain (succeeded, skipped, dry run)
    fabric_mark,    ///< a fabric incident over `fabric_nodes`
    attempt,        ///< a CR created (or handed to a provider)
    outcome,        ///< a CR's end (succeeded, failed, released) or its validation's
    validation,     ///< a succeeded CR's validation Job began: open again
    event,          ///< a HealthEvent
    undecodable     ///< an event row that no longer decodes
  };
  kind what = kind::ignored;
  std::string drain_key;
  std::vector<std::string> fabric_nodes;
  remediation_attempt attempt;
  std::string cr; ///< the CR an outcome closes or a validation reopens
  /// The outcome is a validation's verdict (validated, validation_failed):
  /// it closes the node's validating attempt (rows before the verdict named
  /// the CR only in "validating").
  bool ends_validation = false;
  std::optional<health_event> event;
};
folded_row classify_row(const journal_record& row);

/// Sharded (issue 22): whether every replica's tail reads the row, whoever
/// owns its node: every row but a health event (the breaker's cordons and
/// trips among them), and the NIC ports' events (the fabric window is
/// fleet-wide). Any other event only its shard's owner reads.
bool read_by_every_replica(const journal_record& row);
/// The writer's journal_store::set_tail_routing for `shards` shards: a row
/// only its owner reads is stored with its node's shard.
tail_routing fleet_tail_routing(std::uint32_t shards);

/// What an outcome or validation row does to a node's attempts, oldest
/// first (the rebuild's remediation_attempt and the snapshot builder's rows
/// alike): an outcome closes the attempt of its CR (a validation's verdict,
/// the attempt being validated); a validation reopens its CR's attempt as
/// validating. Returns the CR concerned; "" when none matched.
template <class Attempt>
std::string apply_to_attempts(const folded_row& row, std::vector<Attempt>& attempts) {
  std::string concerned;
  for (auto& attempt : attempts) {
    const bool named = !row.cr.empty() && attempt.cr == row.cr;
    if (row.what == folded_row::kind::validation && named) {
      attempt.open = attempt.validating = true;
    } else if (row.what == folded_row::kind::outcome
               && (named || (row.ends_validation && attempt.validating))) {
      attempt.open = attempt.validating = false;
    } else {
      continue;
    }
    concerned = attempt.cr;
  }
  return concerned;
}

/// How far back rows can matter: the longest window of each rule, plus
/// `late` for events whose own time lags their arrival (an agent's spool).
/// Each snapshot records the horizons it pruned with; one pruned with
/// shorter windows than the running configuration's is not used.
struct snapshot_horizons {
  std::chrono::seconds dedup{};       ///< every event: its repeats
  std::chrono::seconds gpu{};         ///< a fatal XID: bursts and stickiness
  std::chrono::seconds nic{};         ///< a NIC link event: flap, drop, fabric
  std::chrono::seconds remediation{}; ///< an attempt: the repeat rule
  std::chrono::seconds breaker{};     ///< a counted cordon: the breaker's window
  std::chrono::seconds late = std::chrono::hours(1);
  /// The flap rule's threshold: a lower one derives more NICPortFlapping
  /// records (which hold a node), so the running one must not be lower.
  std::size_t flap_threshold = 0;

  std::string to_json() const;
  /// nullopt when `text` is not a horizons object.
  static std::optional<snapshot_horizons> from_json(const std::string& text);
  /// Each horizon at least as long as `needed`'s.
  bool covers(const snapshot_horizons& needed) const;
};
snapshot_horizons horizons_of(const control::correlation_config& correlation,
                              std::chrono::seconds breaker_window);

/// How long after it an event can change what the rules make of later ones.
std::chrono::seconds influence_of(const health_event& event,
                                  const snapshot_horizons& horizons);

/// Folds rows in journal order and keeps those that still matter.
class snapshot_builder {
public:
  /// The rules' configuration, the breaker's window, and the quarantine
  /// policy's alias entity types (a healthy event naming a GPU clears the
  /// PCI address reported with it).
  snapshot_builder(control::correlation_config correlation,
                   std::chrono::seconds breaker_window,
                   std::vector<std::string> alias_entity_types = {});

  /// The next row in journal order: a snapshot's rows first, then the tail.
  void add(const journal_record& row);
  /// The rows that still matter at `now`, in the order they were added;
  /// what no longer matters is forgotten.
  std::vector<std::int64_t> keep(wall_time now);

  const snapshot_horizons& horizons() const { return horizons_; }
  std::size_t nodes() const { return nodes_.size(); }
  std::uint64_t undecodable() const { return undecodable_; }

private:
  using row_ref = std::pair<std::uint64_t, std::int64_t>; ///< (order added, seq)
  struct attempt_row {
    row_ref row;
    wall_time at{};
    std::string cr;
    bool open = false;
    bool validating = false;
  };
  /// One node since its last point of rest: the production rules' state
  /// (tracking every record), its rows, and until when they matter.
  struct node_history {
    explicit node_history(const control::correlation_config& c) : correlator(c) {}
    control::node_correlator correlator;
    control::active_events active;
    control::fabric_ports fabric;
    std::vector<row_ref> rows; ///< events, drain and fabric marks
    wall_time until_event{};   ///< in event time (the correlator's clock)
    wall_time until_recorded{};
    std::vector<attempt_row> attempts;
    std::vector<std::pair<row_ref, std::string>> outcomes; ///< and their CRs
  };

  node_history& node(const std::string& name);
  bool at_rest(const node_history& h, wall_time event_time, wall_time recorded) const;
  void rest(node_history& h);
  void add_event(node_history& h, row_ref ref, const journal_record& row,
                 const health_event& event);

  control::correlation_config correlation_;
  snapshot_horizons horizons_;
  control::quarantine_policy policy_; ///< only its alias entity types
  std::map<std::string, node_history> nodes_;
  std::vector<row_ref> breaker_states_;
  std::vector<std::pair<row_ref, wall_time>> breaker_cordons_;
  std::uint64_t added_ = 0;
  std::uint64_t undecodable_ = 0;
};

/// Journal retention (journal.retention_days), once `newest` is stored:
/// deletes the rows recorded before `before` that no stored snapshot needs:
/// up to the oldest kept snapshot's position (`previous`, the one stored
/// before `newest`, which a rebuild begun earlier may still be reading),
/// and named by neither. They no longer shape any node's state (a rebuild
/// reads a snapshot's rows and the rows after its position); what goes is
/// history for people (the console, `vigil replay`). At most `max_scanned`
/// rows are looked at per call (one transaction per 10,000), from
/// `after_seq` on; it is left where the next call goes on (0 once the
/// journal was scanned to its end). Returns the rows deleted.
expected<std::uint64_t> prune_journal(journal_store& store, const fleet_snapshot& newest,
                                      const fleet_snapshot* previous, wall_time before,
                                      std::size_t max_scanned, std::int64_t& after_seq);

/// The longest a row can shape what the rules make of later ones (the
/// longest horizon, plus `late`): retention shorter than this would let a
/// rebuild that reads the whole journal (windows changed) miss rows.
std::chrono::seconds longest_horizon(const snapshot_horizons& horizons);

/// Takes the fleet's snapshots over a journal store of its own: the newest
/// stored snapshot's rows the first time, then each time the rows the tail
/// brought since the last one.
class snapshot_taker {
public:
  explicit snapshot_taker(snapshot_builder builder)
    : fresh_(builder), builder_(std::move(builder)) {}

  /// Reads on to where the tail stands and stores a snapshot there.
  expected<fleet_snapshot> take(journal_store& store, wall_time now);
  /// The snapshot stored before the last one taken (this taker's, or the
  /// one it resumed from); null when there is none. The store keeps both.
  const fleet_snapshot* previous() const { return previous_ ? &*previous_ : nullptr; }
  const journal_position& position() const { return at_; }

private:
  expected<journal_position> resume(journal_store& store);

  snapshot_builder fresh_; ///< to start over after a failed first read
  snapshot_builder builder_;
  journal_position at_;
  bool resumed_ = false;
  std::optional<fleet_snapshot> previous_; ///< the second newest stored
  std::optional<fleet_snapshot> last_;     ///< the newest stored
};

} // namespace vigil
