// The node actor's remediation steps (seed 000 §4, issue #8 items 2, 3 and 5):
// from a quarantined, drained node's active events to maintenance CRs, one at
// a time through the node's remediation queue, up the escalation ladder, and
// back to healthy. Internal to the node actor: every function runs in its
// behaviour, so the node's mailbox serialises them (the node actor is the lock).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "actors/control/node/node_actor.hpp"

namespace vigil::node_remediation_steps {

/// Plans a remediation for each active event not planned yet, once the node
/// is quarantined and its drain is done; on release, forgets everything and
/// removes the latestFaultRemediationState annotation (seed 000 §4.2).
void consider(node_actor* self);

/// (rstart_atom): the deferred start of the request in flight.
void on_start_timer(node_actor* self);

/// (rpoll_atom): reads the CR in flight; a terminal phase finishes it.
void on_poll_timer(node_actor* self);

/// (rverify_atom): verification deadlines that passed escalate.
void on_verify_timer(node_actor* self);

/// A routed healthy event: verifies the reset of each GPU it names.
void on_healthy_event(node_actor* self, const health_event& event);

/// The remediation part of the node's summary.
nlohmann::json summary(const node_state& st);

} // namespace vigil::node_remediation_steps
