// What the chaos run checks, and where it looks: the API server (watched by
// polling its store, as an auditor beside the cluster would) and the journal.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "runtime/journal/journal_store.hpp"
#include "runtime/sim/kube/kube_object_store.hpp"

namespace vigil::chaos {

/// A maintenance CR (GPUReset, RebootNode, TerminateNode) as the auditor saw it.
struct cr_sighting {
  std::string kind;
  std::string node;
  std::string group;     ///< vigil.dev/equivalence-group
  double first_seen = 0; ///< seconds into the run
  double finished = -1;  ///< when its status.phase was first terminal; -1: never
};

/// Reads the store every poll and remembers transitions: each node's cordons
/// (spec.unschedulable false → true), each CR's first sighting and end, and
/// each uncordon (true → false) seen while one of the node's CRs had not
/// ended (seed 002: the node stays out of service until its repair is over).
class api_auditor {
public:
  void poll(const kube::object_store& store, double now);

  const std::map<std::string, cr_sighting>& crs() const { return crs_; }
  /// Node → times it went from schedulable to cordoned.
  const std::map<std::string, int>& cordons() const { return cordons_; }
  /// Node → cordoned at the last poll.
  const std::map<std::string, bool>& cordoned() const { return cordoned_; }
  /// Node → the CRs (kind/name) unfinished when it was seen uncordoned.
  const std::map<std::string, std::vector<std::string>>& uncordoned_during_cr() const {
    return uncordoned_during_cr_;
  }

private:
  std::map<std::string, cr_sighting> crs_; ///< by kind/name
  std::map<std::string, int> cordons_;
  std::map<std::string, std::vector<std::string>> uncordoned_during_cr_;
  std::map<std::string, bool> cordoned_;
};

/// The limits the breaker was configured with (vigil.yaml's breaker:).
struct breaker_limits {
  unsigned max_nodes = 20;
  unsigned window_seconds = 300;
};

/// The promises, counted: each is 0 in a correct run.
struct chaos_verdict {
  std::uint64_t acknowledged = 0;  ///< events the control plane acknowledged
  std::uint64_t lost = 0;          ///< acknowledged, not in the journal
  std::uint64_t duplicate_crs = 0; ///< a CR for a group whose previous one was unfinished
  std::uint64_t duplicate_cordons = 0; ///< cordons beyond the journaled decisions
  std::uint64_t stuck_crs = 0;         ///< CRs unfinished at the end
  std::uint64_t stuck_nodes = 0;       ///< cordoned at the end, not waiting for a person
  std::uint64_t breaker_excess = 0; ///< quarantines admitted beyond the limit in a window
  std::uint64_t uncordoned_during_cr = 0; ///< uncordons while the node's CR ran
  std::uint64_t journal_rows = 0;
  std::vector<std::string> findings; ///< one line per count above, naming what
  /// Node → its final state, compared between the clean and the chaos run.
  std::map<std::string, std::string> final_state;
  /// Node → its CRs counted by kind: history, not state (a fault that
  /// arrives while a repair covering it runs adds none), so a difference
  /// is reported, not failed.
  std::map<std::string, std::string> cr_counts;
};

/// What a node's CRs repaired, as its final state names it: the strongest
/// node-level repair ("rebootnodes", "terminatenodes"), which covers every
/// GPU reset; else the GPUs reset (their equivalence groups), however many
/// times. Two runs that repaired the same things read the same, whether
/// faults arrived one by one or together after an outage.
std::string repaired(const std::vector<cr_sighting>& crs);

/// Reads the whole journal and the auditor's record and counts.
chaos_verdict judge(const std::vector<journal_record>& journal,
                    const std::set<std::string>& acknowledged, const api_auditor& audit,
                    const breaker_limits& breaker);

/// Nodes whose final state differs between two runs of one trace.
std::uint64_t diverged(const chaos_verdict& clean, const chaos_verdict& chaos,
                       std::vector<std::string>* which = nullptr);

/// Nodes whose CR counts differ between two runs (cr_counts).
std::uint64_t cr_counts_differ(const chaos_verdict& clean, const chaos_verdict& chaos,
                               std::vector<std::string>* which = nullptr);

} // namespace vigil::chaos
