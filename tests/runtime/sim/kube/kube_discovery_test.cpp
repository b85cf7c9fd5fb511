// Discovery documents and Tables: what kubectl reads from the test server
// before get, describe, cordon and uncordon.
#include <gtest/gtest.h>

#include "runtime/sim/kube/kube_discovery.hpp"
#include "runtime/sim/kube/kube_object_store.hpp"

using namespace vigil::kube;

namespace {

constexpr std::int64_t may_first_2024 = 1714521600; // 2024-05-01T00:00:00Z

const resource_type gpu_resets_v1alpha1{"vigil.dev", "v1alpha1", "gpuresets", "GPUReset",
                                        true,        true,       {"gr"}};
const resource_type gpu_resets_v1{"vigil.dev", "v1", "gpuresets", "GPUReset",
                                  true,        true, {"gr"}};

resource_type builtin(const std::string& plural) {
  for (const auto& type : builtin_resource_types())
    if (type.plural == plural)
      return type;
  ADD_FAILURE() << plural;
  return {};
}

json find_resource(const json& list, const std::string& name) {
  for (const auto& resource : list["resources"])
    if (resource["name"] == name)
      return resource;
  return nullptr;
}

json node(const std::string& name, const char* ready, bool unschedulable = false) {
  json object = {
    {"metadata",
     {{"name", name},
      {"uid", "u-" + name},
      {"resourceVersion", "7"},
      {"creationTimestamp", "2024-04-28T00:00:00Z"},
      {"labels",
       {{"node-role.kubernetes.io/worker", ""}, {"node-role.kubernetes.io/gpu", ""}}}}},
    {"spec", json::object()},
    {"status",
     {{"nodeInfo",
       {{"kubeletVersion", "v1.30.0"}, {"osImage", "Debian GNU/Linux 12 (bookworm)"}}},
      {"addresses", {{{"type", "InternalIP"}, {"address", "10.0.0.5"}}}}}}};
  if (ready != nullptr)
    object["status"]["conditions"] = {{{"type", "Ready"}, {"status", ready}}};
  if (unschedulable)
    object["spec"]["unschedulable"] = true;
  return object;
}

json pod(const std::string& name, json container_statuses, int containers = 1) {
  json specs = json::array();
  for (int i = 0; i < containers; ++i)
    specs.push_back({{"name", "c" + std::to_string(i)}});
  return {{"metadata", {{"name", name}, {"creationTimestamp", "2024-04-30T23:59:15Z"}}},
          {"spec", {{"nodeName", "gpu-1"}, {"containers", specs}}},
          {"status",
           {{"phase", "Running"},
            {"podIP", "10.244.0.4"},
            {"containerStatuses", std::move(container_statuses)}}}};
}

json running(bool ready, int restarts = 0) {
  return {{"ready", ready},
          {"restartCount", restarts},
          {"state", {{"running", {{"startedAt", "2024-05-01T00:00:00Z"}}}}}};
}

std::vector<std::string> column_names(const json& table) {
  std::vector<std::string> names;
  for (const auto& column : table["columnDefinitions"])
    if (column["priority"] == 0)
      names.push_back(column["name"]);
  return names;
}

using strings = std::vector<std::string>;

TEST(kube_discovery, version_document_names_a_1_30_server) {
  auto version = version_document();
  EXPECT_EQ(version["major"], "1");
  EXPECT_EQ(version["minor"], "30");
  EXPECT_EQ(version["gitVersion"], "v1.30.0-vigil");
  EXPECT_EQ(version["platform"], "linux/amd64");
  for (const char* field :
       {"gitCommit", "gitTreeState", "buildDate", "goVersion", "compiler"})
    EXPECT_TRUE(version[field].is_string()) << field;
}

TEST(kube_discovery, api_versions_list_the_core_group) {
  auto versions = api_versions_document();
  EXPECT_EQ(versions["kind"], "APIVersions");
  EXPECT_EQ(versions["versions"], json::array({"v1"}));
  EXPECT_TRUE(versions["serverAddressByClientCIDRs"].is_array());
}

TEST(kube_discovery, group_list_prefers_the_highest_version) {
  auto types = builtin_resource_types();
  types.push_back(gpu_resets_v1alpha1);
  types.push_back(gpu_resets_v1);
  auto list = api_group_list(types);
  EXPECT_EQ(list["kind"], "APIGroupList");
  EXPECT_EQ(list["apiVersion"], "v1");
  std::vector<std::string> names;
  for (const auto& group : list["groups"])
    names.push_back(group["name"]);
  EXPECT_EQ(names, (strings{"apps", "rbac.authorization.k8s.io", "networking.k8s.io",
                            "apiextensions.k8s.io", "policy", "batch",
                            "coordination.k8s.io", "resource.k8s.io", "vigil.dev"}));
  ASSERT_EQ(list["groups"].size(), 9u);
  const auto& vigil = list["groups"][8];
  EXPECT_EQ(vigil["versions"][0],
            (json{{"groupVersion", "vigil.dev/v1"}, {"version", "v1"}}));
  EXPECT_EQ(vigil["versions"][1]["version"], "v1alpha1");
  EXPECT_EQ(vigil["preferredVersion"]["groupVersion"], "vigil.dev/v1");
}

TEST(kube_discovery, version_priority_follows_kubernetes) {
  EXPECT_TRUE(higher_version_priority("v1", "v1beta1"));
  EXPECT_TRUE(higher_version_priority("v2", "v1"));
  EXPECT_TRUE(higher_version_priority("v1beta2", "v1beta1"));
  EXPECT_TRUE(higher_version_priority("v1beta1", "v2alpha1"));
  EXPECT_TRUE(higher_version_priority("v1alpha1", "foo"));
  EXPECT_TRUE(higher_version_priority("bar", "foo"));
  EXPECT_FALSE(higher_version_priority("v1", "v1"));
}

TEST(kube_discovery, core_resource_list_has_subresources_and_short_names) {
  auto list = api_resource_list(builtin_resource_types(), "", "v1");
  EXPECT_EQ(list["kind"], "APIResourceList");
  EXPECT_EQ(list["groupVersion"], "v1");
  auto pods = find_resource(list, "pods");
  EXPECT_EQ(pods["singularName"], "pod");
  EXPECT_EQ(pods["namespaced"], true);
  EXPECT_EQ(pods["kind"], "Pod");
  EXPECT_EQ(pods["shortNames"], json::array({"po"}));
  EXPECT_EQ(pods["categories"], json::array({"all"}));
  for (const char* verb : {"create", "delete", "get", "list", "patch", "update", "watch"})
    EXPECT_NE(std::find(pods["verbs"].begin(), pods["verbs"].end(), verb),
              pods["verbs"].end());
  auto eviction = find_resource(list, "pods/eviction");
  EXPECT_EQ(eviction["group"], "policy");
  EXPECT_EQ(eviction["version"], "v1");
  EXPECT_EQ(eviction["kind"], "Eviction");
  EXPECT_EQ(eviction["verbs"], json::array({"create"}));
  EXPECT_EQ(find_resource(list, "pods/status")["verbs"],
            json::array({"get", "patch", "update"}));
  auto nodes = find_resource(list, "nodes");
  EXPECT_EQ(nodes["namespaced"], false);
  EXPECT_EQ(nodes["shortNames"], json::array({"no"}));
  EXPECT_FALSE(find_resource(list, "nodes/status").is_null());
  EXPECT_TRUE(find_resource(list, "events/status").is_null());
  EXPECT_FALSE(find_resource(list, "secrets").contains("shortNames"));
  EXPECT_TRUE(find_resource(list, "poddisruptionbudgets").is_null());
}

TEST(kube_discovery, group_resource_lists_cover_custom_types) {
  auto types = builtin_resource_types();
  types.push_back(gpu_resets_v1alpha1);
  auto list = api_resource_list(types, "vigil.dev", "v1alpha1");
  EXPECT_EQ(list["groupVersion"], "vigil.dev/v1alpha1");
  EXPECT_EQ(find_resource(list, "gpuresets")["singularName"], "gpureset");
  EXPECT_EQ(find_resource(list, "gpuresets/status")["kind"], "GPUReset");
  auto policy = api_resource_list(types, "policy", "v1");
  EXPECT_EQ(find_resource(policy, "poddisruptionbudgets")["shortNames"],
            json::array({"pdb"}));
  EXPECT_TRUE(api_resource_list(types, "vigil.dev", "v9").is_null());
  EXPECT_TRUE(api_resource_list(types, "storage.k8s.io", "v1").is_null());
}

TEST(kube_discovery, node_table_matches_kubectl_get_nodes) {
  json list = {{"kind", "NodeList"},
               {"apiVersion", "v1"},
               {"metadata", {{"resourceVersion", "42"}}},
               {"items",
                {node("gpu-1", "True"), node("gpu-2", "True", true),
                 node("gpu-3", "False"), node("gpu-4", nullptr)}}};
  list["items"][3]["metadata"].erase("labels");
  auto table = to_table(builtin("nodes"), list, may_first_2024);
  EXPECT_EQ(table["kind"], "Table");
  EXPECT_EQ(table["apiVersion"], "meta.k8s.io/v1");
  EXPECT_EQ(table["metadata"], (json{{"resourceVersion", "42"}}));
  EXPECT_EQ(column_names(table), (strings{"Name", "Status", "Roles", "Age", "Version"}));
  EXPECT_EQ(table["columnDefinitions"][0]["format"], "name");
  const auto& rows = table["rows"];
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0]["cells"][0], "gpu-1");
  EXPECT_EQ(rows[0]["cells"][1], "Ready");
  EXPECT_EQ(rows[0]["cells"][2], "gpu,worker");
  EXPECT_EQ(rows[0]["cells"][3], "3d");
  EXPECT_EQ(rows[0]["cells"][4], "v1.30.0");
  EXPECT_EQ(rows[0]["cells"][5], "10.0.0.5");
  EXPECT_EQ(rows[0]["cells"][6], "<none>");
  EXPECT_EQ(rows[1]["cells"][1], "Ready,SchedulingDisabled");
  EXPECT_EQ(rows[2]["cells"][1], "NotReady");
  EXPECT_EQ(rows[3]["cells"][1], "Unknown");
  EXPECT_EQ(rows[3]["cells"][2], "<none>");
  EXPECT_EQ(rows[0]["object"]["kind"], "PartialObjectMetadata");
  EXPECT_EQ(rows[0]["object"]["apiVersion"], "meta.k8s.io/v1");
  EXPECT_EQ(rows[0]["object"]["metadata"]["uid"], "u-gpu-1");
  EXPECT_FALSE(rows[0]["object"].contains("spec"));
}

TEST(kube_discovery, a_single_object_is_a_one_row_table) {
  auto table = to_table(builtin("nodes"), node("gpu-1", "True"), may_first_2024);
  ASSERT_EQ(table["rows"].size(), 1u);
  EXPECT_EQ(table["metadata"], (json{{"resourceVersion", "7"}}));
  auto full =
    to_table(builtin("nodes"), node("gpu-1", "True"), may_first_2024, table_object::full);
  EXPECT_EQ(full["rows"][0]["object"]["kind"], "Node");
  EXPECT_EQ(full["rows"][0]["object"]["spec"], json::object());
  auto bare =
    to_table(builtin("nodes"), node("gpu-1", "True"), may_first_2024, table_object::none);
  EXPECT_FALSE(bare["rows"][0].contains("object"));
}

TEST(kube_discovery, pod_table_matches_kubectl_get_pods) {
  json waiting = {{"ready", false},
                  {"restartCount", 4},
                  {"state", {{"waiting", {{"reason", "CrashLoopBackOff"}}}}}};
  json terminated = {{"ready", false},
                     {"restartCount", 0},
                     {"state", {{"terminated", {{"exitCode", 137}}}}}};
  auto terminating = pod("leaving", {running(true)});
  terminating["metadata"]["deletionTimestamp"] = "2024-05-01T00:00:30Z";
  json list = {{"metadata", {{"resourceVersion", "9"}, {"continue", "abc"}}},
               {"items",
                {pod("ok", {running(true), running(true, 2)}, 2),
                 pod("half", {running(true), running(false)}, 2), pod("crash", {waiting}),
                 pod("killed", {terminated}), terminating}}};
  auto table = to_table(builtin("pods"), list, may_first_2024);
  EXPECT_EQ(column_names(table), (strings{"Name", "Ready", "Status", "Restarts", "Age"}));
  EXPECT_EQ(table["metadata"]["continue"], "abc");
  const auto& rows = table["rows"];
  EXPECT_EQ(rows[0]["cells"], (json{"ok", "2/2", "Running", "2", "45s", "10.244.0.4",
                                    "gpu-1", "<none>", "<none>"}));
  EXPECT_EQ(rows[1]["cells"][1], "1/2");
  EXPECT_EQ(rows[2]["cells"][2], "CrashLoopBackOff");
  EXPECT_EQ(rows[2]["cells"][3], "4");
  EXPECT_EQ(rows[3]["cells"][2], "ExitCode:137");
  EXPECT_EQ(rows[4]["cells"][2], "Terminating");
}

TEST(kube_discovery, other_types_show_name_and_age) {
  json lease = {
    {"metadata", {{"name", "gpu-1"}, {"creationTimestamp", "2024-04-30T20:00:00Z"}}}};
  auto table = to_table(builtin("leases"), lease, may_first_2024);
  EXPECT_EQ(column_names(table), (strings{"Name", "Age"}));
  EXPECT_EQ(table["rows"][0]["cells"], (json{"gpu-1", "4h"}));
  json ns = {{"metadata", {{"name", "gpu"}}}, {"status", {{"phase", "Active"}}}};
  auto namespaces = to_table(builtin("namespaces"), ns, may_first_2024);
  EXPECT_EQ(namespaces["rows"][0]["cells"], (json{"gpu", "Active", "<unknown>"}));
}

TEST(kube_discovery, human_durations_match_kubectl) {
  EXPECT_EQ(human_duration(-5), "<invalid>");
  EXPECT_EQ(human_duration(-1), "0s");
  EXPECT_EQ(human_duration(45), "45s");
  EXPECT_EQ(human_duration(119), "119s");
  EXPECT_EQ(human_duration(200), "3m20s");
  EXPECT_EQ(human_duration(300), "5m");
  EXPECT_EQ(human_duration(3600 + 60 * 15), "75m");
  EXPECT_EQ(human_duration(3 * 3600 + 60 * 5), "3h5m");
  EXPECT_EQ(human_duration(5 * 3600), "5h");
  EXPECT_EQ(human_duration(30 * 3600), "30h");
  EXPECT_EQ(human_duration(51 * 3600), "2d3h");
  EXPECT_EQ(human_duration(72 * 3600), "3d");
  EXPECT_EQ(human_duration(400 * 86400), "400d");
  EXPECT_EQ(human_duration((3 * 365 + 10) * 86400), "3y10d");
  EXPECT_EQ(human_duration(10LL * 365 * 86400), "10y");
}

TEST(kube_discovery, tables_of_store_lists) {
  object_store store;
  store.set_clock([] { return may_first_2024; });
  const auto& nodes = *store.find_type("", "v1", "nodes");
  store.create(nodes, "", node("gpu-1", "True"));
  store.patch(nodes, "", "gpu-1", {{"spec", {{"unschedulable", true}}}},
              patch_type::merge, false);
  auto list = store.list(nodes, "", {});
  auto table = to_table(nodes, *list.value, store.now() + 90);
  EXPECT_EQ(table["rows"][0]["cells"][1], "Ready,SchedulingDisabled");
  EXPECT_EQ(table["rows"][0]["cells"][3], "90s");
  EXPECT_EQ(table["metadata"]["resourceVersion"], "2");
}

} // namespace
