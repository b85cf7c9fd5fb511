// The forwarder actor: takes HealthEvents from the monitors, batches them to
// the control plane through the poster, and spools them to disk while the
// control plane is away (forwarder_logic decides; this actor wires). The
// spool fsyncs, so spawn it detached; the poster blocks on HTTP, so it is
// detached too.
#pragma once

#include <memory>

#include <caf/actor.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/agent/forwarder/event_spool.hpp"
#include "actors/agent/forwarder/forwarder_logic.hpp"
#include "actors/agent/forwarder/http_event_poster.hpp"
#include "messages/agent_messages.hpp"

namespace vigil {

struct forwarder_state {
  /// Events still in memory go to the spool when the actor stops.
  ~forwarder_state();

  std::shared_ptr<agent::event_spool> spool; ///< the logic borrows it
  std::unique_ptr<agent::forwarder_logic> logic;
  caf::actor poster;
  std::uint64_t wake_generation = 0;
  static inline const char* name = "forwarder";
};

using forwarder_actor = caf::stateful_actor<forwarder_state>;

/// `spool` must be open. `poster` answers (post_atom, body) with a post_result.
caf::behavior forwarder(forwarder_actor* self, std::shared_ptr<agent::event_spool> spool,
                        agent::forwarder_options options, caf::actor poster);

/// Wraps http_event_poster: one blocking POST per message.
caf::behavior event_poster(caf::event_based_actor* self,
                           std::shared_ptr<agent::http_event_poster> poster);

} // namespace vigil
