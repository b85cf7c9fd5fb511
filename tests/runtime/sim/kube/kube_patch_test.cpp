// Patches through the object store: merge, JSON and strategic merge patches
// on nodes and custom resources, and the strategic list strategies.
#include <gtest/gtest.h>

#include "runtime/sim/kube/kube_object_store.hpp"
#include "runtime/sim/kube/kube_patch.hpp"
#include "tests/runtime/sim/kube/kube_object_store_fixture.hpp"

using namespace vigil::kube;
using namespace vigil::kube::test_support;

namespace {

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

} // namespace
