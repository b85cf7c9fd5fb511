#include "actors/control/leader/shard_assignment.hpp"

#include <algorithm>
#include <cctype>

namespace vigil::control {

namespace {

std::uint64_t fnv1a(std::string_view text, std::uint64_t hash = 14695981039346656037ull) {
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

// splitmix64's finaliser: FNV-1a alone leaves the low bits of similar
// inputs ("node-1/3", "node-2/3") too alike to rank members fairly.
std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

std::uint64_t weight(std::uint32_t shard, const std::string& member) {
  return mix(fnv1a(member, fnv1a(std::to_string(shard) + "/")));
}

} // namespace

std::uint32_t shard_of(std::string_view node, std::uint32_t shards) {
  return static_cast<std::uint32_t>(fnv1a(node) % std::max<std::uint32_t>(shards, 1));
}

std::string shard_lease_name(const std::string& base, std::uint32_t shard) {
  return base + "-shard-" + std::to_string(shard);
}

std::string member_lease_name(const std::string& base, const std::string& identity) {
  std::string name = base + "-member-";
  for (unsigned char c : identity)
    name +=
      std::isalnum(c) || c == '-' || c == '.' ? static_cast<char>(std::tolower(c)) : '-';
  return name.substr(0, 253);
}

std::vector<std::string> live_members(const std::vector<lease_record>& member_leases,
                                      wall_time now) {
  std::vector<std::string> out;
  for (const auto& lease : member_leases) {
    const auto last = lease.renewed.value_or(lease.acquired.value_or(wall_time{}));
    if (!lease.holder.empty() && now < last + lease.duration)
      out.push_back(lease.holder);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string preferred_owner(std::uint32_t shard,
                            const std::vector<std::string>& members) {
  const std::string* best = nullptr;
  std::uint64_t best_weight = 0;
  for (const auto& m : members) {
    const auto w = weight(shard, m);
    // Ties (never seen, but possible) go to the smaller name, so the answer
    // does not depend on the members' order.
    if (best == nullptr || w > best_weight || (w == best_weight && m < *best)) {
      best = &m;
      best_weight = w;
    }
  }
  return best == nullptr ? std::string{} : *best;
}

std::vector<shard_step>
plan_shards(const std::vector<std::optional<lease_record>>& leases,
            std::vector<std::string> members, const lease_config& config, wall_time now) {
  if (std::find(members.begin(), members.end(), config.identity) == members.end())
    members.push_back(config.identity);
  std::vector<shard_step> out;
  out.reserve(leases.size());
  for (std::uint32_t i = 0; i < leases.size(); ++i) {
    auto shard_config = config;
    shard_config.name = shard_lease_name(config.name, i);
    const auto& lease = leases[i];
    const bool held = lease && lease->holder == config.identity;
    const bool preferred = preferred_owner(i, members) == config.identity;
    shard_step step;
    step.shard = i;
    if (held && !preferred) {
      step.what = shard_step::kind::release;
      step.write = *release_step(*lease, shard_config, now);
    } else if (held || preferred) {
      step.write = next_lease_step(lease, shard_config, now);
      step.what = held                                        ? shard_step::kind::renew
                  : step.write.what == lease_step::kind::wait ? shard_step::kind::wait
                                                              : shard_step::kind::acquire;
    }
    out.push_back(std::move(step));
  }
  return out;
}

} // namespace vigil::control
