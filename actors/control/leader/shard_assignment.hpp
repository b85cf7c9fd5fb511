// Shards of the fleet across replicas (issue 22, item 2): the pure rules.
//
// A node belongs to shard shard_of(name, K): FNV-1a 64 of its name, mod K,
// the same on every replica and in every release (it decides who may act on
// a node, so it must never change under a running fleet).
//
// Which replica should own a shard: every replica keeps a member Lease
// (member_lease_name) renewed as the leader's Lease is; the live members are
// those whose Lease was renewed within its duration. Of the live members,
// shard i goes to the one with the highest rendezvous weight of (i, identity)
// (highest-random-weight hashing): every replica computes the same owner from
// the same members, the shards spread evenly, and a member joining or leaving
// moves only the shards it gains or loses (about K/n of them).
//
// Who may act on a shard: only the holder of the shard's own Lease
// (shard_lease_name), written with lease_election's rules (resourceVersion
// checked, taken over only once expired or released). A replica that is no
// longer a shard's preferred owner releases its Lease and the preferred one
// takes it at its next look, so two replicas never act on one node, even
// while they disagree on who the members are; at worst a shard waits one
// retry period with no owner.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actors/control/leader/lease_election.hpp"
#include "messages/wall_time.hpp"

namespace vigil::control {

/// The shard of a node: FNV-1a 64 of its name mod `shards` (≥ 1).
std::uint32_t shard_of(std::string_view node, std::uint32_t shards);

/// "<base>-shard-<i>": the Lease whose holder acts on shard i's nodes.
std::string shard_lease_name(const std::string& base, std::uint32_t shard);

/// "<base>-member-<identity>": the Lease a replica renews while it runs,
/// lower-cased and cut to a DNS subdomain's 253 characters.
std::string member_lease_name(const std::string& base, const std::string& identity);

/// The holders of the member Leases renewed within their duration at `now`,
/// sorted, each once.
std::vector<std::string> live_members(const std::vector<lease_record>& member_leases,
                                      wall_time now);

/// The member shard `shard` should belong to: the highest rendezvous weight
/// of (shard, member); "" when there are no members. Independent of the
/// members' order.
std::string preferred_owner(std::uint32_t shard, const std::vector<std::string>& members);

/// What one replica does about one shard after a look at its Lease.
struct shard_step {
  enum class kind {
    acquire, ///< preferred and free, expired or released: create or take it over
    renew,   ///< held and still preferred: renew
    release, ///< held, but another live member is preferred: give it up
    wait,    ///< preferred, but another replica holds it live: wait
    none,    ///< neither held nor preferred
  };
  std::uint32_t shard = 0;
  kind what = kind::none;
  lease_step write; ///< the write for acquire, renew and release
};

/// One look at every shard Lease (`leases[i]` for shard i; nullopt: not
/// created yet) by the replica `config.identity`, the members being
/// `members` (this replica counts as one whether listed or not): one step per
/// shard. `config.name` is the base of the shard Leases' names.
std::vector<shard_step>
plan_shards(const std::vector<std::optional<lease_record>>& leases,
            std::vector<std::string> members, const lease_config& config, wall_time now);

} // namespace vigil::control
