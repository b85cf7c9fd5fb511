// What the node actor's parts share: node_actor.cpp (behaviour and wiring),
// node_quarantine.cpp (the quarantine reconcile), node_drain.cpp (the drain)
// and node_correlation.cpp (gpu and nic_port actors, the active set). Internal
// to the node actor: every function runs in its behaviour, so the node's
// mailbox serialises them (ARCHITECTURE.md §2 "the node actor is the lock").
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "actors/control/node/node_actor.hpp"

namespace spdlog {
class logger;
} // namespace spdlog

namespace vigil::node_detail {

/// The "node" component logger.
std::shared_ptr<spdlog::logger> logger();

// node_quarantine.cpp

/// Level-based: compares the quarantine the active events want with the
/// observed Node and converges it; a trigger while busy marks it to run again.
void reconcile(node_actor* self);

/// A failed request: try again after a doubling delay, never in a tight loop.
void retry_later(node_actor* self, const std::string& what);

/// Reads a Node (from the watch) into the observation.
bool take_node(node_actor* self, const nlohmann::json& node);
/// The same from a GET or PATCH response's body.
bool take_node_body(node_actor* self, const std::string& body);

// node_condition_watch.cpp

/// Raises or clears the events the Node's own conditions call for (NotReady
/// past control.not_ready_after, node-problem-detector's problems), journaled
/// first, then routed to this actor like any event; arms the NotReady timer.
void check_conditions(node_actor* self);

// node_drain.cpp

/// After the quarantine converged: the drain, then (once drained) the
/// remediations (seed 000 §3, §4).
void consider_drain(node_actor* self);

/// The drain actor ended with `outcome` ("succeeded", "cancelled", ...).
void on_drained(node_actor* self, const std::string& key, const std::string& outcome,
                std::uint64_t evictions);

/// seed 000 §3.1: what this quarantine has drained; a full drain covers all.
void note_drained(node_state& st, const std::string& key);

/// A released quarantine starts the next one with nothing drained.
void forget_drains(node_state& st);

// node_correlation.cpp

/// Counts, logs and journals a correlation rule's firing; its Event follows
/// once journaled.
void journal_firing(node_actor* self, const std::string& rule, const health_event& event,
                    const std::string& message);

using correlated_handler = std::function<void(std::vector<health_event>)>;

/// seed 002 §6: the correlation rules may escalate the event's action and
/// derive events of their own. A repeat, or an event no GPU or port history
/// concerns, comes back at once; otherwise nullopt, and `then` gets the events
/// when the entity's actor has answered. A replayed event's answer is awaited
/// (nothing else runs first); a live one's is not, and the caller keeps the
/// events that follow it waiting (node_state::correlating).
std::optional<std::vector<health_event>> correlate(node_actor* self,
                                                   const health_event& event, bool live,
                                                   correlated_handler then);

/// Applies events to the active set; true when it changed.
bool apply_events(node_actor* self, const std::vector<health_event>& events);

/// A fabric incident covers this node's NIC port-downs: drop their records,
/// and let the drop rule know the fabric explains them.
std::size_t drop_port_downs(node_actor* self);

} // namespace vigil::node_detail
