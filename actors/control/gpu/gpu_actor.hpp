// The gpu actor: one per GPU (UUID) of a node, spawned by the node actor when
// the first fatal event names the GPU, and linked to it (ARCHITECTURE.md §3).
// It owns the GPU's fatal-XID history (bursts, window, sticky escalation) and
// answers, for each fatal event, what the repeated-XID rule makes of it. The
// node actor awaits the answer, so the node's events stay in order: the
// node's mailbox remains the only serialisation of work on the node.
#pragma once

#include <string>

#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/control/node/correlation_messages.hpp"
#include "actors/control/rules/correlation_rules.hpp"
#include "actors/supervisor/message_stats.hpp"

namespace vigil {

struct gpu_state {
  std::string uuid;
  control::gpu_xid_history history;
  static inline const char* name = "gpu";
};

using gpu_actor = caf::stateful_actor<gpu_state, observed<caf::event_based_actor>>;

/// (correlate_atom, health_event, event time in ns since the epoch, live) →
/// control::correlation_outcome; (summary_atom) → JSON: its history and figures.
caf::behavior gpu(gpu_actor* self, std::string uuid, control::correlation_config config);

} // namespace vigil
