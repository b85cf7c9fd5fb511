// What the fleet actor's parts share: fleet_actor.cpp (behaviour, Node
// watch, agent liveness, leadership), fleet_routing.cpp (events to node
// actors, the fabric rule and hold) and fleet_rebuild.cpp (node state from
// the journal). Internal to the fleet actor: every function runs in its
// behaviour.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>

#include "actors/control/fleet/fleet_actor.hpp"

namespace spdlog {
class logger;
} // namespace spdlog

namespace vigil {

/// A rebuild's journal read to try again (the journal was unavailable).
struct pending_read {
  std::function<void()> again;
};

} // namespace vigil

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(vigil::pending_read)

namespace vigil::fleet_detail {

/// The "fleet" component logger.
std::shared_ptr<spdlog::logger> logger();

// fleet_actor.cpp

/// The node's journaled history is being read (a rebuild of its shard or of
/// the whole fleet, or its actor's restart): its actor must wait for it.
bool history_pending(const fleet_state& st, const std::string& node);

/// Starts and monitors the node actor of `name`.
node_handle spawn_node(fleet_actor* self, const std::string& name);

/// The node actor of `name`, started if there is none.
node_handle node_for(fleet_actor* self, const std::string& name);

/// The agent spoke: a node flagged silent is told it reports again.
void agent_heard(fleet_actor* self, const std::string& node);

/// Stops the node actors of the nodes `which` names (leadership or shards
/// lost), with what the fleet held for them.
void stop_nodes(fleet_actor* self, const std::function<bool(const std::string&)>& which);

// fleet_routing.cpp

/// An event for its node actor, through the fabric rule and hold. `arrived`:
/// when it was journaled (the fabric window's time, the same on every replica).
void route(fleet_actor* self, health_event event, std::int64_t seq, wall_time arrived);

/// A NIC port-down counts in the fabric window; an incident it opens or
/// grows is journaled and told to its nodes. Sharded, those of nodes other
/// replicas own count too (issue 22: fabric incidents are fleet-wide): every
/// replica reads the same rows in the same order, with the same times, so
/// each finds the same incidents.
void count_port_down(fleet_actor* self, const health_event& event, wall_time arrived);

/// To the node actor now, or after the journal replay it waits for.
void deliver(fleet_actor* self, health_event event, std::int64_t seq);

/// Inside a fabric incident a link-down report (a port down, or the
/// link_downed rise that comes with it) is kept and correlated, never acted on.
void mark_if_fabric(fleet_actor* self, health_event& event);

/// The hold of some of `node`'s events is over: deliver them in order (an
/// incident formed meanwhile claims them), and wait for the next one.
void release_held(fleet_actor* self, const std::string& node);

// fleet_rebuild.cpp

/// Reads `query` page by page, folding rows into `batch`, then calls `done`.
void read_all(fleet_actor* self, journal_query query,
              std::shared_ptr<rebuild_batch> batch, std::function<void()> done);

/// Startup: fold the whole journal, hand each node this replica owns its
/// events and the breaker its rows, then release what was routed meanwhile.
void rebuild_fleet(fleet_actor* self, std::int64_t after_seq,
                   std::shared_ptr<rebuild_batch> batch);

/// Shards gained while already acting on others (pending_gain): their nodes
/// rebuilt from the journal, their routes held meanwhile.
void rebuild_gained(fleet_actor* self);

/// Sharded: reads the journal's tail once from tail_at and routes the
/// events of the nodes this replica owns; reads again at once while pages
/// come full, else after fleet_tail_interval.
void follow_tail(fleet_actor* self);

/// A crashed node actor comes back with its events replayed from the journal.
void restart_node(fleet_actor* self, const std::string& name);

} // namespace vigil::fleet_detail
