// The object store's types, creates and updates: server-owned metadata,
// resourceVersions and conflicts, generation, the status subresource, and
// objects shaped like the API reference.
#include <gtest/gtest.h>

#include <algorithm>

#include "runtime/sim/kube/kube_object_store.hpp"
#include "runtime/sim/kube/kube_rest.hpp"
#include "tests/runtime/sim/kube/kube_object_store_fixture.hpp"

using namespace vigil::kube;
using namespace vigil::kube::test_support;

namespace {

// --- types and create

TEST_F(kube_store, serves_the_builtin_types_and_registered_ones) {
  for (const auto& t : builtin_resource_types())
    EXPECT_NE(store.find_type(t.group, t.version, t.plural), nullptr) << t.plural;
  EXPECT_EQ(store.find_type("", "v1", "replicationcontrollers"), nullptr);
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

// As on a real server, creating a CustomResourceDefinition serves its
// resource (each served version) and reports it Established.
TEST_F(kube_store, a_created_crd_serves_its_resource) {
  const auto* crds =
    store.find_type("apiextensions.k8s.io", "v1", "customresourcedefinitions");
  ASSERT_NE(crds, nullptr);
  json crd = {
    {"metadata", {{"name", "widgets.example.com"}}},
    {"spec",
     {{"group", "example.com"},
      {"scope", "Namespaced"},
      {"names", {{"plural", "widgets"}, {"kind", "Widget"}, {"shortNames", {"wd"}}}},
      {"versions",
       {{{"name", "v1"},
         {"served", true},
         {"storage", true},
         {"subresources", {{"status", json::object()}}}},
        {{"name", "v1beta1"}, {"served", false}, {"storage", false}}}}}}};
  EXPECT_EQ(store.find_type("example.com", "v1", "widgets"), nullptr);
  auto created = create(*crds, "", crd);
  const auto* widgets = store.find_type("example.com", "v1", "widgets");
  ASSERT_NE(widgets, nullptr);
  EXPECT_EQ(widgets->kind, "Widget");
  EXPECT_TRUE(widgets->namespaced);
  EXPECT_TRUE(widgets->has_status);
  EXPECT_EQ(widgets->short_names, strings{"wd"});
  EXPECT_EQ(store.find_type("example.com", "v1beta1", "widgets"), nullptr); // not served
  EXPECT_EQ(created["status"]["conditions"][1]["type"], "Established");
  EXPECT_EQ(created["status"]["conditions"][1]["status"], "True");
  EXPECT_EQ(created["status"]["storedVersions"], json::array({"v1"}));
  create(*widgets, "team", {{"metadata", {{"name", "w1"}}}, {"spec", json::object()}});
  EXPECT_TRUE(exists(*widgets, "team", "w1"));
  // A custom resource's LIST items keep their kind and apiVersion.
  auto listed = store.list(*widgets, "team", {});
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ((*listed.value)["items"][0]["kind"], "Widget");
  EXPECT_EQ((*listed.value)["items"][0]["apiVersion"], "example.com/v1");

  auto misnamed = crd;
  misnamed["metadata"]["name"] = "gadgets.example.com";
  auto refused = store.create(*crds, "", misnamed);
  EXPECT_FALSE(refused.ok());
  EXPECT_EQ(refused.error.code, 422);
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
  // As kube-apiserver's: a built-in type's LIST items have no kind and no
  // apiVersion (kubernetes/kubernetes#3030); a GET's object has both.
  for (const auto& item : (*list.value)["items"]) {
    EXPECT_FALSE(item.contains("kind"));
    EXPECT_FALSE(item.contains("apiVersion"));
  }
  EXPECT_EQ(node["kind"], "Node");
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

namespace {

// TokenReview as a real API server answers it: created (201), not stored;
// authenticated only for a known token whose audiences meet the requested.
TEST(kube_token_review, answers_like_the_api_server) {
  object_store store;
  service_account_token agent;
  agent.username = "system:serviceaccount:vigil:vigil-agent";
  agent.audiences = {"vigil"};
  agent.extra = {{"authentication.kubernetes.io/node-name", {"node-1"}}};
  store.token_reviews().add("good", agent);
  auto ask = [&](const std::string& token, json audiences) {
    json review = {{"apiVersion", "authentication.k8s.io/v1"},
                   {"kind", "TokenReview"},
                   {"spec", {{"token", token}, {"audiences", audiences}}}};
    rest_request request;
    request.verb = "POST";
    request.path = "/apis/authentication.k8s.io/v1/tokenreviews";
    request.body = review.dump();
    return serve_rest(store, request);
  };
  auto granted = ask("good", json::array({"vigil"}));
  EXPECT_EQ(granted.status, 201);
  auto status = json::parse(granted.body)["status"];
  EXPECT_TRUE(status["authenticated"].get<bool>());
  EXPECT_EQ(status["user"]["username"], agent.username);
  EXPECT_EQ(status["user"]["extra"]["authentication.kubernetes.io/node-name"][0],
            "node-1");
  EXPECT_EQ(status["audiences"], json::array({"vigil"}));

  // No audience asked: the API server's own, which this token is not for.
  auto api_audience = json::parse(ask("good", json::array()).body)["status"];
  EXPECT_FALSE(api_audience.value("authenticated", false));
  EXPECT_NE(api_audience["error"].get<std::string>().find("audiences"),
            std::string::npos);
  auto unknown = json::parse(ask("forged", json::array({"vigil"})).body)["status"];
  EXPECT_FALSE(unknown.value("authenticated", false));
  EXPECT_TRUE(unknown.contains("error"));
  store.token_reviews().revoke("good");
  EXPECT_FALSE(json::parse(ask("good", json::array({"vigil"})).body)["status"].value(
    "authenticated", false));
}

} // namespace
