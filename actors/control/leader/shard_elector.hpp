// The shard elector (issue 22, item 2): holds this replica's member Lease and
// the shard Leases it should own, and tells its subscribers (the fleet)
// which shards' nodes this replica acts on. The rules are
// shard_assignment.hpp's; this actor only reads, writes and times.
//
// One look every retry_period: a LIST of the Leases in the namespace (the
// member Leases and the shard Leases, one read), a write renewing this
// replica's member Lease, then plan_shards' step for each shard. A shard is
// acted on from its Lease's successful write until either this replica
// releases it (it stops first, then writes the release) or its renew
// deadline passes without a successful write (it stops before the Lease can
// expire and another replica take it), as the leader elector does for the
// single Lease.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/control/leader/lease_election.hpp"
#include "actors/gateway/kube_gateway_messages.hpp"
#include "actors/supervisor/message_stats.hpp"
#include "runtime/clock.hpp"

namespace vigil {

struct shard_elector_state {
  /// name: the base of the Leases' names (control.lease_name).
  control::lease_config config;
  std::uint32_t shards = 1;
  kube_gateway_handle gateway;
  std::vector<caf::actor> subscribers;
  std::shared_ptr<const clock> time;
  /// Shards acted on, with the time of each one's last successful write.
  std::map<std::uint32_t, wall_time> held;
  /// The shard Leases as last read or written (for the release at exit).
  std::map<std::uint32_t, control::lease_record> leases;
  /// This replica's member Lease as last written (for the release at exit).
  std::optional<control::lease_record> member;
  std::vector<std::string> members; ///< live members at the last look
  std::size_t in_flight = 0;        ///< requests of the current look still out
  /// Set by the exit message: nothing is acted on, looked at or renewed any
  /// more; the Leases are released once in_flight is 0, then it quits.
  std::optional<caf::error> exiting;
  /// The releases are written: answers to earlier requests are not acted
  /// on (what they say of a Lease is still kept, unused).
  bool releasing = false;
  std::uint64_t acquisitions = 0;
  std::uint64_t releases = 0;
  std::uint64_t expiries = 0; ///< shards dropped at their renew deadline
  static inline const char* name = "shard_elector";
};

using shard_elector_actor =
  caf::stateful_actor<shard_elector_state, observed<caf::event_based_actor>>;

/// Subscribers get (shards_atom, sorted shard numbers) on every change.
/// (summary_atom) → JSON {identity, shards, held, members, acquisitions,
/// releases, expiries}. On an exit message it stops acting on every shard at
/// once, waits for the requests of a look in flight (config.exit_wait at
/// most), releases the shard Leases and the member Lease it holds (best
/// effort, config.exit_wait at most), then quits.
caf::behavior shard_elector(shard_elector_actor* self, control::lease_config config,
                            std::uint32_t shards, kube_gateway_handle gateway,
                            std::vector<caf::actor> subscribers,
                            std::shared_ptr<const clock> time);

/// The Leases of one LIST, sorted out for plan_shards: `shards[i]` for shard
/// i (nullopt: none yet), the member Leases, and this replica's own member
/// Lease. Items that do not read as Leases are skipped (named in `problems`).
struct lease_listing {
  std::vector<std::optional<control::lease_record>> shards;
  std::vector<control::lease_record> members;
  std::optional<control::lease_record> own_member;
  std::vector<std::string> problems;
};
lease_listing sort_leases(const std::string& list_json,
                          const control::lease_config& config, std::uint32_t shards);

} // namespace vigil
