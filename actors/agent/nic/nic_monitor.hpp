// The nic_monitor actor (seed 002): polls sysfs every state-polling-interval
// through nic_poller, forwards the events, and persists the state file after
// each poll. Reading sysfs blocks, so spawn it detached.
#pragma once

#include <caf/actor.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/agent/agent_figures.hpp"
#include "actors/agent/nic/nic_monitor_core.hpp"
#include "actors/protocol/agent_messages.hpp"
#include "runtime/clock.hpp"

namespace vigil {

struct nic_monitor_state {
  std::optional<agent::nic_poller> poller;
  std::optional<agent::nic_sysfs_reader> reader; ///< sysfs, poll after poll
  caf::actor forwarder;
  std::set<std::string> reported; ///< diagnostics already logged
  agent::monitor_figures figures; ///< polls, events handed to the forwarder
  static inline const char* name = "nic_monitor";
};

using nic_monitor_actor = caf::stateful_actor<nic_monitor_state>;

/// `poller` is started (metadata validated: a failure there stops startup
/// before this actor exists). `wall` gives the events' timestamps. Answers
/// (figures_atom) with agent::monitor_figures.
caf::behavior nic_monitor(nic_monitor_actor* self, agent::nic_poller poller,
                          caf::actor forwarder, std::shared_ptr<const clock> wall);

} // namespace vigil
