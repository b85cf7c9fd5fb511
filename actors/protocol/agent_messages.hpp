// Messages between the node agent's actors: monitors hand HealthEvents to the
// forwarder, the forwarder hands batches to the poster. Local only.
#pragma once

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>

#include "actors/agent/forwarder/http_event_poster.hpp"
#include "actors/protocol/health_event_message.hpp"
#include "messages/health_event.hpp"

namespace vigil {

/// (forward_atom, health_event) → bool: true once queued or spooled; an
/// error when the spool refused it (full of fatal events, or broken).
using forward_atom = caf::atom_constant<caf::atom("forward")>;
/// A monitor's own timer: time for the next poll.
using poll_atom = caf::atom_constant<caf::atom("poll")>;
/// (post_atom, std::string ndjson) → agent::post_result.
using post_atom = caf::atom_constant<caf::atom("post")>;
/// (report_now_atom) to the allocation_monitor: a GPU fault was seen; report
/// which pods hold the GPUs now.
using report_now_atom = caf::atom_constant<caf::atom("reportnow")>;
/// (fault_watch_atom, actor) to the forwarder: send that actor report_now_atom
/// whenever an unhealthy GPU event passes.
using fault_watch_atom = caf::atom_constant<caf::atom("faultwatch")>;
/// The forwarder's timer (with a generation, so stale timers are ignored).
using wake_atom = caf::atom_constant<caf::atom("wake")>;

} // namespace vigil

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(vigil::agent::post_result)
