// The nic_port actor: one per NIC port ("mlx5_3/1") of a node, spawned by the
// node actor when the first event names the port, and linked to it
// (ARCHITECTURE.md §3). It owns the port's state and link_downed history: the
// flap rule (seed 002 §6.3) answers each event, which the node actor awaits;
// the drop rule (§6.2) runs on the port's own timer while the port is DOWN,
// and a drop is sent to the node as a derived event; an event that comes
// after the drop's deadline finds it due and answers it first.
#pragma once

#include <memory>
#include <string>

#include <caf/actor_addr.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/replies_to.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_actor.hpp>

#include "actors/control/node/correlation_messages.hpp"
#include "actors/control/rules/correlation_rules.hpp"
#include "actors/supervisor/message_stats.hpp"
#include "runtime/clock.hpp"

namespace vigil {

struct nic_port_state {
  std::string node_name;
  std::string port; ///< "device/port"
  control::nic_port_history history;
  std::shared_ptr<const clock> time;
  caf::actor_addr parent;          ///< the node actor (weak: the node holds this actor)
  control::nic_port_report report; ///< what the agent last said of the port
  bool drop_check_armed = false;
  static inline const char* name = "nic_port";
};

using nic_port_actor =
  caf::stateful_actor<nic_port_state, observed<caf::event_based_actor>>;

/// The node actor as its NIC ports see it: told when a port is found dropped.
using nic_port_owner = caf::typed_actor<caf::reacts_to<nicdrop_atom, health_event>>;

/// (correlate_atom, health_event, event time in ns, live) →
/// control::correlation_outcome, with a drop that fell due before the event;
/// (fabric_atom): a fabric incident explains the port's DOWN (no drop verdict);
/// (replay_atom) → vector<health_event>: the node's replay is over (replayed
/// events arm no timer): the drop due by now, and the timer armed;
/// (nicdrop_atom): its own timer. Sends (nicdrop_atom, health_event) to the
/// node actor when the timer finds the port dropped. (summary_atom) → JSON: the
/// port's state, role and link_downed history, and its figures.
caf::behavior nic_port(nic_port_actor* self, std::string node_name, std::string port,
                       control::correlation_config config, caf::actor_addr parent,
                       std::shared_ptr<const clock> time);

} // namespace vigil
