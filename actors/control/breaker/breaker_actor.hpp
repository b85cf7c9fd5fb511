// The breaker actor: the fleet's one circuit breaker (seed 003 "Blast Radius
// Control"). Node actors ask it before a new cordon; a trip is journaled
// before it is reported, survives restarts (the fleet replays the breaker
// rows into it at startup) and is closed only by an explicit reset.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/replies_to.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "actors/control/rules/circuit_breaker.hpp"
#include "actors/journal/journal_messages.hpp"
#include "actors/protocol/control_messages.hpp"
#include "actors/supervisor/message_stats.hpp"
#include "runtime/clock.hpp"
#include "runtime/journal/journal_store.hpp"

namespace vigil {

/// Journal row kinds of the breaker (fleet-wide rows: node "").
namespace breaker_row {
constexpr const char* tripped = "breaker_tripped";
constexpr const char* reset = "breaker_reset";
} // namespace breaker_row

struct breaker_stats {
  std::uint64_t admitted = 0;
  std::uint64_t refused = 0;
  std::uint64_t trips = 0;
};

/// The breaker's protocol, which the compiler checks at every send:
/// (admit_atom, node) → "" or why not (answered once the GPU-node count is
/// known when the percentage limit applies); (permit_atom, node) → "" or why not
/// (drains: refused while tripped); (remedy_atom, node, pool) → "" or why
/// not (tripped, or the pool's budget in flight), counted until (remedied_atom,
/// node) or until the asking actor goes down (with in_journal, until
/// remedied only: the slot stays with the node through a handover);
/// (occupy_atom, node, pool): a slot, whatever the budget; (slot_free_atom,
/// node) to itself: a failed release tried again; (reset_atom) → "reset", once
/// journaled; (gpunodes_atom, count); sharded, (gpunodes_atom, owned, fleet):
/// the GPU nodes of the shards this replica owns and of the whole fleet;
/// (replay_atom, breaker rows: the rebuild's, and sharded, every replica's
/// trips, resets and cordons from the journal's tail);
/// (summary_atom) → JSON.
using breaker_handle = caf::typed_actor<
  caf::replies_to<admit_atom, std::string>::with<std::string>,
  caf::replies_to<permit_atom, std::string>::with<std::string>,
  caf::replies_to<remedy_atom, std::string, std::string>::with<std::string>,
  caf::reacts_to<remedied_atom, std::string>,
  caf::reacts_to<occupy_atom, std::string, std::string>,
  caf::reacts_to<slot_free_atom, std::string>,
  caf::replies_to<reset_atom>::with<std::string>,
  caf::reacts_to<gpunodes_atom, std::uint64_t>,
  caf::reacts_to<gpunodes_atom, std::uint64_t, std::uint64_t>,
  caf::reacts_to<replay_atom, std::vector<journal_record>>,
  caf::replies_to<summary_atom>::with<std::string>>;

struct breaker_state {
  control::circuit_breaker breaker;
  journal_handle journal;
  std::shared_ptr<const clock> time;
  std::size_t gpu_nodes = 0;
  /// Sharded: the fleet's GPU nodes, the denominator of the cordon window
  /// decided in the journal's database; unsharded the same as gpu_nodes.
  std::size_t fleet_gpu_nodes = 0;
  /// Sharded: the fleet's cordons in the window at the last one decided
  /// (for the summary).
  std::size_t fleet_cordons = 0;
  /// The last reset known (this replica's, or another's read from the
  /// journal): trips and cordons before it no longer count.
  wall_time reset_at{};
  /// The fleet has listed the Nodes once: until then the percentage limit
  /// has no denominator, and the cordons asked for wait, unanswered, for the
  /// count.
  bool gpu_nodes_known = false;
  std::vector<std::pair<std::string, caf::typed_response_promise<std::string>>>
    waiting_admits;
  /// The node actor holding each node's remediation slot, monitored: a slot
  /// whose holder goes down (crash, lost leadership) is given back, so the
  /// pool's budget never leaks. Not with in_journal: there the node's
  /// next owner carries on with its slot, and gives it back when done.
  std::map<std::string, caf::actor_addr> slot_holders;
  /// Keys of the trip and reset rows this breaker journaled: sharded, the
  /// journal's tail brings them back (it brings every replica's), and what
  /// was applied live must not be applied again (a reset replayed later
  /// would forget the cordons counted since).
  std::set<std::string> own_rows;
  /// in_journal: nodes whose slot is being given back. A failed
  /// release is tried again only while the node is still here: a claim
  /// granted meanwhile (a new remediation) takes it out.
  std::set<std::string> releasing;
  breaker_stats stats;
  static inline const char* name = "breaker";
};

using breaker_actor = caf::stateful_actor<breaker_state, observed<breaker_handle::base>>;

breaker_handle::behavior_type breaker(breaker_actor* self, control::breaker_config config,
                                      journal_handle journal,
                                      std::shared_ptr<const clock> time);

/// The breaker's state after the journal's breaker rows, oldest first: the
/// last row wins (a trip after a reset re-opens it); the quarantine rows the
/// fleet passes (those that started a quarantine) count in the window as
/// they did live.
void restore_breaker(control::circuit_breaker& breaker,
                     const std::vector<journal_record>& rows);

} // namespace vigil
