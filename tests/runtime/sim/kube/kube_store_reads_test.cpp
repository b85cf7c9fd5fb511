// The object store's reads: label and field selectors, consistent list pages
// with continue tokens, and watch history (replay, scope, compaction, the
// window, change notification).
#include <gtest/gtest.h>

#include "runtime/sim/kube/kube_object_store.hpp"
#include "runtime/sim/kube/kube_selectors.hpp"
#include "tests/runtime/sim/kube/kube_object_store_fixture.hpp"

using namespace vigil::kube;
using namespace vigil::kube::test_support;

namespace {

// --- selectors

TEST_F(kube_store, label_selectors_support_every_operator) {
  create(pods(), "gpu",
         pod_object("a", "n1", {{"app", "dcgm"}, {"tier", "agent"}, {"rank", "3"}}));
  create(pods(), "gpu",
         pod_object("b", "n1", {{"app", "vigil"}, {"tier", "agent"}, {"rank", "7"}}));
  create(pods(), "gpu", pod_object("c", "n2", {{"app", "train"}}));
  auto select = [&](const std::string& selector) {
    list_options options;
    options.label_selector = selector;
    auto result = store.list(pods(), "gpu", options);
    EXPECT_TRUE(result.ok()) << selector << ": " << result.error.message;
    return result.ok() ? names_of(*result.value) : strings{};
  };
  EXPECT_EQ(select("app=dcgm"), strings{"a"});
  EXPECT_EQ(select("app==vigil"), strings{"b"});
  EXPECT_EQ(select("app!=dcgm"), (strings{"b", "c"}));
  EXPECT_EQ(select("app in (dcgm, train)"), (strings{"a", "c"}));
  EXPECT_EQ(select("app notin (dcgm)"), (strings{"b", "c"}));
  EXPECT_EQ(select("tier"), (strings{"a", "b"}));
  EXPECT_EQ(select("!tier"), strings{"c"});
  EXPECT_EQ(select("rank>5"), strings{"b"});
  EXPECT_EQ(select("rank<5"), strings{"a"});
  EXPECT_EQ(select("tier=agent,app!=vigil"), strings{"a"});
  EXPECT_EQ(select(""), (strings{"a", "b", "c"}));
}

TEST_F(kube_store, malformed_label_selectors_are_bad_requests_naming_the_term) {
  for (const std::string bad : {"env in (a,b", "app=ok,,tier", "bad key=x", "x in ()",
                                "rank>high", "a=b c", "app%x"}) {
    list_options options;
    options.label_selector = bad;
    auto result = store.list(pods(), "gpu", options);
    ASSERT_FALSE(result.ok()) << bad;
    EXPECT_EQ(result.error.code, 400) << bad;
    EXPECT_EQ(result.error.reason, "BadRequest");
    EXPECT_NE(result.error.message.find("requirement"), std::string::npos);
  }
  list_options options;
  options.label_selector = "app=ok,env in (a,b";
  EXPECT_NE(store.list(pods(), "", options).error.message.find("env in (a,b"),
            std::string::npos);
}

TEST_F(kube_store, field_selector_picks_pods_by_node_and_phase) {
  create(pods(), "gpu", pod_object("a", "node-1"));
  create(pods(), "gpu", pod_object("b", "node-2"));
  create(pods(), "ops", pod_object("c", "node-1"));
  auto failed = pod_object("d", "node-1");
  failed["status"]["phase"] = "Failed";
  create(pods(), "ops", failed);
  create(pods(), "ops", {{"metadata", {{"name", "pending"}}}, {"spec", json::object()}});
  auto select = [&](const std::string& ns, const std::string& selector) {
    list_options options;
    options.field_selector = selector;
    auto result = store.list(pods(), ns, options);
    EXPECT_TRUE(result.ok()) << result.error.message;
    return result.ok() ? names_of(*result.value) : strings{};
  };
  EXPECT_EQ(select("", "spec.nodeName=node-1"), (strings{"a", "c", "d"}));
  EXPECT_EQ(
    select("", "spec.nodeName=node-1,status.phase!=Failed,status.phase!=Succeeded"),
    (strings{"a", "c"}));
  EXPECT_EQ(select("ops", "spec.nodeName==node-1"), (strings{"c", "d"}));
  EXPECT_EQ(select("", "spec.nodeName="), strings{"pending"});
  EXPECT_EQ(select("", "metadata.name=b"), strings{"b"});
  EXPECT_EQ(select("", "metadata.namespace=gpu"), (strings{"a", "b"}));
  list_options malformed;
  malformed.field_selector = "spec.nodeName";
  auto result = store.list(pods(), "", malformed);
  EXPECT_EQ(result.error.code, 400);
  EXPECT_NE(result.error.message.find("spec.nodeName"), std::string::npos);
}

TEST(kube_selectors, field_values_render_like_the_server) {
  json object = {{"spec", {{"unschedulable", true}, {"replicas", 3}}},
                 {"involvedObject", {{"name", "node-a"}}}};
  EXPECT_EQ(field_value(object, "spec.unschedulable"), "true");
  EXPECT_EQ(field_value(object, "spec.replicas"), "3");
  EXPECT_EQ(field_value(object, "involvedObject.name"), "node-a");
  EXPECT_EQ(field_value(object, "spec.missing.deeper"), "");
  api_status error;
  auto escaped = field_selector::parse("metadata.name=a\\,b", error);
  ASSERT_TRUE(escaped);
  EXPECT_EQ(escaped->requirements.at(0).value, "a,b");
}

TEST(kube_selectors, label_selector_objects_match_like_pdb_selectors) {
  api_status error;
  auto selector = label_selector::from_object(
    {{"matchLabels", {{"app", "train"}}},
     {"matchExpressions",
      {{{"key", "tier"}, {"operator", "In"}, {"values", {"gpu", "cpu"}}},
       {{"key", "canary"}, {"operator", "DoesNotExist"}}}}},
    error);
  ASSERT_TRUE(selector);
  EXPECT_TRUE(selector->matches_labels({{"app", "train"}, {"tier", "gpu"}}));
  EXPECT_FALSE(
    selector->matches_labels({{"app", "train"}, {"tier", "gpu"}, {"canary", "1"}}));
  EXPECT_FALSE(selector->matches_labels({{"app", "train"}}));
  EXPECT_TRUE(label_selector::from_object(json::object(), error)->matches_labels({}));
  EXPECT_FALSE(label_selector::from_object(nullptr, error)->matches_labels({}));
  EXPECT_FALSE(label_selector::from_object(
    {{"matchExpressions", {{{"key", "a"}, {"operator", "Near"}}}}}, error));
  EXPECT_EQ(error.code, 400);
}

// --- pagination

TEST_F(kube_store, pages_are_a_consistent_snapshot_across_changes) {
  for (const char* name : {"p1", "p2", "p3", "p4", "p5"})
    create(pods(), "gpu", pod_object(name, "n1"));
  list_options options;
  options.limit = 2;
  auto first = *store.list(pods(), "gpu", options).value;
  EXPECT_EQ(names_of(first), (strings{"p1", "p2"}));
  EXPECT_EQ(first["metadata"]["remainingItemCount"], 3);
  const auto snapshot = first["metadata"]["resourceVersion"];

  // Changes between pages do not show in later pages of the same list.
  store.remove(pods(), "gpu", "p4", {std::int64_t{0}, {}, {}, {}});
  create(pods(), "gpu", pod_object("p35", "n1"));
  patch(pods(), "gpu", "p3", {{"metadata", {{"labels", {{"late", "yes"}}}}}},
        patch_type::merge);

  options.continue_token = first["metadata"]["continue"];
  auto second = *store.list(pods(), "gpu", options).value;
  EXPECT_EQ(names_of(second), (strings{"p3", "p4"}));
  // Counted in the list's snapshot, as its pages are.
  EXPECT_EQ(second["metadata"]["remainingItemCount"], 1);
  EXPECT_FALSE(second["items"][0]["metadata"]["labels"].contains("late"));
  EXPECT_EQ(second["metadata"]["resourceVersion"], snapshot);
  options.continue_token = second["metadata"]["continue"];
  auto third = *store.list(pods(), "gpu", options).value;
  EXPECT_EQ(names_of(third), strings{"p5"});
  EXPECT_FALSE(third["metadata"].contains("continue"));

  auto fresh = *store.list(pods(), "gpu", {}).value;
  EXPECT_EQ(names_of(fresh), (strings{"p1", "p2", "p3", "p35", "p5"}));
}

TEST_F(kube_store, pagination_honours_selectors_and_rejects_bad_tokens) {
  for (int i = 0; i < 6; ++i)
    create(pods(), "gpu", pod_object("p" + std::to_string(i), i % 2 ? "odd" : "even"));
  list_options options;
  options.limit = 2;
  options.field_selector = "spec.nodeName=odd";
  auto first = *store.list(pods(), "", options).value;
  EXPECT_EQ(names_of(first), (strings{"p1", "p3"}));
  // As the API server: with a selector the remaining count is unknown.
  EXPECT_FALSE(first["metadata"].contains("remainingItemCount"));
  options.continue_token = first["metadata"]["continue"];
  EXPECT_EQ(names_of(*store.list(pods(), "", options).value), strings{"p5"});

  options.continue_token = "not-a-token";
  EXPECT_EQ(store.list(pods(), "", options).error.code, 400);

  options.continue_token = first["metadata"]["continue"];
  create(pods(), "gpu", pod_object("later", "odd"));
  store.compact(store.current_resource_version());
  auto expired = store.list(pods(), "", options);
  EXPECT_EQ(expired.error.code, 410);
  EXPECT_EQ(expired.error.reason, "Expired");
}

// --- watch

TEST_F(kube_store, watch_replays_changes_after_a_resource_version) {
  create(nodes(), "", node_object("node-a"));
  const auto start = store.current_resource_version();
  create(nodes(), "", node_object("node-b"));
  create(pods(), "gpu", pod_object("p", "node-a"));
  patch(nodes(), "", "node-a", {{"spec", {{"unschedulable", true}}}}, patch_type::merge);
  store.remove(nodes(), "", "node-b", {});
  auto events = watch(nodes(), "", start);
  EXPECT_EQ(types_of(events),
            (strings{"ADDED:node-b", "MODIFIED:node-a", "DELETED:node-b"}));
  EXPECT_EQ(events[0].resource_version, 2u);
  EXPECT_EQ(events[1].object["spec"]["unschedulable"], true);
  EXPECT_EQ(events[2].resource_version, 5u);
  EXPECT_EQ(events[2].object["metadata"]["resourceVersion"], "5");
  EXPECT_EQ(events[2].object["kind"], "Node");
  EXPECT_TRUE(watch(nodes(), "", store.current_resource_version()).empty());
}

TEST_F(kube_store, watch_from_zero_starts_with_the_current_state) {
  create(pods(), "gpu", pod_object("a", "n1"));
  create(pods(), "ops", pod_object("b", "n1"));
  store.remove(pods(), "gpu", "a", {std::int64_t{0}, {}, {}, {}});
  create(pods(), "gpu", pod_object("c", "n1"));
  auto all = watch(pods(), "", 0);
  EXPECT_EQ(types_of(all), (strings{"ADDED:c", "ADDED:b"}));
  EXPECT_EQ(all[0].resource_version, 4u);
  EXPECT_EQ(types_of(watch(pods(), "ops", 0)), strings{"ADDED:b"});
}

TEST_F(kube_store, watch_scopes_by_namespace_and_selector) {
  create(pods(), "gpu", pod_object("a", "n1", {{"app", "train"}}));
  create(pods(), "ops", pod_object("b", "n1", {{"app", "train"}}));
  list_options selectors;
  selectors.label_selector = "app=train";
  const auto start = store.current_resource_version();
  patch(pods(), "gpu", "a", {{"metadata", {{"labels", {{"app", "idle"}}}}}},
        patch_type::merge);
  patch(pods(), "gpu", "a", {{"metadata", {{"labels", {{"app", "train"}}}}}},
        patch_type::merge);
  patch(pods(), "ops", "b", {{"metadata", {{"annotations", {{"x", "y"}}}}}},
        patch_type::merge);
  // Leaving the selection reads as DELETED, entering it as ADDED.
  auto events = watch(pods(), "gpu", start, selectors);
  EXPECT_EQ(types_of(events), (strings{"DELETED:a", "ADDED:a"}));
  EXPECT_EQ(events[0].object["metadata"]["labels"]["app"], "train");
  EXPECT_EQ(events[0].object["metadata"]["resourceVersion"], std::to_string(start + 1));
  EXPECT_EQ(types_of(watch(pods(), "", start, selectors)),
            (strings{"DELETED:a", "ADDED:a", "MODIFIED:b"}));
  list_options bad;
  bad.label_selector = "a in (";
  api_status error;
  EXPECT_FALSE(store.changes_since(pods(), "", start, bad, error));
  EXPECT_EQ(error.code, 400);
}

TEST_F(kube_store, watch_from_a_compacted_version_is_gone) {
  create(nodes(), "", node_object("node-a"));
  create(nodes(), "", node_object("node-b"));
  create(nodes(), "", node_object("node-c"));
  store.compact(2);
  EXPECT_EQ(types_of(watch(nodes(), "", 2)), strings{"ADDED:node-c"});
  api_status error;
  EXPECT_FALSE(store.changes_since(nodes(), "", 1, {}, error));
  EXPECT_EQ(error.code, 410);
  EXPECT_EQ(error.reason, "Expired");
  EXPECT_EQ(error.message, "too old resource version: 1 (2)");
  EXPECT_EQ(watch(nodes(), "", 0).size(), 3u);
}

TEST(kube_store_window, versions_beyond_the_window_are_gone) {
  object_store store{3};
  const auto& nodes = *store.find_type("", "v1", "nodes");
  for (const char* name : {"a", "b", "c", "d", "e"})
    store.create(nodes, "", {{"metadata", {{"name", name}}}});
  api_status error;
  EXPECT_FALSE(store.changes_since(nodes, "", 1, {}, error));
  EXPECT_EQ(error.code, 410);
  auto kept = store.changes_since(nodes, "", 2, {}, error);
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->size(), 3u);
}

TEST_F(kube_store, on_change_fires_once_per_changing_operation) {
  int calls = 0;
  store.on_change([&] { ++calls; });
  create(nodes(), "", node_object("node-a"));
  EXPECT_EQ(calls, 1);
  store.get(nodes(), "", "node-a");
  store.create(nodes(), "", node_object("node-a"));
  EXPECT_EQ(calls, 1);
  json owner = create(configmaps(), "gpu", {{"metadata", {{"name", "owner"}}}});
  for (const char* name : {"d1", "d2"})
    create(
      configmaps(), "gpu",
      {{"metadata", {{"name", name}, {"ownerReferences", {owner_reference(owner)}}}}});
  calls = 0;
  store.remove(configmaps(), "gpu", "owner", {});
  EXPECT_EQ(calls, 1);
}

} // namespace
