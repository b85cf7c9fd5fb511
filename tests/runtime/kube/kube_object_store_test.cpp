// The object store behind the Kubernetes API test server: resourceVersions,
// conflicts, selectors, pagination, watch history, patches, graceful
// deletion, owner references and PodDisruptionBudgets.
#include <gtest/gtest.h>

#include <algorithm>

#include "runtime/kube/kube_object_store.hpp"
#include "runtime/kube/kube_patch.hpp"
#include "runtime/kube/kube_selectors.hpp"

using namespace vigil::kube;

namespace {

constexpr std::int64_t may_first_2024 = 1714521600; // 2024-05-01T00:00:00Z

json node_object(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", {{"kubernetes.io/hostname", name}}}}},
          {"spec", json::object()},
          {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

json pod_object(const std::string& name, const std::string& node_name,
                json labels = json::object(), bool ready = true) {
  return {
    {"metadata", {{"name", name}, {"labels", std::move(labels)}}},
    {"spec",
     {{"nodeName", node_name},
      {"containers", {{{"name", "main"}, {"image", "busybox"}}}}}},
    {"status",
     {{"phase", "Running"},
      {"conditions", {{{"type", "Ready"}, {"status", ready ? "True" : "False"}}}}}}};
}

json owner_reference(const json& owner, bool block = false) {
  json ref = {{"apiVersion", owner["apiVersion"]},
              {"kind", owner["kind"]},
              {"name", owner["metadata"]["name"]},
              {"uid", owner["metadata"]["uid"]}};
  if (block)
    ref["blockOwnerDeletion"] = true;
  return ref;
}

std::vector<std::string> names_of(const json& list) {
  std::vector<std::string> names;
  for (const auto& item : list["items"])
    names.push_back(item["metadata"]["name"].get<std::string>());
  return names;
}

std::vector<std::string> types_of(const std::vector<watch_event>& events) {
  std::vector<std::string> types;
  for (const auto& event : events)
    types.push_back(event.type + ":"
                    + event.object["metadata"]["name"].get<std::string>());
  return types;
}

using strings = std::vector<std::string>;

class kube_store : public ::testing::Test {
protected:
  kube_store() {
    store.set_clock([this] { return clock; });
    store.register_type(gpu_resets);
  }

  const resource_type& type(const std::string& plural, const std::string& group = "") {
    const auto* found =
      store.find_type(group, group == "vigil.dev" ? "v1alpha1" : "v1", plural);
    EXPECT_NE(found, nullptr) << plural;
    return *found;
  }
  const resource_type& nodes() { return type("nodes"); }
  const resource_type& pods() { return type("pods"); }
  const resource_type& configmaps() { return type("configmaps"); }
  const resource_type& budgets() { return type("poddisruptionbudgets", "policy"); }
  const resource_type& jobs() { return type("jobs", "batch"); }
  const resource_type& resets() { return type("gpuresets", "vigil.dev"); }

  json create(const resource_type& t, const std::string& ns, json object) {
    auto result = store.create(t, ns, std::move(object));
    EXPECT_TRUE(result.ok()) << result.error.message;
    return result.ok() ? *result.value : json();
  }
  json get(const resource_type& t, const std::string& ns, const std::string& name) {
    auto result = store.get(t, ns, name);
    EXPECT_TRUE(result.ok()) << result.error.message;
    return result.ok() ? *result.value : json();
  }
  json patch(const resource_type& t, const std::string& ns, const std::string& name,
             const json& body, patch_type kind, bool status = false) {
    auto result = store.patch(t, ns, name, body, kind, status);
    EXPECT_TRUE(result.ok()) << result.error.message;
    return result.ok() ? *result.value : json();
  }
  bool exists(const resource_type& t, const std::string& ns, const std::string& name) {
    return store.get(t, ns, name).ok();
  }
  std::vector<watch_event> watch(const resource_type& t, const std::string& ns,
                                 std::uint64_t from, list_options selectors = {}) {
    api_status error;
    auto events = store.changes_since(t, ns, from, selectors, error);
    EXPECT_TRUE(events.has_value()) << error.message;
    return events.value_or(std::vector<watch_event>{});
  }
  json budget(const std::string& name, json selector_labels, const char* field,
              json value) {
    return {{"metadata", {{"name", name}}},
            {"spec",
             {{"selector", {{"matchLabels", std::move(selector_labels)}}},
              {field, std::move(value)}}}};
  }

  std::int64_t clock = may_first_2024;
  resource_type gpu_resets{"vigil.dev", "v1alpha1", "gpuresets", "GPUReset",
                           true,        true,       {"gr"}};
  object_store store;
};

// --- types and create

TEST_F(kube_store, serves_the_builtin_types_and_registered_ones) {
  for (const auto& t : builtin_resource_types())
    EXPECT_NE(store.find_type(t.group, t.version, t.plural), nullptr) << t.plural;
  EXPECT_EQ(store.find_type("", "v1", "services"), nullptr);
  auto replaced = gpu_resets;
  replaced.short_names = {"gpr"};
  store.register_type(replaced);
  EXPECT_EQ(resets().short_names, strings{"gpr"});
  EXPECT_EQ(std::count_if(store.types().begin(), store.types().end(),
                          [](const resource_type& t) { return t.plural == "gpuresets"; }),
            1);
}

TEST_F(kube_store, create_fills_server_owned_metadata) {
  auto created = create(pods(), "gpu", pod_object("worker", "node-a"));
  const auto& meta = created["metadata"];
  EXPECT_EQ(created["apiVersion"], "v1");
  EXPECT_EQ(created["kind"], "Pod");
  EXPECT_EQ(meta["namespace"], "gpu");
  EXPECT_EQ(meta["resourceVersion"], "1");
  EXPECT_EQ(meta["generation"], 1);
  EXPECT_EQ(meta["creationTimestamp"], "2024-05-01T00:00:00Z");
  const auto uid = meta["uid"].get<std::string>();
  EXPECT_EQ(uid.size(), 36u);
  EXPECT_EQ(uid[14], '4');
  EXPECT_NE(uid, create(pods(), "gpu", pod_object("other", "node-a"))["metadata"]["uid"]);
  EXPECT_EQ(get(pods(), "gpu", "worker"), created);
}

TEST_F(kube_store, cluster_scoped_objects_ignore_the_namespace) {
  create(nodes(), "ignored", node_object("node-a"));
  auto node = get(nodes(), "", "node-a");
  EXPECT_FALSE(node["metadata"].contains("namespace"));
  EXPECT_TRUE(exists(nodes(), "anything", "node-a"));
}

TEST_F(kube_store, create_of_an_existing_name_is_already_exists) {
  create(nodes(), "", node_object("node-a"));
  auto again = store.create(nodes(), "", node_object("node-a"));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error.code, 409);
  EXPECT_EQ(again.error.reason, "AlreadyExists");
  EXPECT_EQ(again.error.message, "nodes \"node-a\" already exists");
  EXPECT_EQ(again.error.details["name"], "node-a");
  auto status = again.error.to_json();
  EXPECT_EQ(status["kind"], "Status");
  EXPECT_EQ(status["status"], "Failure");
  EXPECT_EQ(status["code"], 409);
}

TEST_F(kube_store, generate_name_appends_five_random_characters) {
  json job = {{"metadata", {{"generateName", "drain-"}}}, {"spec", json::object()}};
  auto first = create(jobs(), "ops", job)["metadata"]["name"].get<std::string>();
  auto second = create(jobs(), "ops", job)["metadata"]["name"].get<std::string>();
  EXPECT_EQ(first.rfind("drain-", 0), 0u);
  EXPECT_EQ(first.size(), 11u);
  EXPECT_NE(first, second);
  EXPECT_TRUE(exists(jobs(), "ops", second));
}

TEST_F(kube_store, create_rejects_malformed_objects) {
  auto not_object = store.create(pods(), "a", json::array());
  EXPECT_EQ(not_object.error.code, 400);
  auto wrong_kind =
    store.create(pods(), "a", {{"kind", "Node"}, {"metadata", {{"name", "x"}}}});
  EXPECT_EQ(wrong_kind.error.code, 400);
  auto wrong_group =
    store.create(jobs(), "a", {{"apiVersion", "v1"}, {"metadata", {{"name", "x"}}}});
  EXPECT_EQ(wrong_group.error.code, 400);
  auto nameless = store.create(pods(), "a", {{"metadata", json::object()}});
  EXPECT_EQ(nameless.error.code, 422);
  EXPECT_EQ(nameless.error.reason, "Invalid");
  EXPECT_EQ(nameless.error.details["causes"][0]["field"], "metadata.name");
  auto upper = store.create(pods(), "a", {{"metadata", {{"name", "Worker"}}}});
  EXPECT_EQ(upper.error.code, 422);
  auto other_ns =
    store.create(pods(), "a", {{"metadata", {{"name", "x"}, {"namespace", "b"}}}});
  EXPECT_EQ(other_ns.error.code, 400);
  auto no_ns = store.create(pods(), "", {{"metadata", {{"name", "x"}}}});
  EXPECT_EQ(no_ns.error.code, 400);
  EXPECT_EQ(store.current_resource_version(), 0u);
}

TEST_F(kube_store, system_namespaces_are_opt_in) {
  EXPECT_EQ(store.current_resource_version(), 0u);
  store.create_system_namespaces();
  auto list = store.list(type("namespaces"), "", {});
  EXPECT_EQ(names_of(*list.value),
            (strings{"default", "kube-node-lease", "kube-public", "kube-system"}));
  EXPECT_EQ(get(type("namespaces"), "", "default")["status"]["phase"], "Active");
  store.create_system_namespaces();
  EXPECT_EQ(store.current_resource_version(), 4u);
}

// --- resourceVersion, updates, conflicts

TEST_F(kube_store, resource_version_increases_per_change_and_lists_report_it) {
  create(nodes(), "", node_object("node-a"));
  create(nodes(), "", node_object("node-b"));
  auto node = get(nodes(), "", "node-a");
  node["metadata"]["labels"]["gpu"] = "h100";
  auto updated = store.update(nodes(), "", "node-a", node, false);
  ASSERT_TRUE(updated.ok());
  EXPECT_EQ((*updated.value)["metadata"]["resourceVersion"], "3");
  EXPECT_EQ(store.current_resource_version(), 3u);
  auto list = store.list(nodes(), "", {});
  EXPECT_EQ((*list.value)["kind"], "NodeList");
  EXPECT_EQ((*list.value)["apiVersion"], "v1");
  EXPECT_EQ((*list.value)["metadata"]["resourceVersion"], "3");
  EXPECT_EQ(names_of(*list.value), (strings{"node-a", "node-b"}));
  // An update that changes nothing writes nothing.
  auto same = store.update(nodes(), "", "node-a", *updated.value, false);
  EXPECT_EQ((*same.value)["metadata"]["resourceVersion"], "3");
  EXPECT_EQ(store.current_resource_version(), 3u);
}

TEST_F(kube_store, stale_update_is_a_conflict) {
  auto node = create(nodes(), "", node_object("node-a"));
  patch(nodes(), "", "node-a", {{"spec", {{"unschedulable", true}}}}, patch_type::merge);
  node["metadata"]["labels"]["x"] = "y";
  auto stale = store.update(nodes(), "", "node-a", node, false);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.error.code, 409);
  EXPECT_EQ(stale.error.reason, "Conflict");
  EXPECT_EQ(stale.error.message,
            "Operation cannot be fulfilled on nodes \"node-a\": the object has been "
            "modified; please apply your changes to the latest version and try again");
  // Without a resourceVersion a built-in type takes the update unconditionally.
  node["metadata"].erase("resourceVersion");
  EXPECT_TRUE(store.update(nodes(), "", "node-a", node, false).ok());
  // A stale resourceVersion in a patch is a conflict too.
  auto patched =
    store.patch(nodes(), "", "node-a", {{"metadata", {{"resourceVersion", "1"}}}},
                patch_type::merge, false);
  EXPECT_EQ(patched.error.code, 409);
}

TEST_F(kube_store, custom_resources_need_a_resource_version_to_update) {
  auto reset =
    create(resets(), "ops", {{"metadata", {{"name", "r1"}}}, {"spec", {{"gpu", 0}}}});
  reset["metadata"].erase("resourceVersion");
  auto result = store.update(resets(), "ops", "r1", reset, false);
  EXPECT_EQ(result.error.code, 422);
  reset["metadata"]["resourceVersion"] = "1";
  EXPECT_TRUE(store.update(resets(), "ops", "r1", reset, false).ok());
}

TEST_F(kube_store, update_checks_identity) {
  auto node = create(nodes(), "", node_object("node-a"));
  EXPECT_EQ(store.update(nodes(), "", "node-b", node, false).error.code, 404);
  create(nodes(), "", node_object("node-b"));
  EXPECT_EQ(store.update(nodes(), "", "node-b", node, false).error.code, 400);
  node["metadata"]["uid"] = "someone-else";
  EXPECT_EQ(store.update(nodes(), "", "node-a", node, false).error.code, 409);
}

TEST_F(kube_store, generation_follows_spec_changes_only) {
  create(nodes(), "", node_object("node-a"));
  auto labelled = patch(nodes(), "", "node-a", {{"metadata", {{"labels", {{"a", "b"}}}}}},
                        patch_type::merge);
  EXPECT_EQ(labelled["metadata"]["generation"], 1);
  auto cordoned = patch(nodes(), "", "node-a", {{"spec", {{"unschedulable", true}}}},
                        patch_type::merge);
  EXPECT_EQ(cordoned["metadata"]["generation"], 2);
  auto status = patch(nodes(), "", "node-a", {{"status", {{"phase", "Running"}}}},
                      patch_type::merge, true);
  EXPECT_EQ(status["metadata"]["generation"], 2);
}

// --- status subresource

TEST_F(kube_store, status_subresource_is_isolated) {
  auto node = create(nodes(), "", node_object("node-a"));
  node["spec"]["unschedulable"] = true;
  node["status"]["conditions"][0]["status"] = "False";
  auto main = store.update(nodes(), "", "node-a", node, false);
  EXPECT_EQ((*main.value)["spec"]["unschedulable"], true);
  EXPECT_EQ((*main.value)["status"]["conditions"][0]["status"], "True");

  auto status_update = *main.value;
  status_update["spec"]["unschedulable"] = false;
  status_update["metadata"]["labels"]["new"] = "label";
  status_update["status"]["conditions"][0]["status"] = "False";
  auto status = store.update(nodes(), "", "node-a", status_update, true);
  EXPECT_EQ((*status.value)["spec"]["unschedulable"], true);
  EXPECT_FALSE((*status.value)["metadata"]["labels"].contains("new"));
  EXPECT_EQ((*status.value)["status"]["conditions"][0]["status"], "False");

  auto ignored =
    patch(nodes(), "", "node-a", {{"status", {{"phase", "x"}}}}, patch_type::merge);
  EXPECT_FALSE(ignored["status"].contains("phase"));
  auto no_status = store.update(configmaps(), "", "x", json::object(), true);
  EXPECT_EQ(no_status.error.code, 404);
}

TEST_F(kube_store, custom_resources_start_without_status_and_write_it_through_status) {
  auto created = create(resets(), "ops",
                        {{"metadata", {{"name", "r1"}}},
                         {"spec", {{"node", "node-a"}}},
                         {"status", {{"phase", "Done"}}}});
  EXPECT_FALSE(created.contains("status"));
  auto status = patch(resets(), "ops", "r1", {{"status", {{"phase", "Resetting"}}}},
                      patch_type::merge, true);
  EXPECT_EQ(status["status"]["phase"], "Resetting");
  EXPECT_EQ(status["apiVersion"], "vigil.dev/v1alpha1");
  EXPECT_EQ(status["kind"], "GPUReset");
}

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
  EXPECT_EQ(first["metadata"]["remainingItemCount"], 1);
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

// --- patches

TEST_F(kube_store, every_patch_type_cordons_and_uncordons) {
  create(nodes(), "", node_object("node-a"));
  auto node = patch(nodes(), "", "node-a", {{"spec", {{"unschedulable", true}}}},
                    patch_type::strategic_merge);
  EXPECT_EQ(node["spec"]["unschedulable"], true);
  node = patch(nodes(), "", "node-a", {{"spec", {{"unschedulable", nullptr}}}},
               patch_type::merge);
  EXPECT_FALSE(node["spec"].contains("unschedulable"));
  node = patch(nodes(), "", "node-a",
               {{{"op", "add"}, {"path", "/spec/unschedulable"}, {"value", true}}},
               patch_type::json_patch);
  EXPECT_EQ(node["spec"]["unschedulable"], true);
  node = patch(nodes(), "", "node-a",
               {{{"op", "replace"}, {"path", "/spec/unschedulable"}, {"value", false}}},
               patch_type::json_patch);
  EXPECT_EQ(node["spec"]["unschedulable"], false);
}

TEST_F(kube_store, taints_are_replaced_whole_by_strategic_and_merge_patches) {
  auto node = node_object("node-a");
  node["spec"]["taints"] = {{{"key", "old"}, {"effect", "NoSchedule"}}};
  create(nodes(), "", node);
  json quarantine = {{"key", "vigil.dev/quarantine"},
                     {"value", "xid-79"},
                     {"effect", "NoExecute"},
                     {"timeAdded", "2024-05-01T00:00:00Z"}};
  auto patched = patch(nodes(), "", "node-a", {{"spec", {{"taints", {quarantine}}}}},
                       patch_type::strategic_merge);
  EXPECT_EQ(patched["spec"]["taints"], json::array({quarantine}));
  patched = patch(nodes(), "", "node-a",
                  {{{"op", "add"},
                    {"path", "/spec/taints/-"},
                    {"value", {{"key", "b"}, {"effect", "NoSchedule"}}}}},
                  patch_type::json_patch);
  EXPECT_EQ(patched["spec"]["taints"].size(), 2u);
  patched = patch(nodes(), "", "node-a", {{"spec", {{"taints", json::array()}}}},
                  patch_type::merge);
  EXPECT_TRUE(patched["spec"]["taints"].empty());
}

TEST_F(kube_store, labels_and_annotations_merge_and_null_removes) {
  auto node = node_object("node-a");
  node["metadata"]["labels"] = {{"keep", "1"}, {"drop", "1"}};
  node["metadata"]["annotations"] = {{"vigil.dev/state", "healthy"}};
  create(nodes(), "", node);
  for (auto kind : {patch_type::merge, patch_type::strategic_merge}) {
    auto patched = patch(nodes(), "", "node-a",
                         {{"metadata",
                           {{"labels", {{"drop", nullptr}, {"add", "2"}}},
                            {"annotations", {{"vigil.dev/state", "quarantined"}}}}}},
                         kind);
    EXPECT_EQ(patched["metadata"]["labels"], (json{{"keep", "1"}, {"add", "2"}}));
    EXPECT_EQ(patched["metadata"]["annotations"]["vigil.dev/state"], "quarantined");
    patch(nodes(), "", "node-a",
          {{"metadata", {{"labels", {{"drop", "1"}, {"add", nullptr}}}}}},
          patch_type::merge);
  }
  auto patched =
    patch(nodes(), "", "node-a",
          {{{"op", "remove"}, {"path", "/metadata/annotations/vigil.dev~1state"}},
           {{"op", "add"}, {"path", "/metadata/labels/gpu"}, {"value", "h100"}}},
          patch_type::json_patch);
  EXPECT_TRUE(patched["metadata"]["annotations"].empty());
  EXPECT_EQ(patched["metadata"]["labels"]["gpu"], "h100");
}

TEST_F(kube_store, conditions_merge_by_type_under_strategic_patches_only) {
  auto node = node_object("node-a");
  node["status"]["conditions"] = {{{"type", "Ready"}, {"status", "True"}},
                                  {{"type", "MemoryPressure"}, {"status", "False"}}};
  create(nodes(), "", node);
  json gpu_condition = {{"type", "GpuHealthy"}, {"status", "False"}, {"reason", "XID79"}};
  auto patched =
    patch(nodes(), "", "node-a",
          {{"status",
            {{"conditions", {gpu_condition, {{"type", "Ready"}, {"status", "False"}}}}}}},
          patch_type::strategic_merge, true);
  const auto& conditions = patched["status"]["conditions"];
  ASSERT_EQ(conditions.size(), 3u);
  EXPECT_EQ(conditions[0], (json{{"type", "Ready"}, {"status", "False"}}));
  EXPECT_EQ(conditions[1]["type"], "MemoryPressure");
  EXPECT_EQ(conditions[2], gpu_condition);
  auto removed = patch(
    nodes(), "", "node-a",
    {{"status", {{"conditions", {{{"type", "MemoryPressure"}, {"$patch", "delete"}}}}}}},
    patch_type::strategic_merge, true);
  EXPECT_EQ(removed["status"]["conditions"].size(), 2u);
  auto replaced =
    patch(nodes(), "", "node-a", {{"status", {{"conditions", {gpu_condition}}}}},
          patch_type::merge, true);
  EXPECT_EQ(replaced["status"]["conditions"], json::array({gpu_condition}));
}

TEST_F(kube_store, strategic_merge_on_a_custom_type_is_unsupported_media_type) {
  create(resets(), "ops", {{"metadata", {{"name", "r1"}}}});
  auto result = store.patch(resets(), "ops", "r1", {{"spec", {{"a", 1}}}},
                            patch_type::strategic_merge, false);
  EXPECT_EQ(result.error.code, 415);
  EXPECT_EQ(result.error.reason, "UnsupportedMediaType");
  EXPECT_TRUE(
    store.patch(resets(), "ops", "r1", {{"spec", {{"a", 1}}}}, patch_type::merge, false)
      .ok());
}

TEST_F(kube_store, failed_patches_change_nothing) {
  create(nodes(), "", node_object("node-a"));
  const auto version = store.current_resource_version();
  auto failed_test =
    store.patch(nodes(), "", "node-a",
                {{{"op", "test"}, {"path", "/spec/unschedulable"}, {"value", true}}},
                patch_type::json_patch, false);
  EXPECT_EQ(failed_test.error.code, 422);
  EXPECT_EQ(store.patch(nodes(), "", "node-a", json::array(), patch_type::merge, false)
              .error.code,
            400);
  EXPECT_EQ(store
              .patch(nodes(), "", "node-a", {{"metadata", {{"name", "other"}}}},
                     patch_type::merge, false)
              .error.code,
            400);
  EXPECT_EQ(store.patch(nodes(), "", "missing", json::object(), patch_type::merge, false)
              .error.code,
            404);
  EXPECT_EQ(store.current_resource_version(), version);
}

TEST(kube_patch, strategic_directives_and_merge_keys) {
  json pod = {
    {"metadata", {{"finalizers", {"a", "b"}}}},
    {"spec",
     {{"containers",
       {{{"name", "main"}, {"image", "v1"}, {"env", {{{"name", "A"}, {"value", "1"}}}}},
        {{"name", "side"}, {"image", "v1"}}}},
      {"tolerations", {{{"key", "x"}}}}}}};
  json change = {
    {"metadata", {{"finalizers", {"c"}}, {"$deleteFromPrimitiveList/finalizers", {"a"}}}},
    {"spec",
     {{"containers",
       {{{"name", "main"}, {"env", {{{"name", "B"}, {"value", "2"}}}}},
        {{"name", "side"}, {"$patch", "delete"}}}},
      {"tolerations", {{{"key", "y"}}}}}}};
  auto result = apply_patch(pod, change, patch_type::strategic_merge);
  ASSERT_TRUE(result.ok()) << result.error.message;
  const auto& merged = *result.value;
  EXPECT_EQ(merged["metadata"]["finalizers"], (json{"b", "c"}));
  ASSERT_EQ(merged["spec"]["containers"].size(), 1u);
  EXPECT_EQ(merged["spec"]["containers"][0]["image"], "v1");
  EXPECT_EQ(merged["spec"]["containers"][0]["env"].size(), 2u);
  EXPECT_EQ(merged["spec"]["tolerations"], (json{{{"key", "y"}}}));

  auto replaced = apply_patch(pod, {{"spec", {{"$patch", "replace"}, {"x", 1}}}},
                              patch_type::strategic_merge);
  EXPECT_EQ((*replaced.value)["spec"], (json{{"x", 1}}));
  auto retained = apply_patch({{"spec", {{"a", 1}, {"b", 2}}}},
                              {{"spec", {{"$retainKeys", {"a", "c"}}, {"c", 3}}}},
                              patch_type::strategic_merge);
  EXPECT_EQ((*retained.value)["spec"], (json{{"a", 1}, {"c", 3}}));
  auto keyless = apply_patch(pod, {{"spec", {{"containers", {{{"image", "v2"}}}}}}},
                             patch_type::strategic_merge);
  EXPECT_EQ(keyless.error.code, 422);
  EXPECT_EQ(strategic_list_strategy("spec.template.spec.containers").merge_key, "name");
  EXPECT_EQ(strategic_list_strategy("spec.taints").how, list_strategy::kind::replace);
}

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

TEST_F(kube_store, a_pod_under_two_budgets_cannot_be_evicted) {
  create(pods(), "train", pod_object("a", "node-a", {{"app", "train"}, {"team", "x"}}));
  create(budgets(), "train", budget("one", {{"app", "train"}}, "maxUnavailable", 1));
  create(budgets(), "train", budget("two", {{"team", "x"}}, "maxUnavailable", 1));
  EXPECT_EQ(store.evict("train", "a", json::object()).error.code, 500);
}

// --- objects as the API reference documents them

TEST_F(kube_store, decodes_objects_shaped_like_the_api_reference) {
  const auto node = json::parse(R"json({
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {
      "name": "gpu-node-17",
      "labels": {"kubernetes.io/hostname": "gpu-node-17",
                 "node-role.kubernetes.io/worker": "",
                 "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
      "annotations": {"node.alpha.kubernetes.io/ttl": "0"}
    },
    "spec": {
      "podCIDR": "10.244.3.0/24",
      "providerID": "kind://docker/kind/gpu-node-17",
      "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    },
    "status": {
      "capacity": {"cpu": "96", "memory": "2113533112Ki", "nvidia.com/gpu": "8", "pods": "110"},
      "allocatable": {"cpu": "95", "memory": "2113430712Ki", "nvidia.com/gpu": "8", "pods": "110"},
      "conditions": [
        {"type": "MemoryPressure", "status": "False", "lastHeartbeatTime": "2024-05-01T00:00:00Z",
         "lastTransitionTime": "2024-04-01T00:00:00Z", "reason": "KubeletHasSufficientMemory",
         "message": "kubelet has sufficient memory available"},
        {"type": "Ready", "status": "True", "lastHeartbeatTime": "2024-05-01T00:00:00Z",
         "lastTransitionTime": "2024-04-01T00:00:00Z", "reason": "KubeletReady",
         "message": "kubelet is posting ready status"}
      ],
      "addresses": [{"type": "InternalIP", "address": "10.0.3.17"},
                    {"type": "Hostname", "address": "gpu-node-17"}],
      "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
      "nodeInfo": {"machineID": "abc", "systemUUID": "def", "bootID": "ghi",
                   "kernelVersion": "6.1.0-18-amd64", "osImage": "Debian GNU/Linux 12 (bookworm)",
                   "containerRuntimeVersion": "containerd://1.7.13", "kubeletVersion": "v1.30.0",
                   "kubeProxyVersion": "v1.30.0", "operatingSystem": "linux", "architecture": "amd64"}
    }
  })json");
  const auto pod = json::parse(R"json({
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "trainer-0", "namespace": "ml", "labels": {"app": "trainer"},
                 "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "trainer",
                                      "uid": "7b2f9c3e-0000-4000-8000-000000000001",
                                      "controller": true, "blockOwnerDeletion": true}]},
    "spec": {
      "nodeName": "gpu-node-17",
      "restartPolicy": "Never",
      "terminationGracePeriodSeconds": 45,
      "containers": [{"name": "trainer", "image": "nvcr.io/nvidia/pytorch:24.04-py3",
                      "resources": {"limits": {"nvidia.com/gpu": "8"}},
                      "env": [{"name": "NCCL_DEBUG", "value": "INFO"}]}],
      "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    },
    "status": {
      "phase": "Running",
      "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2024-05-01T00:00:00Z"}],
      "hostIP": "10.0.3.17", "podIP": "10.244.3.9",
      "containerStatuses": [{"name": "trainer", "ready": true, "restartCount": 0,
                             "state": {"running": {"startedAt": "2024-05-01T00:00:00Z"}},
                             "image": "nvcr.io/nvidia/pytorch:24.04-py3", "imageID": "", "started": true}]
    }
  })json");
  create(nodes(), "", node);
  create(pods(), "ml", pod);
  auto stored = get(nodes(), "", "gpu-node-17");
  EXPECT_EQ(stored["status"]["nodeInfo"], node["status"]["nodeInfo"]);
  EXPECT_EQ(stored["spec"]["taints"], node["spec"]["taints"]);
  list_options on_node;
  on_node.field_selector = "spec.nodeName=gpu-node-17,status.phase=Running";
  EXPECT_EQ(names_of(*store.list(pods(), "", on_node).value), strings{"trainer-0"});
  list_options workers;
  workers.label_selector = "node-role.kubernetes.io/worker,nvidia.com/gpu.product";
  EXPECT_EQ(names_of(*store.list(nodes(), "", workers).value), strings{"gpu-node-17"});
  auto deleted = store.remove(pods(), "ml", "trainer-0", {});
  EXPECT_EQ((*deleted.value)["metadata"]["deletionGracePeriodSeconds"], 45);
  auto conditioned =
    patch(nodes(), "", "gpu-node-17",
          {{"status",
            {{"conditions",
              {{{"type", "Ready"}, {"status", "False"}, {"reason", "GpuLost"}}}}}}},
          patch_type::strategic_merge, true);
  EXPECT_EQ(conditioned["status"]["conditions"].size(), 2u);
  EXPECT_EQ(conditioned["status"]["conditions"][1]["reason"], "GpuLost");
  EXPECT_EQ(conditioned["status"]["conditions"][1]["lastHeartbeatTime"],
            "2024-05-01T00:00:00Z");
}

} // namespace
