// Shard assignment and handover (issue 22, item 2): which shard a node is in,
// which live member should own each shard, and what one replica writes after
// a look at the shard Leases.
#include "actors/control/leader/shard_assignment.hpp"

#include <map>
#include <set>

#include <gtest/gtest.h>

namespace vigil::control {
namespace {

using namespace std::chrono_literals;

const wall_time t0 = from_unix(1'790'000'000, 0);

lease_config replica(const std::string& identity) {
  lease_config c;
  c.name = "vigil-control";
  c.identity = identity;
  return c;
}

lease_record held_by(const std::string& holder, wall_time renewed) {
  lease_record r;
  r.holder = holder;
  r.duration = 15s;
  r.acquired = renewed;
  r.renewed = renewed;
  r.resource_version = "7";
  return r;
}

std::map<shard_step::kind, std::size_t> count(const std::vector<shard_step>& steps) {
  std::map<shard_step::kind, std::size_t> out;
  for (const auto& s : steps)
    ++out[s.what];
  return out;
}

TEST(shard_of, is_stable_in_range_and_even) {
  // Pinned: a changed hash would move nodes between owners mid-flight.
  EXPECT_EQ(shard_of("gpu-node-1", 16), shard_of("gpu-node-1", 16));
  EXPECT_EQ(shard_of("", 16), 14695981039346656037ull % 16);
  EXPECT_EQ(shard_of("gpu-node-1", 1), 0u);
  EXPECT_EQ(shard_of("gpu-node-1", 0), 0u); // no shards configured: one
  std::vector<std::size_t> sizes(16);
  for (int i = 0; i < 16000; ++i) {
    const auto s = shard_of("gpu-node-" + std::to_string(i), 16);
    ASSERT_LT(s, 16u);
    ++sizes[s];
  }
  for (auto n : sizes) { // 1,000 each on average
    EXPECT_GT(n, 850u);
    EXPECT_LT(n, 1150u);
  }
}

TEST(shard_names, are_lease_names) {
  EXPECT_EQ(shard_lease_name("vigil-control", 3), "vigil-control-shard-3");
  EXPECT_EQ(member_lease_name("vigil-control", "Vigil_Control-7f9/x"),
            "vigil-control-member-vigil-control-7f9-x");
  EXPECT_EQ(member_lease_name("v", std::string(400, 'a')).size(), 253u);
}

TEST(live_members, are_those_renewed_within_their_duration) {
  const std::vector<lease_record> leases = {held_by("b", t0), held_by("a", t0 - 20s),
                                            held_by("c", t0 - 5s), held_by("", t0),
                                            held_by("b", t0 - 1s)};
  EXPECT_EQ(live_members(leases, t0), (std::vector<std::string>{"b", "c"}));
}

TEST(preferred_owner, spreads_shards_and_moves_only_what_a_member_gains) {
  const std::vector<std::string> three = {"replica-a", "replica-b", "replica-c"};
  EXPECT_EQ(preferred_owner(5, {}), "");
  std::map<std::string, int> owned;
  for (std::uint32_t i = 0; i < 96; ++i) {
    const auto owner = preferred_owner(i, three);
    EXPECT_EQ(owner, preferred_owner(i, {"replica-c", "replica-a", "replica-b"}));
    ++owned[owner];
  }
  for (const auto& m : three) // 32 each on average
    EXPECT_GE(owned[m], 20) << m;
  // A fourth member takes shards from the others and nothing else moves.
  auto four = three;
  four.push_back("replica-d");
  int moved = 0;
  for (std::uint32_t i = 0; i < 96; ++i)
    if (preferred_owner(i, four) != preferred_owner(i, three)) {
      EXPECT_EQ(preferred_owner(i, four), "replica-d");
      ++moved;
    }
  EXPECT_GT(moved, 12);
  EXPECT_LT(moved, 40);
}

TEST(plan_shards, a_lone_replica_creates_every_shard_lease) {
  const std::vector<std::optional<lease_record>> none(8);
  auto steps = plan_shards(none, {}, replica("a"), t0);
  ASSERT_EQ(steps.size(), 8u);
  for (const auto& s : steps) {
    EXPECT_EQ(s.what, shard_step::kind::acquire);
    EXPECT_EQ(s.write.what, lease_step::kind::create);
    EXPECT_NE(s.write.body.find("vigil-control-shard-" + std::to_string(s.shard)),
              std::string::npos);
  }
}

TEST(plan_shards, a_new_member_is_handed_its_shards_through_release) {
  const std::vector<std::string> members = {"a", "b"};
  std::vector<std::optional<lease_record>> leases(16, held_by("a", t0 - 1s));
  // a holds all 16; b has joined. a keeps its own and releases b's ...
  auto a = plan_shards(leases, members, replica("a"), t0);
  // ... while b waits for them: a's Leases are live.
  auto b = plan_shards(leases, members, replica("b"), t0);
  std::set<std::uint32_t> released;
  for (std::uint32_t i = 0; i < 16; ++i) {
    const bool for_b = preferred_owner(i, members) == "b";
    EXPECT_EQ(a[i].what, for_b ? shard_step::kind::release : shard_step::kind::renew);
    EXPECT_EQ(b[i].what, for_b ? shard_step::kind::wait : shard_step::kind::none);
    EXPECT_EQ(b[i].write.body, ""); // nothing written over a live Lease
    if (for_b)
      released.insert(i);
  }
  ASSERT_FALSE(released.empty());
  // Released (no holder): b takes each at its next look, a leaves it alone.
  for (auto i : released) {
    auto& lease = leases[i];
    lease->holder.clear();
    lease->duration = 1s;
  }
  a = plan_shards(leases, members, replica("a"), t0 + 2s);
  b = plan_shards(leases, members, replica("b"), t0 + 2s);
  for (auto i : released) {
    EXPECT_EQ(a[i].what, shard_step::kind::none);
    EXPECT_EQ(b[i].what, shard_step::kind::acquire);
    EXPECT_TRUE(b[i].write.takeover);
  }
  EXPECT_EQ(count(a)[shard_step::kind::renew] + released.size(), 16u);
}

TEST(plan_shards, a_dead_replicas_shards_are_taken_once_its_leases_expire) {
  // b died: its member Lease is gone from the live members, its shard Leases
  // stay until they expire.
  std::vector<std::optional<lease_record>> leases(16, held_by("b", t0));
  auto before = plan_shards(leases, {"a"}, replica("a"), t0 + 10s);
  EXPECT_EQ(count(before)[shard_step::kind::wait], 16u); // not before they expire
  auto after = plan_shards(leases, {"a"}, replica("a"), t0 + 15s);
  EXPECT_EQ(count(after)[shard_step::kind::acquire], 16u);
  for (const auto& s : after) {
    EXPECT_EQ(s.write.what, lease_step::kind::update); // resourceVersion-checked
    EXPECT_TRUE(s.write.takeover);
  }
}

// Two replicas that disagree on the members (one has not seen the other's
// member Lease yet) may both want a shard; only one can hold it, because the
// other finds it held and live and waits.
TEST(plan_shards, replicas_that_disagree_never_both_write_a_live_lease) {
  std::vector<std::optional<lease_record>> leases(32);
  for (std::uint32_t i = 0; i < 32; ++i)
    leases[i] = held_by(i % 2 ? "a" : "b", t0 - 2s);
  for (const auto& [me, seen] :
       std::vector<std::pair<std::string, std::vector<std::string>>>{{"a", {"a"}},
                                                                     {"b", {"b"}}})
    for (const auto& s : plan_shards(leases, seen, replica(me), t0)) {
      const bool mine = leases[s.shard]->holder == me;
      if (!mine)
        EXPECT_TRUE(s.what == shard_step::kind::wait || s.what == shard_step::kind::none);
      else
        EXPECT_EQ(s.what, shard_step::kind::renew); // each prefers what it alone sees
    }
}

} // namespace
} // namespace vigil::control
