// The fleet as the journal tells it: for each node, the unhealthy events that
// are still active. This is the state the control plane rebuilds at startup
// (latest snapshot + the rows after it) and what `vigil replay --at` prints.
// Matching is the control plane's (healthy_event_clears, seed 000 §2.2): a
// healthy event clears the entities it names for the same agent and check,
// or every entity of that check when it names none; one naming error codes
// clears only the records of those codes. One record per entity and code.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "messages/health_event.hpp"
#include "runtime/journal/journal_store.hpp"

namespace vigil {

struct active_event {
  std::string agent;
  std::string check_name;
  entity subject; ///< one entity; an event naming none is tracked as {"", ""}
  std::string error_code;
  std::string message;
  recommended_action action = recommended_action::none;
  std::int64_t seq = 0; ///< the journal row that raised it
};

class fleet_view {
public:
  /// Applies one journal row. Rows of kind "event" carry a HealthEvent; a body
  /// that no longer decodes is an error (the caller reports its seq and goes on).
  status apply(const journal_record& row);

  /// Active unhealthy events of one node (empty when healthy or unknown).
  std::vector<active_event> active(const std::string& node) const;
  std::vector<std::string> nodes() const;
  std::int64_t last_seq() const { return last_seq_; }

  /// JSON for the snapshots table, and back.
  std::string save() const;
  static expected<fleet_view> load(const std::string& json);

  friend bool operator==(const fleet_view& a, const fleet_view& b) {
    return a.save() == b.save();
  }

private:
  void apply_event(const health_event& event, std::int64_t seq);

  // node → key "agent|check|entityType|entityValue" → event
  std::map<std::string, std::map<std::string, active_event>> nodes_;
  std::int64_t last_seq_ = 0;
};

struct undecodable_row {
  std::int64_t seq;
  std::string problem;
};

struct rebuild_result {
  fleet_view view;
  std::int64_t snapshot_seq = 0; ///< 0 when no snapshot was used
  std::uint64_t rows_applied = 0;
  std::vector<undecodable_row> undecodable; ///< reported, never skipped silently
};

/// State = latest snapshot (taken at or before `at`) + every row after it,
/// up to `at` when given. The control plane calls this at startup.
expected<rebuild_result> rebuild_fleet_view(journal_store& store,
                                            std::optional<wall_time> at = std::nullopt,
                                            bool use_snapshot = true);

/// One line a person can read about a row: what its event says, or its body.
std::string summarise_row(const journal_record& row, std::string& problem);

} // namespace vigil
