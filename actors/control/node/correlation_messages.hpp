// Messages between a node actor and its gpu and nic_port actors. Local only.
#pragma once

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>

#include "actors/control/rules/correlation_rules.hpp"
#include "actors/protocol/control_messages.hpp"

namespace vigil {

/// (correlate_atom, health_event, event time in ns since the epoch, live)
/// from a node actor to the gpu or nic_port actor the event concerns →
/// control::correlation_outcome: what that entity's rules make of it. `live`
/// is false for a restart's replay of the journal: no timer runs on replayed
/// history until the node says the replay is over (replay_atom to a nic_port).
using correlate_atom = caf::atom_constant<caf::atom("correlate")>;

} // namespace vigil

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(vigil::control::correlation_outcome)
