// The node actor's side of its remediations: it feeds the node's
// remediation_machine (seed 000 §4) and carries out the commands the machine
// gives, against the journal, the breaker and the API server. Internal to the
// node actor: every function runs in its behaviour, so the node's mailbox
// serialises them (the node actor is the lock).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "actors/control/node/node_actor.hpp"

namespace vigil::node_remediation_steps {

/// The machine's configuration from the node's settings.
control::remediation_config config_of(const node_settings& settings);

/// The node as the machine reads it: records, quarantine, drains, labels.
control::remediation_view view_of(const node_state& st);

/// The node's state changed: the machine plans, starts or releases.
void consider(node_actor* self);

/// One of the machine's timers (remediation_start_atom, remediation_poll_atom,
/// remediation_verify_atom) fired.
void on_timer(node_actor* self, control::remediation_timer timer);

/// A routed healthy event: verifies the reset of each GPU it names.
void on_healthy_event(node_actor* self, const health_event& event);

/// The remediation part of the node's summary.
nlohmann::json summary(const node_state& st);

} // namespace vigil::node_remediation_steps
