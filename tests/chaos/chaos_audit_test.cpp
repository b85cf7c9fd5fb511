// The chaos run's auditor: what it counts from the API server's store and
// the journal. Each promise it checks is tested here on a hand-made history,
// so a run that reports 0 is not 0 because the check never fires.
#include "tests/chaos/chaos_audit.hpp"

#include <algorithm>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace vigil::chaos {
namespace {

using nlohmann::json;

class chaos_audit : public ::testing::Test {
protected:
  void SetUp() override {
    store_.register_type(
      {"vigil.dev", "v1alpha1", "gpuresets", "GPUReset", false, true, {}, true});
    nodes_ = store_.find_type("", "v1", "nodes");
    resets_ = store_.find_type("vigil.dev", "v1alpha1", "gpuresets");
    ASSERT_TRUE(store_
                  .create(*nodes_, "",
                          {{"apiVersion", "v1"},
                           {"kind", "Node"},
                           {"metadata", {{"name", "node-1"}}},
                           {"spec", json::object()}})
                  .ok());
    audit_.poll(store_, 0);
  }

  void set_cordoned(bool cordoned) {
    ASSERT_TRUE(store_
                  .patch(*nodes_, "", "node-1", {{"spec", {{"unschedulable", cordoned}}}},
                         kube::patch_type::merge, false)
                  .ok());
  }

  // A GPUReset of node-1's GPU-a; `status` as the janitor left it.
  void create_reset(const std::string& name = "reset-1", json status = json::object()) {
    json cr = {{"apiVersion", "vigil.dev/v1alpha1"},
               {"kind", "GPUReset"},
               {"metadata",
                {{"name", name},
                 {"labels", {{"vigil.dev/node", "node-1"}}},
                 {"annotations", {{"vigil.dev/equivalence-group", "GPU-a"}}}}},
               {"spec", json::object()}};
    if (!status.empty())
      cr["status"] = std::move(status);
    ASSERT_TRUE(store_.create(*resets_, "", cr).ok());
  }

  void finish_reset() {
    ASSERT_TRUE(store_
                  .patch(*resets_, "", "reset-1", {{"status", {{"phase", "Succeeded"}}}},
                         kube::patch_type::merge, true)
                  .ok());
  }

  chaos_verdict judged() { return judge({}, {}, audit_, breaker_limits{}); }

  kube::object_store store_;
  const kube::resource_type* nodes_ = nullptr;
  const kube::resource_type* resets_ = nullptr;
  api_auditor audit_;
};

TEST_F(chaos_audit, an_uncordon_after_the_cr_ended_is_no_finding) {
  set_cordoned(true);
  create_reset();
  audit_.poll(store_, 1);
  finish_reset();
  audit_.poll(store_, 2);
  set_cordoned(false);
  audit_.poll(store_, 3);
  auto v = judged();
  EXPECT_EQ(v.uncordoned_during_cr, 0u);
  EXPECT_EQ(v.stuck_crs, 0u);
  EXPECT_EQ(v.duplicate_crs, 0u);
}

// Seed 002: the node stays out of service until its repair is over.
TEST_F(chaos_audit, an_uncordon_while_the_nodes_cr_runs_is_counted) {
  set_cordoned(true);
  create_reset();
  audit_.poll(store_, 1);
  set_cordoned(false);
  audit_.poll(store_, 2);
  auto v = judged();
  EXPECT_EQ(v.uncordoned_during_cr, 1u);
  EXPECT_NE(std::find(v.findings.begin(), v.findings.end(),
                      "uncordoned during a CR: node-1 while gpuresets/reset-1 had not "
                      "ended"),
            v.findings.end());
}

// The CR and the uncordon land between two polls: the uncordon is judged
// against the CRs of the same poll, created but not yet ended.
TEST_F(chaos_audit, a_cr_first_seen_in_the_uncordons_poll_counts) {
  set_cordoned(true);
  audit_.poll(store_, 1);
  create_reset();
  set_cordoned(false);
  audit_.poll(store_, 2);
  EXPECT_EQ(judged().uncordoned_during_cr, 1u);
}

cr_sighting sighting(const std::string& kind, const std::string& group) {
  cr_sighting cr;
  cr.kind = kind;
  cr.node = "node-1";
  cr.group = group;
  return cr;
}

// The final state names what was repaired, not how many CRs it took: a
// fault that arrives with another after an outage is covered by one repair.
TEST(repaired, a_reboot_covers_the_resets_and_a_gpu_counts_once) {
  const auto reset_a = sighting("gpuresets", "reset-GPU-a");
  const auto reset_b = sighting("gpuresets", "reset-GPU-b");
  const auto reboot = sighting("rebootnodes", "restart");
  EXPECT_EQ(repaired({reset_a, reboot}), repaired({reboot}));
  EXPECT_EQ(repaired({reset_a, reset_a}), repaired({reset_a}));
  EXPECT_EQ(repaired({reboot, reboot}), "rebootnodes");
  EXPECT_EQ(repaired({reboot, sighting("terminatenodes", "replace")}), "terminatenodes");
  // What a run did not repair still shows.
  EXPECT_NE(repaired({reset_a, reset_b}), repaired({reset_a}));
  EXPECT_NE(repaired({reset_a}), repaired({reboot}));
}

TEST_F(chaos_audit, the_same_repairs_in_fewer_crs_do_not_diverge_but_are_reported) {
  create_reset();
  finish_reset();
  audit_.poll(store_, 1);
  const auto once = judged();
  create_reset("reset-2", {{"phase", "Succeeded"}});
  audit_.poll(store_, 2);
  const auto twice = judged();
  EXPECT_EQ(diverged(twice, once), 0u);
  std::vector<std::string> which;
  EXPECT_EQ(cr_counts_differ(twice, once, &which), 1u);
  ASSERT_EQ(which.size(), 1u);
  EXPECT_EQ(which[0], "node-1: clean \"gpuresets=2\", chaos \"gpuresets=1\"");
}

} // namespace
} // namespace vigil::chaos
