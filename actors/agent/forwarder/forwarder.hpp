// The forwarder actor: takes HealthEvents from the monitors, batches them to
// the control plane through the poster, and spools them to disk while the
// control plane is away (forwarder_logic decides; this actor wires). It also
// sends the agent's heartbeat every interval, events or not (heartbeat_sender).
// The spool fsyncs, so spawn it detached; the poster blocks on HTTP, so it is
// detached too.
#pragma once

#include <memory>
#include <optional>

#include <caf/actor.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/agent/agent_figures.hpp"
#include "actors/agent/forwarder/event_spool.hpp"
#include "actors/agent/forwarder/forwarder_logic.hpp"
#include "actors/agent/forwarder/heartbeat.hpp"
#include "actors/agent/forwarder/http_event_poster.hpp"
#include "actors/agent/forwarder/rejected_event_log.hpp"
#include "actors/protocol/agent_messages.hpp"
#include "runtime/clock.hpp"

namespace vigil {

/// The forwarder's heartbeat timer (heartbeat_atom), and its request to the
/// poster: (heartbeat_atom, std::string json) → agent::post_result.
using heartbeat_atom = caf::atom_constant<caf::atom("heartbeat")>;

struct forwarder_state {
  /// Events still in memory go to the spool when the actor stops.
  ~forwarder_state();

  std::shared_ptr<agent::event_spool> spool;               ///< the logic borrows it
  std::shared_ptr<agent::rejected_event_log> rejected_log; ///< may be null
  std::unique_ptr<agent::forwarder_logic> logic;
  std::unique_ptr<agent::heartbeat_sender> heartbeat;
  caf::actor poster;
  std::shared_ptr<const clock> wall; ///< heartbeats' sentAt, last-accepted times
  std::optional<wall_time> last_accepted;
  std::uint64_t wake_generation = 0;
  std::uint64_t failing_batches = 0; ///< consecutive batches not delivered
  caf::actor fault_watcher;          ///< told of each unhealthy GPU event (may be null)
  static inline const char* name = "forwarder";
};

using forwarder_actor = caf::stateful_actor<forwarder_state>;

/// `spool` must be open; events the control plane rejects line by line go to
/// `rejected_log` (null: only logged). `poster` answers (post_atom, body) and
/// (heartbeat_atom, json) with a post_result. The first heartbeat goes out
/// at once, then one every `heartbeat.interval`; when that is 0, one all the
/// same as the start-up check of the control plane. Answers (figures_atom)
/// with agent::forwarder_figures. (fault_watch_atom, actor) names the actor
/// that gets report_now_atom for each unhealthy GPU event.
caf::behavior forwarder(forwarder_actor* self, std::shared_ptr<agent::event_spool> spool,
                        std::shared_ptr<agent::rejected_event_log> rejected_log,
                        agent::forwarder_options options,
                        agent::heartbeat_options heartbeat, caf::actor poster,
                        std::shared_ptr<const clock> wall);

/// Wraps http_event_poster: one blocking POST per message.
caf::behavior event_poster(caf::event_based_actor* self,
                           std::shared_ptr<agent::http_event_poster> poster);

} // namespace vigil
