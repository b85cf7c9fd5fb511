// The Node object as the node actor reads and patches it, checked against the
// object store the API test server uses, so a patch is applied exactly as the
// server would apply it.
#include "actors/control/node/node_resource.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/sim/kube/kube_object_store.hpp"

using namespace vigil;
using namespace vigil::control;
using nlohmann::json;

namespace {

const taint gpu_taint{"vigil.dev/gpu-fault", "true", taint_effect::no_schedule};

quarantine_policy policy() {
  quarantine_policy p;
  quarantine_rule r;
  r.name = "fatal-gpu";
  r.match.component_classes = {"GPU"};
  r.match.is_fatal = true;
  r.taints = {gpu_taint};
  p.rules = {r};
  return p;
}

health_event xid(const std::string& uuid, bool healthy = false) {
  health_event e;
  e.id = "e-" + uuid + (healthy ? "-ok" : "");
  e.agent = "xid-monitor";
  e.component_class = "GPU";
  e.check_name = "SysLogsXIDError";
  e.is_fatal = !healthy;
  e.is_healthy = healthy;
  e.error_codes = {"79"};
  e.entities = {{"GPU_UUID", uuid}};
  e.node_name = "node-1";
  return e;
}

struct node_resource_test : ::testing::Test {
  kube::object_store store;
  const kube::resource_type* nodes = store.find_type("", "v1", "nodes");

  void SetUp() override {
    ASSERT_NE(nodes, nullptr);
    json node = {{"apiVersion", "v1"},
                 {"kind", "Node"},
                 {"metadata",
                  {{"name", "node-1"}, {"labels", {{"nvidia.com/gpu.present", "true"}}}}},
                 {"spec", {{"taints", {{{"key", "team"}, {"effect", "NoSchedule"}}}}}},
                 {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
    ASSERT_TRUE(store.create(*nodes, "", node).ok());
  }

  observed_node observe() {
    auto r = store.get(*nodes, "", "node-1");
    auto o = observe_node(*r.value, policy(),
                          *label_selector::parse("nvidia.com/gpu.present=true"));
    EXPECT_TRUE(o.has_value());
    return *o;
  }

  // Applies a decision's patches to the store the way the node actor sends them.
  kube::store_result apply(const quarantine_decision& d, const observed_node& node) {
    kube::store_result last;
    auto spec = node_spec_patch(d, node);
    if (!spec.empty()) {
      last = store.patch(*nodes, "", "node-1", json::parse(spec), kube::patch_type::merge,
                         false);
      if (!last.ok())
        return last;
    }
    auto status = node_status_patch(d, from_unix(1'700'000'000, 0));
    if (!status.empty())
      last = store.patch(*nodes, "", "node-1", json::parse(status),
                         kube::patch_type::strategic_merge, true);
    return last;
  }
};

// A GPU node carries dozens of labels (GPU feature discovery's); the node
// actor keeps the ones it reads, and the GPU-node selector still sees all.
TEST(observe_node, keeps_only_the_labels_its_filter_names_and_matches_on_all) {
  json node = {{"kind", "Node"},
               {"metadata",
                {{"name", "node-1"},
                 {"labels",
                  {{"nvidia.com/gpu.present", "true"},
                   {"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
                   {"feature.node.kubernetes.io/cpu-cpuid.AVX512F", "true"},
                   {"topology.kubernetes.io/rack", "r7"}}}}}};
  auto keep = [](std::string_view key) {
    return key == "nvidia.com/gpu.product" || key == "topology.kubernetes.io/rack";
  };
  auto o = observe_node(node, policy(),
                        *label_selector::parse("nvidia.com/gpu.present=true"), keep);
  ASSERT_TRUE(o.has_value()) << o.error().to_string();
  EXPECT_TRUE(o->gpu_node);
  EXPECT_EQ(o->observation.labels, (std::map<std::string, std::string>{
                                     {"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
                                     {"topology.kubernetes.io/rack", "r7"}}));
  // No filter: every label.
  auto all = observe_node(node, policy());
  ASSERT_TRUE(all.has_value());
  EXPECT_EQ(all->observation.labels.size(), 4u);
}

TEST_F(node_resource_test, observes_labels_taints_and_gpu_selector) {
  auto o = observe();
  EXPECT_TRUE(o.gpu_node);
  EXPECT_FALSE(o.observation.unschedulable);
  ASSERT_EQ(o.observation.taints.size(), 1u);
  EXPECT_EQ(o.observation.taints[0].key, "team");
  EXPECT_TRUE(o.observation.conditions.empty()); // Ready is not vigil's
  EXPECT_FALSE(o.resource_version.empty());
}

TEST_F(node_resource_test, quarantine_then_release_round_trip_keeps_foreign_taint) {
  active_events active;
  active.apply(xid("GPU-1"), policy());
  auto before = observe();
  auto d = decide_quarantine(before.observation, active, policy());
  ASSERT_TRUE(d.cordon);
  ASSERT_TRUE(apply(d, before).ok());

  auto after = observe();
  EXPECT_TRUE(after.observation.unschedulable);
  EXPECT_TRUE(after.observation.cordon_owned);
  EXPECT_EQ(after.observation.taints.size(), 2u);
  ASSERT_EQ(after.observation.owned_taints.size(), 1u);
  EXPECT_EQ(after.observation.owned_taints[0], gpu_taint);
  EXPECT_FALSE(after.observation.annotation.empty());
  ASSERT_EQ(after.observation.conditions.count("GPUHealthy"), 1u);
  EXPECT_FALSE(after.observation.conditions["GPUHealthy"].healthy);
  // Converged: deciding again changes nothing.
  EXPECT_TRUE(
    decide_quarantine(after.observation, active, policy()).no_change(after.observation));

  active.apply(xid("GPU-1", true), policy());
  auto release = decide_quarantine(after.observation, active, policy());
  EXPECT_TRUE(release.uncordon);
  ASSERT_TRUE(apply(release, after).ok());
  auto released = observe();
  EXPECT_FALSE(released.observation.unschedulable);
  EXPECT_FALSE(released.observation.cordon_owned);
  ASSERT_EQ(released.observation.taints.size(), 1u);
  EXPECT_EQ(released.observation.taints[0].key, "team");
  EXPECT_TRUE(released.observation.annotation.empty());
  EXPECT_TRUE(released.observation.conditions["GPUHealthy"].healthy);
  EXPECT_TRUE(decide_quarantine(released.observation, active, policy())
                .no_change(released.observation));
}

TEST_F(node_resource_test, a_stale_observation_is_a_conflict_not_an_overwrite) {
  active_events active;
  active.apply(xid("GPU-1"), policy());
  auto stale = observe();
  // Someone else changes the Node after vigil looked at it.
  ASSERT_TRUE(store
                .patch(*nodes, "", "node-1",
                       json::parse(R"({"metadata":{"labels":{"x":"y"}}})"),
                       kube::patch_type::merge, false)
                .ok());
  auto d = decide_quarantine(stale.observation, active, policy());
  auto r = apply(d, stale);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error.code, 409);
}

TEST_F(node_resource_test, garbage_is_an_error_naming_the_problem) {
  EXPECT_FALSE(observe_node_body("not json", policy()).has_value());
  EXPECT_FALSE(observe_node_body("[]", policy()).has_value());
  auto missing = observe_node_body(R"({"kind":"Node","metadata":{}})", policy());
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().to_string().find("metadata.name"), std::string::npos);
  auto pod = observe_node_body(R"({"kind":"Pod","metadata":{"name":"p"}})", policy());
  ASSERT_FALSE(pod.has_value());
  // Odd field types are ignored, not fatal.
  auto odd = observe_node_body(
    R"({"kind":"Node","metadata":{"name":"n","labels":7,"annotations":{"vigil.dev/owned-taints":"{"}},"spec":{"taints":"x","unschedulable":"yes"}})",
    policy());
  ASSERT_TRUE(odd.has_value());
  EXPECT_FALSE(odd->observation.unschedulable);
}

TEST_F(node_resource_test, event_request_and_description) {
  quarantine_decision d;
  d.cordon = true;
  d.quarantined = true;
  d.add_taints = {gpu_taint};
  d.set_conditions = {{"GPUHealthy", false, "VigilDetectedFault", "xid 79"}};
  EXPECT_EQ(describe(d),
            "cordon; taint vigil.dev/gpu-fault=true:NoSchedule; GPUHealthy=False");
  auto r = node_event_request("node-1", "default", "Quarantined", describe(d), true,
                              from_unix(1'700'000'000, 0), 3);
  EXPECT_EQ(r.verb, "POST");
  EXPECT_EQ(r.path, "/api/v1/namespaces/default/events");
  auto body = json::parse(r.body);
  EXPECT_EQ(body["involvedObject"]["kind"], "Node");
  EXPECT_EQ(body["type"], "Warning");
  EXPECT_EQ(body["reason"], "Quarantined");
  EXPECT_EQ(describe(quarantine_decision{}), "no change");
}

} // namespace
