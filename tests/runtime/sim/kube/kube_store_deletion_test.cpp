// The object store's deletion side: graceful pod deletion, preconditions,
// finalizers, owner references (background, orphan, foreground), namespace
// cleanup, and eviction under PodDisruptionBudgets.
#include <gtest/gtest.h>

#include "runtime/sim/kube/kube_object_store.hpp"
#include "tests/runtime/sim/kube/kube_object_store_fixture.hpp"

using namespace vigil::kube;
using namespace vigil::kube::test_support;

namespace {

// --- deletion

TEST_F(kube_store, pods_are_deleted_gracefully_until_the_kubelet_finishes) {
  create(pods(), "gpu", pod_object("worker", "node-a"));
  const auto start = store.current_resource_version();
  auto deleted = store.remove(pods(), "gpu", "worker", {});
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ((*deleted.value)["metadata"]["deletionTimestamp"], "2024-05-01T00:00:30Z");
  EXPECT_EQ((*deleted.value)["metadata"]["deletionGracePeriodSeconds"], 30);
  EXPECT_TRUE(exists(pods(), "gpu", "worker"));
  using pod_names = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(store.terminating_pods(), (pod_names{{"gpu", "worker"}}));

  // A second delete with a shorter grace period shortens it.
  clock += 5;
  auto shorter = store.remove(pods(), "gpu", "worker", {std::int64_t{10}, {}, {}, {}});
  EXPECT_EQ((*shorter.value)["metadata"]["deletionGracePeriodSeconds"], 10);
  EXPECT_EQ((*shorter.value)["metadata"]["deletionTimestamp"], "2024-05-01T00:00:15Z");

  EXPECT_FALSE(store.finish_pod_deletion("gpu", "missing"));
  EXPECT_TRUE(store.finish_pod_deletion("gpu", "worker"));
  EXPECT_FALSE(exists(pods(), "gpu", "worker"));
  EXPECT_TRUE(store.terminating_pods().empty());
  EXPECT_EQ(types_of(watch(pods(), "gpu", start)),
            (strings{"MODIFIED:worker", "MODIFIED:worker", "DELETED:worker"}));
}

TEST_F(kube_store, pod_grace_period_comes_from_options_spec_or_scheduling) {
  auto pod = pod_object("spec-grace", "node-a");
  pod["spec"]["terminationGracePeriodSeconds"] = 120;
  create(pods(), "gpu", pod);
  auto deleted = store.remove(pods(), "gpu", "spec-grace", {});
  EXPECT_EQ((*deleted.value)["metadata"]["deletionGracePeriodSeconds"], 120);
  create(pods(), "gpu", pod_object("now", "node-a"));
  store.remove(pods(), "gpu", "now", {std::int64_t{0}, {}, {}, {}});
  EXPECT_FALSE(exists(pods(), "gpu", "now"));
  create(pods(), "gpu",
         {{"metadata", {{"name", "unscheduled"}}}, {"spec", json::object()}});
  store.remove(pods(), "gpu", "unscheduled", {});
  EXPECT_FALSE(exists(pods(), "gpu", "unscheduled"));
  // Force-deleting a terminating pod removes it.
  store.remove(pods(), "gpu", "spec-grace", {std::int64_t{0}, {}, {}, {}});
  EXPECT_FALSE(exists(pods(), "gpu", "spec-grace"));
}

TEST_F(kube_store, delete_preconditions_are_checked) {
  auto node = create(nodes(), "", node_object("node-a"));
  delete_options stale;
  stale.precondition_resource_version = "99";
  EXPECT_EQ(store.remove(nodes(), "", "node-a", stale).error.code, 409);
  delete_options wrong_uid;
  wrong_uid.precondition_uid = "nope";
  EXPECT_EQ(store.remove(nodes(), "", "node-a", wrong_uid).error.code, 409);
  delete_options current;
  current.precondition_resource_version = node["metadata"]["resourceVersion"];
  auto removed = store.remove(nodes(), "", "node-a", current);
  EXPECT_TRUE(removed.ok());
  EXPECT_EQ((*removed.value)["metadata"]["name"], "node-a");
  EXPECT_EQ(store.remove(nodes(), "", "node-a", {}).error.code, 404);
}

TEST_F(kube_store, finalizers_hold_an_object_until_removed) {
  create(resets(), "ops",
         {{"metadata", {{"name", "r1"}, {"finalizers", {"vigil.dev/journal"}}}}});
  auto deleted = store.remove(resets(), "ops", "r1", {});
  EXPECT_TRUE((*deleted.value)["metadata"].contains("deletionTimestamp"));
  EXPECT_TRUE(exists(resets(), "ops", "r1"));
  patch(resets(), "ops", "r1", {{"metadata", {{"finalizers", nullptr}}}},
        patch_type::merge);
  EXPECT_FALSE(exists(resets(), "ops", "r1"));
}

// As the real API server: a DELETE of an object with finalizers only sets
// deletionTimestamp (once); the finalizers' owners may still update it and
// remove theirs, but nobody may add one; the object goes with the last one.
TEST_F(kube_store, an_object_being_deleted_takes_no_new_finalizers) {
  create(
    resets(), "ops",
    {{"metadata", {{"name", "r1"}, {"finalizers", {"vigil.dev/a", "vigil.dev/b"}}}}});
  auto deleted = store.remove(resets(), "ops", "r1", {});
  ASSERT_TRUE(deleted.ok());
  const auto stamp = (*deleted.value)["metadata"]["deletionTimestamp"];
  EXPECT_EQ(stamp, "2024-05-01T00:00:00Z");
  EXPECT_EQ((*deleted.value)["metadata"]["deletionGracePeriodSeconds"], 0);
  clock += 60;
  auto again = store.remove(resets(), "ops", "r1", {});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again.value)["metadata"]["deletionTimestamp"], stamp);

  auto added = store.patch(
    resets(), "ops", "r1",
    {{"metadata", {{"finalizers", {"vigil.dev/a", "vigil.dev/b", "z/new", "y/new"}}}}},
    patch_type::merge, false);
  EXPECT_EQ(added.error.code, 422);
  EXPECT_EQ(added.error.reason, "Invalid");
  EXPECT_EQ(added.error.message,
            "GPUReset.vigil.dev \"r1\" is invalid: metadata.finalizers: Forbidden: no "
            "new finalizers can be added if the object is being deleted, found new "
            "finalizers []string{\"y/new\", \"z/new\"}");
  EXPECT_EQ(added.error.details["causes"][0]["reason"], "FieldValueForbidden");
  EXPECT_EQ(added.error.details["causes"][0]["field"], "metadata.finalizers");
  EXPECT_EQ(added.error.details["group"], "vigil.dev");
  // A PUT is held to the same rule.
  auto current = get(resets(), "ops", "r1");
  current["metadata"]["finalizers"].push_back("x/new");
  EXPECT_EQ(store.update(resets(), "ops", "r1", current, false).error.code, 422);

  // Other updates go through, deletionTimestamp untouched; the status too.
  auto labelled =
    patch(resets(), "ops", "r1", {{"metadata", {{"labels", {{"restored", "yes"}}}}}},
          patch_type::merge);
  EXPECT_EQ(labelled["metadata"]["deletionTimestamp"], stamp);
  patch(resets(), "ops", "r1", {{"status", {{"phase", "Restoring"}}}}, patch_type::merge,
        true);
  patch(resets(), "ops", "r1", {{"metadata", {{"finalizers", {"vigil.dev/b"}}}}},
        patch_type::merge);
  EXPECT_TRUE(exists(resets(), "ops", "r1"));
  const auto version = store.current_resource_version();
  patch(resets(), "ops", "r1", {{"metadata", {{"finalizers", json::array()}}}},
        patch_type::merge);
  EXPECT_FALSE(exists(resets(), "ops", "r1"));
  EXPECT_EQ(types_of(watch(resets(), "ops", version)), strings{"DELETED:r1"});
}

TEST_F(kube_store, finalizers_are_added_freely_before_a_deletion) {
  create(resets(), "ops", {{"metadata", {{"name", "r2"}}}});
  auto added =
    patch(resets(), "ops", "r2", {{"metadata", {{"finalizers", {"vigil.dev/a"}}}}},
          patch_type::merge);
  EXPECT_EQ(added["metadata"]["finalizers"], json::array({"vigil.dev/a"}));
  // Emptying the list of an object nobody deletes leaves it in place.
  patch(resets(), "ops", "r2", {{"metadata", {{"finalizers", nullptr}}}},
        patch_type::merge);
  EXPECT_TRUE(exists(resets(), "ops", "r2"));
  EXPECT_TRUE(store.remove(resets(), "ops", "r2", {}).ok());
  EXPECT_FALSE(exists(resets(), "ops", "r2"));
}

// A pod with finalizers outlives its kubelet: the grace period ends, the pod
// stays until its last finalizer goes (and a pod in its grace period whose
// finalizers go first still waits for its kubelet).
TEST_F(kube_store, a_pod_with_finalizers_stays_until_they_are_removed) {
  auto pod = pod_object("tracked", "node-a");
  pod["metadata"]["finalizers"] = {"batch.kubernetes.io/job-tracking"};
  create(pods(), "ops", pod);
  store.remove(pods(), "ops", "tracked", {});
  EXPECT_EQ(get(pods(), "ops", "tracked")["metadata"]["deletionGracePeriodSeconds"], 30);
  EXPECT_TRUE(store.finish_pod_deletion("ops", "tracked"));
  auto waiting = get(pods(), "ops", "tracked");
  EXPECT_EQ(waiting["metadata"]["deletionGracePeriodSeconds"], 0);
  EXPECT_FALSE(store.finish_pod_deletion("ops", "tracked"));
  patch(pods(), "ops", "tracked", {{"metadata", {{"finalizers", nullptr}}}},
        patch_type::merge);
  EXPECT_FALSE(exists(pods(), "ops", "tracked"));

  pod["metadata"]["name"] = "in-grace";
  create(pods(), "ops", pod);
  store.remove(pods(), "ops", "in-grace", {});
  patch(pods(), "ops", "in-grace", {{"metadata", {{"finalizers", nullptr}}}},
        patch_type::merge);
  EXPECT_TRUE(exists(pods(), "ops", "in-grace"));
  EXPECT_TRUE(store.finish_pod_deletion("ops", "in-grace"));
  EXPECT_FALSE(exists(pods(), "ops", "in-grace"));

  // Force deletion (grace 0) of a pod with finalizers: marked, kept.
  pod["metadata"]["name"] = "forced";
  create(pods(), "ops", pod);
  auto forced = store.remove(pods(), "ops", "forced", {std::int64_t{0}, {}, {}, {}});
  ASSERT_TRUE(forced.ok());
  EXPECT_EQ((*forced.value)["metadata"]["deletionGracePeriodSeconds"], 0);
  EXPECT_TRUE(exists(pods(), "ops", "forced"));
}

TEST_F(kube_store, background_deletion_removes_dependents) {
  auto owner = create(configmaps(), "gpu", {{"metadata", {{"name", "owner"}}}});
  create(
    configmaps(), "gpu",
    {{"metadata", {{"name", "child"}, {"ownerReferences", {owner_reference(owner)}}}}});
  auto pod = pod_object("pod", "node-a");
  pod["metadata"]["ownerReferences"] = {owner_reference(owner)};
  create(pods(), "gpu", pod);
  store.remove(configmaps(), "gpu", "owner", {});
  EXPECT_FALSE(exists(configmaps(), "gpu", "owner"));
  EXPECT_FALSE(exists(configmaps(), "gpu", "child"));
  EXPECT_TRUE(get(pods(), "gpu", "pod")["metadata"].contains("deletionTimestamp"));
}

TEST_F(kube_store, dependents_with_another_live_owner_are_kept) {
  auto first = create(configmaps(), "gpu", {{"metadata", {{"name", "first"}}}});
  auto second = create(configmaps(), "gpu", {{"metadata", {{"name", "second"}}}});
  create(configmaps(), "gpu",
         {{"metadata",
           {{"name", "shared"},
            {"ownerReferences", {owner_reference(first), owner_reference(second)}}}}});
  store.remove(configmaps(), "gpu", "first", {});
  auto shared = get(configmaps(), "gpu", "shared");
  ASSERT_EQ(shared["metadata"]["ownerReferences"].size(), 1u);
  EXPECT_EQ(shared["metadata"]["ownerReferences"][0]["name"], "second");
}

TEST_F(kube_store, orphan_deletion_keeps_dependents_without_the_reference) {
  auto owner = create(configmaps(), "gpu", {{"metadata", {{"name", "owner"}}}});
  create(
    configmaps(), "gpu",
    {{"metadata", {{"name", "child"}, {"ownerReferences", {owner_reference(owner)}}}}});
  delete_options orphan;
  orphan.propagation = propagation_policy::orphan;
  store.remove(configmaps(), "gpu", "owner", orphan);
  EXPECT_FALSE(exists(configmaps(), "gpu", "owner"));
  EXPECT_FALSE(get(configmaps(), "gpu", "child")["metadata"].contains("ownerReferences"));
}

TEST_F(kube_store, jobs_orphan_their_pods_by_default) {
  auto job =
    create(jobs(), "ops", {{"metadata", {{"name", "drain"}}}, {"spec", json::object()}});
  auto pod = pod_object("drain-abcde", "node-a");
  pod["metadata"]["ownerReferences"] = {owner_reference(job, true)};
  create(pods(), "ops", pod);
  store.remove(jobs(), "ops", "drain", {});
  auto kept = get(pods(), "ops", "drain-abcde");
  EXPECT_FALSE(kept["metadata"].contains("deletionTimestamp"));
  EXPECT_FALSE(kept["metadata"].contains("ownerReferences"));

  job =
    create(jobs(), "ops", {{"metadata", {{"name", "drain2"}}}, {"spec", json::object()}});
  pod["metadata"]["name"] = "drain2-abcde";
  pod["metadata"]["ownerReferences"] = {owner_reference(job, true)};
  create(pods(), "ops", pod);
  delete_options background;
  background.propagation = propagation_policy::background;
  store.remove(jobs(), "ops", "drain2", background);
  EXPECT_FALSE(exists(jobs(), "ops", "drain2"));
  EXPECT_TRUE(
    get(pods(), "ops", "drain2-abcde")["metadata"].contains("deletionTimestamp"));
}

TEST_F(kube_store, foreground_deletion_waits_for_blocking_dependents) {
  auto job = create(jobs(), "ops",
                    {{"metadata", {{"name", "burn-in"}}}, {"spec", json::object()}});
  auto pod = pod_object("burn-in-x", "node-a");
  pod["metadata"]["ownerReferences"] = {owner_reference(job, true)};
  create(pods(), "ops", pod);
  delete_options foreground;
  foreground.propagation = propagation_policy::foreground;
  auto deleted = store.remove(jobs(), "ops", "burn-in", foreground);
  ASSERT_TRUE(deleted.ok());
  auto waiting = get(jobs(), "ops", "burn-in");
  EXPECT_TRUE(waiting["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(waiting["metadata"]["finalizers"], json::array({"foregroundDeletion"}));
  EXPECT_TRUE(get(pods(), "ops", "burn-in-x")["metadata"].contains("deletionTimestamp"));
  store.finish_pod_deletion("ops", "burn-in-x");
  EXPECT_FALSE(exists(jobs(), "ops", "burn-in"));
}

TEST_F(kube_store, foreground_deletion_without_dependents_is_immediate) {
  create(configmaps(), "gpu", {{"metadata", {{"name", "alone"}}}});
  delete_options foreground;
  foreground.propagation = propagation_policy::foreground;
  EXPECT_TRUE(store.remove(configmaps(), "gpu", "alone", foreground).ok());
  EXPECT_FALSE(exists(configmaps(), "gpu", "alone"));
}

TEST_F(kube_store, deleting_a_namespace_removes_its_contents) {
  create(type("namespaces"), "", {{"metadata", {{"name", "gpu"}}}});
  create(configmaps(), "gpu", {{"metadata", {{"name", "c"}}}});
  create(configmaps(), "other", {{"metadata", {{"name", "c"}}}});
  create(pods(), "gpu", pod_object("p", "node-a"));
  store.remove(type("namespaces"), "", "gpu", {});
  EXPECT_FALSE(exists(configmaps(), "gpu", "c"));
  EXPECT_FALSE(exists(pods(), "gpu", "p"));
  EXPECT_TRUE(exists(configmaps(), "other", "c"));
}

TEST(kube_delete_options, read_from_json) {
  api_status error;
  auto options = delete_options_from_json(
    {{"kind", "DeleteOptions"},
     {"gracePeriodSeconds", 5},
     {"propagationPolicy", "Foreground"},
     {"preconditions", {{"resourceVersion", "7"}, {"uid", "u"}}}},
    error);
  ASSERT_TRUE(options);
  EXPECT_EQ(options->grace_period_seconds, 5);
  EXPECT_EQ(options->propagation, propagation_policy::foreground);
  EXPECT_EQ(options->precondition_resource_version, "7");
  EXPECT_EQ(options->precondition_uid, "u");
  EXPECT_EQ(delete_options_from_json({{"orphanDependents", true}}, error)->propagation,
            propagation_policy::orphan);
  EXPECT_FALSE(delete_options_from_json(nullptr, error)->propagation);
  EXPECT_FALSE(delete_options_from_json({{"propagationPolicy", "Sideways"}}, error));
  EXPECT_EQ(error.code, 400);
  EXPECT_FALSE(delete_options_from_json({{"gracePeriodSeconds", "soon"}}, error));
}

// --- eviction and disruption budgets

TEST_F(kube_store, eviction_is_refused_when_a_budget_allows_no_disruption) {
  create(pods(), "train", pod_object("w0", "node-a", {{"app", "train"}}));
  create(pods(), "train", pod_object("w1", "node-b", {{"app", "train"}}));
  create(budgets(), "train", budget("train-pdb", {{"app", "train"}}, "minAvailable", 2));
  auto pdb = get(budgets(), "train", "train-pdb");
  EXPECT_EQ(pdb["status"]["currentHealthy"], 2);
  EXPECT_EQ(pdb["status"]["desiredHealthy"], 2);
  EXPECT_EQ(pdb["status"]["expectedPods"], 2);
  EXPECT_EQ(pdb["status"]["disruptionsAllowed"], 0);
  EXPECT_EQ(pdb["status"]["conditions"][0]["reason"], "InsufficientPods");

  auto refused = store.evict("train", "w0",
                             {{"apiVersion", "policy/v1"},
                              {"kind", "Eviction"},
                              {"metadata", {{"name", "w0"}, {"namespace", "train"}}}});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error.code, 429);
  EXPECT_EQ(refused.error.reason, "TooManyRequests");
  EXPECT_EQ(refused.error.message,
            "Cannot evict pod as it would violate the pod's disruption budget.");
  EXPECT_EQ(refused.error.details["causes"][0]["reason"], "DisruptionBudget");
  EXPECT_EQ(refused.error.details["causes"][0]["message"],
            "The disruption budget train-pdb needs 2 healthy pods and has 2 currently");
  EXPECT_FALSE(get(pods(), "train", "w0")["metadata"].contains("deletionTimestamp"));
}

TEST_F(kube_store, eviction_deletes_gracefully_and_updates_the_budget) {
  create(pods(), "train", pod_object("w0", "node-a", {{"app", "train"}}));
  create(pods(), "train", pod_object("w1", "node-b", {{"app", "train"}}));
  create(budgets(), "train", budget("train-pdb", {{"app", "train"}}, "minAvailable", 1));
  EXPECT_EQ(get(budgets(), "train", "train-pdb")["status"]["disruptionsAllowed"], 1);
  auto evicted = store.evict(
    "train", "w0",
    {{"deleteOptions", {{"gracePeriodSeconds", 15}}}, {"metadata", {{"name", "w0"}}}});
  ASSERT_TRUE(evicted.ok()) << evicted.error.message;
  EXPECT_EQ(*evicted.value, (json{{"kind", "Status"},
                                  {"apiVersion", "v1"},
                                  {"metadata", json::object()},
                                  {"status", "Success"},
                                  {"code", 201}}));
  auto pod = get(pods(), "train", "w0");
  EXPECT_EQ(pod["metadata"]["deletionGracePeriodSeconds"], 15);
  auto pdb = get(budgets(), "train", "train-pdb");
  EXPECT_EQ(pdb["status"]["currentHealthy"], 1);
  EXPECT_EQ(pdb["status"]["disruptionsAllowed"], 0);
  EXPECT_EQ(store.evict("train", "w1", json::object()).error.code, 429);
  // The terminating pod may be evicted again; its budget is not consulted.
  EXPECT_TRUE(store.evict("train", "w0", json::object()).ok());
}

TEST_F(kube_store, max_unavailable_budgets_allow_that_many_disruptions) {
  for (const char* name : {"a", "b", "c"})
    create(pods(), "train", pod_object(name, "node-a", {{"app", "train"}}));
  create(budgets(), "train", budget("pdb", {{"app", "train"}}, "maxUnavailable", 1));
  EXPECT_EQ(get(budgets(), "train", "pdb")["status"]["desiredHealthy"], 2);
  EXPECT_TRUE(store.evict("train", "a", json::object()).ok());
  EXPECT_EQ(store.evict("train", "b", json::object()).error.code, 429);
  store.finish_pod_deletion("train", "a");
  // With a pod gone, the budget's expected count shrinks with it.
  EXPECT_EQ(get(budgets(), "train", "pdb")["status"]["disruptionsAllowed"], 1);
}

TEST_F(kube_store, percentage_budgets_round_up) {
  for (const char* name : {"a", "b", "c", "d"})
    create(pods(), "train", pod_object(name, "node-a", {{"app", "train"}}));
  create(budgets(), "train", budget("min", {{"app", "train"}}, "minAvailable", "50%"));
  auto pdb = get(budgets(), "train", "min");
  EXPECT_EQ(pdb["status"]["desiredHealthy"], 2);
  EXPECT_EQ(pdb["status"]["disruptionsAllowed"], 2);
  store.remove(budgets(), "train", "min", {});
  create(budgets(), "train", budget("max", {{"app", "train"}}, "maxUnavailable", "30%"));
  pdb = get(budgets(), "train", "max");
  EXPECT_EQ(pdb["status"]["desiredHealthy"], 2); // 30% of 4 rounds up to 2 unavailable
  EXPECT_EQ(pdb["status"]["disruptionsAllowed"], 2);
  patch(budgets(), "train", "max", {{"spec", {{"maxUnavailable", "bogus"}}}},
        patch_type::merge);
  pdb = get(budgets(), "train", "max");
  EXPECT_EQ(pdb["status"]["disruptionsAllowed"], 0);
  EXPECT_EQ(pdb["status"]["conditions"][0]["reason"], "SyncFailed");
  EXPECT_EQ(pdb["status"]["observedGeneration"], 2);
}

TEST_F(kube_store, eviction_without_a_budget_or_of_unready_pods) {
  create(pods(), "train", pod_object("free", "node-a", {{"app", "other"}}));
  EXPECT_TRUE(store.evict("train", "free", json::object()).ok());
  auto pending = pod_object("pending", "node-a", {{"app", "train"}}, false);
  pending["status"]["phase"] = "Pending";
  create(pods(), "train", pending);
  create(pods(), "train", pod_object("ready", "node-a", {{"app", "train"}}));
  create(pods(), "train", pod_object("sick", "node-a", {{"app", "train"}}, false));
  create(budgets(), "train", budget("pdb", {{"app", "train"}}, "minAvailable", 1));
  EXPECT_TRUE(store.evict("train", "pending", json::object()).ok());
  // Unready pods may go while the budget is met (IfHealthyBudget).
  EXPECT_TRUE(store.evict("train", "sick", json::object()).ok());
  EXPECT_EQ(store.evict("train", "ready", json::object()).error.code, 429);
  EXPECT_EQ(store.evict("train", "missing", json::object()).error.code, 404);
  EXPECT_EQ(store.evict("train", "ready", {{"metadata", {{"name", "other"}}}}).error.code,
            400);
}

// The disruption controller's indexes: a relabelled pod leaves one budget and
// joins another, a budget whose selector changes is looked up by its new
// labels, and one with only matchExpressions (no pair to index by) is kept.
TEST_F(kube_store, budgets_follow_relabelled_pods_and_changed_selectors) {
  create(pods(), "train", pod_object("a", "node-a", {{"app", "train"}}));
  create(pods(), "train", pod_object("b", "node-a", {{"app", "serve"}}));
  create(budgets(), "train", budget("train", {{"app", "train"}}, "maxUnavailable", 1));
  create(budgets(), "train", budget("serve", {{"app", "serve"}}, "maxUnavailable", 1));
  auto any = budget("any", json::object(), "maxUnavailable", 1);
  any["spec"]["selector"] = {
    {"matchExpressions",
     json::array(
       {{{"key", "app"}, {"operator", "In"}, {"values", {"train", "serve"}}}})}};
  create(budgets(), "train", any);
  auto expected = [&](const char* name) {
    return get(budgets(), "train", name)["status"]["expectedPods"].get<int>();
  };
  EXPECT_EQ(expected("train"), 1);
  EXPECT_EQ(expected("serve"), 1);
  EXPECT_EQ(expected("any"), 2);
  ASSERT_TRUE(store
                .patch(pods(), "train", "a",
                       {{"metadata", {{"labels", {{"app", "serve"}}}}}},
                       patch_type::merge, false)
                .ok());
  EXPECT_EQ(expected("train"), 0);
  EXPECT_EQ(expected("serve"), 2);
  EXPECT_EQ(expected("any"), 2);
  // Two budgets select pod a now: eviction refuses, as the real server does.
  EXPECT_EQ(store.evict("train", "a", json::object()).error.code, 500);
  ASSERT_TRUE(store
                .patch(budgets(), "train", "train",
                       {{"spec", {{"selector", {{"matchLabels", {{"app", "serve"}}}}}}}},
                       patch_type::merge, false)
                .ok());
  EXPECT_EQ(expected("train"), 2);
  store.remove(pods(), "train", "b", {});
  store.finish_pod_deletion("train", "b");
  EXPECT_EQ(expected("train"), 1);
  EXPECT_EQ(expected("any"), 1);
}

TEST_F(kube_store, a_pod_under_two_budgets_cannot_be_evicted) {
  create(pods(), "train", pod_object("a", "node-a", {{"app", "train"}, {"team", "x"}}));
  create(budgets(), "train", budget("one", {{"app", "train"}}, "maxUnavailable", 1));
  create(budgets(), "train", budget("two", {{"team", "x"}}, "maxUnavailable", 1));
  EXPECT_EQ(store.evict("train", "a", json::object()).error.code, 500);
}

} // namespace
