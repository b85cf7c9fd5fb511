// Seed 000 §3.1 on clusters with Dynamic Resource Allocation: which pod holds
// which GPU from ResourceClaims and the node's ResourceSlices, in the
// resource.k8s.io/v1 shape and v1beta1's (attributes under devices[].basic).
#include "actors/control/drain/dra_allocations.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace vigil::control {
namespace {

using nlohmann::json;

json slice(const std::string& node, const std::string& pool, json devices) {
  return {{"metadata", {{"name", node + "-gpu.nvidia.com"}}},
          {"spec",
           {{"driver", "gpu.nvidia.com"},
            {"nodeName", node},
            {"pool", {{"name", pool}, {"generation", 1}, {"resourceSliceCount", 1}}},
            {"devices", std::move(devices)}}}};
}

json gpu_device(const std::string& name, const std::string& uuid) {
  return {{"name", name},
          {"attributes",
           {{"uuid", {{"string", uuid}}}, {"productName", {{"string", "NVIDIA H100"}}}}}};
}

json claim(const std::string& ns, const std::string& name, json results, json pods) {
  json reserved = json::array();
  for (const auto& pod : pods)
    reserved.push_back(
      {{"resource", "pods"}, {"name", pod}, {"uid", "uid-" + pod.get<std::string>()}});
  return {{"metadata", {{"namespace", ns}, {"name", name}}},
          {"spec", json::object()},
          {"status",
           {{"allocation", {{"devices", {{"results", std::move(results)}}}}},
            {"reservedFor", std::move(reserved)}}}};
}

json result(const std::string& pool, const std::string& device) {
  return {
    {"request", "gpu"}, {"driver", "gpu.nvidia.com"}, {"pool", pool}, {"device", device}};
}

std::string list(json items) {
  return json{{"kind", "List"}, {"items", std::move(items)}}.dump();
}

TEST(dra_allocations, claims_map_to_the_gpu_uuids_of_this_nodes_slices) {
  auto slices = list({slice("node-1", "node-1",
                            {gpu_device("gpu-0", "GPU-a"), gpu_device("gpu-1", "GPU-b"),
                             json{{"name", "gpu-2"}}}),
                      slice("node-2", "node-2", {gpu_device("gpu-0", "GPU-z")})});
  // One list per namespace read, as the drain reads them.
  std::vector<std::string> claims = {
    list({claim("team-a", "train-gpus",
                {result("node-1", "gpu-0"), result("node-1", "gpu-1")}, {"train-0"})}),
    list({claim("team-b", "infer-gpu", {result("node-2", "gpu-0")}, {"infer-0"})}),
    list({claim("team-c", "odd", {result("node-1", "gpu-2")}, {"odd-0"}), // no uuid
          claim("team-c", "unused", {result("node-1", "gpu-1")}, json::array())}),
  };
  auto report = dra_gpu_allocations(claims, slices, "node-1");
  ASSERT_TRUE(report.has_value()) << report.error().to_string();
  EXPECT_EQ(report->source, "dra");
  EXPECT_EQ(gpus_held_by(*report, "team-a", "train-0"),
            (std::vector<std::string>{"GPU-a", "GPU-b"}));
  EXPECT_EQ(gpus_held_by(*report, "team-b", "infer-0"), std::nullopt); // not this node
  EXPECT_EQ(gpus_held_by(*report, "team-c", "odd-0"), std::nullopt);   // unresolved
  ASSERT_EQ(report->allocations.size(), 2u);
  EXPECT_EQ(report->allocations[0].resource, "dra:gpu.nvidia.com");
  EXPECT_EQ(report->allocations[0].container, "train-gpus");
}

TEST(dra_allocations, reads_v1beta1_basic_attributes_and_qualified_names) {
  json beta = {
    {"name", "gpu-0"},
    {"basic", {{"attributes", {{"gpu.nvidia.com/uuid", {{"string", "GPU-q"}}}}}}}};
  EXPECT_EQ(device_gpu_uuid(beta), "GPU-q");
  EXPECT_EQ(
    device_gpu_uuid(json{{"name", "x"}, {"attributes", {{"uuid", {{"int", 7}}}}}}), "");
  EXPECT_EQ(device_gpu_uuid(json::array()), "");
  auto report =
    dra_gpu_allocations({list({claim("a", "c", {result("p", "gpu-0")}, {"pod"})})},
                        list({slice("node-1", "p", {beta})}), "node-1");
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(gpus_held_by(*report, "a", "pod"), std::vector<std::string>{"GPU-q"});
}

TEST(dra_allocations, names_a_body_that_is_not_a_list_and_skips_odd_claims) {
  auto bad =
    dra_gpu_allocations({list(json::array()), "{}"}, list(json::array()), "node-1");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().where, "ResourceClaimList");
  bad = dra_gpu_allocations({list(json::array())}, "garbage", "node-1");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().where, "ResourceSliceList");
  auto odd = dra_gpu_allocations(
    {list({json(7), json{{"status", {{"allocation", "x"}}}}, json::object()})},
    list({json(1), json{{"spec", {{"devices", 3}}}}}), "node-1");
  ASSERT_TRUE(odd.has_value());
  EXPECT_TRUE(odd->allocations.empty());
  EXPECT_EQ(resource_slices_request("v1beta1", "node-1").path,
            "/apis/resource.k8s.io/v1beta1/resourceslices");
  EXPECT_EQ(resource_claims_request("v1", "team-a").path,
            "/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims");
}

} // namespace
} // namespace vigil::control
