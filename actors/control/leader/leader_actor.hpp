// The leader elector: holds or waits for the control plane's Lease and tells
// its subscribers (fleet, ingest) when this replica starts or stops leading.
// Only the leader acts on the cluster; a standby replica answers ingest 503
// (the agents retry, and the Service reaches the leader) and /readyz 503.
#pragma once

#include <optional>
#include <vector>

#include <caf/actor.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/control/leader/lease_election.hpp"
#include "actors/gateway/kube_gateway_messages.hpp"
#include "actors/supervisor/message_stats.hpp"
#include "runtime/clock.hpp"

namespace vigil {

struct leader_state {
  control::lease_config config;
  kube_gateway_handle gateway;
  std::vector<caf::actor> subscribers;
  std::shared_ptr<const clock> time;
  bool leading = false;
  bool in_flight = false;
  std::optional<wall_time> renewed; ///< the last successful write of the Lease
  std::string holder;               ///< the holder last seen
  /// The Lease as last read or written (none: not found), for the release.
  std::optional<control::lease_record> lease;
  /// Set by the exit message: the actor no longer leads, looks or renews,
  /// and quits with this reason once it has given the Lease up.
  std::optional<caf::error> exiting;
  /// The release is written (or there was none to write): answers to
  /// earlier requests are dropped.
  bool releasing = false;
  std::uint64_t acquisitions = 0;
  static inline const char* name = "leader";
};

using leader_actor = caf::stateful_actor<leader_state, observed<caf::event_based_actor>>;

/// Looks at the Lease every retry_period; subscribers get (leader_atom, bool)
/// on every change. (summary_atom) → JSON {leading, holder, acquisitions}.
/// On an exit message it stops leading at once, waits for a Lease request
/// already in flight (for config.exit_wait at most), releases the Lease if it
/// holds it (best effort, config.exit_wait at most), then quits.
caf::behavior leader_elector(leader_actor* self, control::lease_config config,
                             kube_gateway_handle gateway,
                             std::vector<caf::actor> subscribers,
                             std::shared_ptr<const clock> time);

} // namespace vigil
