#include "actors/control/remediation/remediation_resource.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace vigil::control {
namespace {

using nlohmann::json;

remediation_plan reset_plan(const std::string& uuid) {
  return plan_remediation(recommended_action::component_reset, uuid,
                          {"NVIDIA H100 80GB HBM3", false, false, nullptr});
}

TEST(remediation_resource, cr_names_are_stable_per_group_and_event) {
  auto plan = reset_plan("GPU-a");
  auto name = maintenance_cr_name("node-1", plan, "e1");
  EXPECT_EQ(name, maintenance_cr_name("node-1", plan, "e1")); // a restart re-creates: 409
  EXPECT_NE(name, maintenance_cr_name("node-1", plan, "e2"));
  EXPECT_NE(name, maintenance_cr_name("node-1", reset_plan("GPU-b"), "e1"));
  EXPECT_EQ(name.rfind("gpureset-node-1-", 0), 0u) << name;
  auto reboot = plan_remediation(recommended_action::restart_bm, "", {});
  EXPECT_EQ(maintenance_cr_name("node-1", reboot, "e1").rfind("reboot-node-1-", 0), 0u);
  // A node name near the limit still gives a valid name.
  auto long_name = maintenance_cr_name(std::string(260, 'n'), plan, "e1");
  EXPECT_LE(long_name.size(), 253u);
  EXPECT_NE(long_name.back(), '-');
}

TEST(remediation_resource, a_gpureset_names_exactly_one_gpu) {
  auto plan = reset_plan("GPU-a");
  auto body = json::parse(maintenance_cr_body("gpureset-x", "node-1", plan, "e1"));
  EXPECT_EQ(body["apiVersion"], "vigil.dev/v1alpha1");
  EXPECT_EQ(body["kind"], "GPUReset");
  EXPECT_EQ(body["spec"]["nodeName"], "node-1");
  EXPECT_EQ(body["spec"]["gpuUUIDs"], json::array({"GPU-a"}));
  EXPECT_EQ(body["spec"]["sourceEventId"], "e1");
  EXPECT_EQ(body["metadata"]["annotations"]["vigil.dev/equivalence-group"],
            "reset-GPU-a");
  auto reboot = plan_remediation(recommended_action::restart_vm, "", {});
  auto reboot_body = json::parse(maintenance_cr_body("reboot-x", "node-1", reboot, "e2"));
  EXPECT_EQ(reboot_body["kind"], "RebootNode");
  EXPECT_FALSE(reboot_body["spec"].contains("gpuUUIDs"));
  EXPECT_FALSE(reboot_body["spec"].contains("collectBugReport"));
  reboot.collect_bug_report = true; // after a failed reset
  EXPECT_EQ(json::parse(maintenance_cr_body("reboot-y", "node-1", reboot,
                                            "e2"))["spec"]["collectBugReport"],
            true);
  auto request = create_cr_request(reboot, reboot_body.dump());
  EXPECT_EQ(request.verb, "POST");
  EXPECT_EQ(request.path, "/apis/vigil.dev/v1alpha1/rebootnodes");
  EXPECT_EQ(get_cr_request(plan, "x").path, "/apis/vigil.dev/v1alpha1/gpuresets/x");
  auto manual = plan_remediation(recommended_action::contact_support, "", {});
  EXPECT_FALSE(maintenance_resource(manual).has_value());
}

// issue 19: a CUSTOM event's customRecommendedAction picks the operator's CR
// kind; the CR is created and read in that kind's own collection.
TEST(remediation_resource, a_custom_action_is_a_cr_of_the_configured_kind) {
  remediation_options options;
  options.custom_actions.push_back(
    {"RESEAT_CABLE", "repair.example.com", "v1", "CableReseat", "cablereseats"});
  auto plan =
    plan_remediation(recommended_action::custom, "GPU-a", {}, options, "RESEAT_CABLE");
  ASSERT_EQ(plan.kind, remediation_kind::custom);
  auto name = maintenance_cr_name("node-1", plan, "e1");
  EXPECT_EQ(name.rfind("cablereseat-node-1-", 0), 0u) << name;
  auto body = json::parse(maintenance_cr_body(name, "node-1", plan, "e1"));
  EXPECT_EQ(body["apiVersion"], "repair.example.com/v1");
  EXPECT_EQ(body["kind"], "CableReseat");
  EXPECT_EQ(body["spec"]["nodeName"], "node-1");
  EXPECT_EQ(body["spec"]["customAction"], "RESEAT_CABLE");
  EXPECT_EQ(body["spec"]["gpuUUIDs"], json::array({"GPU-a"}));
  EXPECT_EQ(body["metadata"]["annotations"]["vigil.dev/equivalence-group"],
            "custom-RESEAT_CABLE");
  EXPECT_EQ(create_cr_request(plan, body.dump()).path,
            "/apis/repair.example.com/v1/cablereseats");
  EXPECT_EQ(get_cr_request(plan, name).path,
            "/apis/repair.example.com/v1/cablereseats/" + name);
  // No GPU named: no gpuUUIDs (an empty UUID would be a lie).
  auto node_wide =
    plan_remediation(recommended_action::custom, "", {}, options, "RESEAT_CABLE");
  EXPECT_FALSE(
    json::parse(maintenance_cr_body("x", "node-1", node_wide, "e2"))["spec"].contains(
      "gpuUUIDs"));
}

TEST(remediation_resource, progress_is_read_from_the_status) {
  auto pending = read_cr_progress(R"({"metadata":{"name":"x"}})");
  ASSERT_TRUE(pending.has_value());
  EXPECT_EQ(pending->phase, "Pending");
  EXPECT_FALSE(pending->terminal);
  auto restoring = read_cr_progress(
    R"({"metadata":{},"status":{"phase":"Restoring","failureReason":"timeout"}})");
  ASSERT_TRUE(restoring.has_value());
  EXPECT_FALSE(restoring->terminal); // failed, but the labels are not back yet
  auto failed = read_cr_progress(
    R"({"metadata":{},"status":{"phase":"Failed","failureReason":"job_failed",
        "conditions":[{"type":"Complete","status":"False","message":"exit 2"}]}})");
  ASSERT_TRUE(failed.has_value());
  EXPECT_TRUE(failed->terminal);
  EXPECT_FALSE(failed->succeeded);
  EXPECT_EQ(failed->failure_reason, "job_failed");
  EXPECT_EQ(failed->message, "exit 2");
  auto done = read_cr_progress(R"({"metadata":{},"status":{"phase":"Succeeded"}})");
  ASSERT_TRUE(done.has_value());
  EXPECT_TRUE(done->succeeded);
  // An operator's controller that follows the Job convention: no phase, the
  // Complete or Failed condition True. False or odd values are not an end.
  auto complete = read_cr_progress(
    R"({"metadata":{},"status":{"conditions":[{"type":"Complete","status":"True"}]}})");
  ASSERT_TRUE(complete.has_value());
  EXPECT_TRUE(complete->terminal);
  EXPECT_TRUE(complete->succeeded);
  auto job_failed = read_cr_progress(
    R"({"metadata":{},"status":{"conditions":[{"type":"Failed","status":"True",
        "message":"cable still bad"}]}})");
  ASSERT_TRUE(job_failed.has_value());
  EXPECT_TRUE(job_failed->terminal);
  EXPECT_FALSE(job_failed->succeeded);
  EXPECT_EQ(job_failed->message, "cable still bad");
  for (
    const char* running :
    {R"({"metadata":{},"status":{"conditions":[{"type":"Complete","status":"False"}]}})",
     R"({"metadata":{},"status":{"conditions":[{"type":7,"status":true}, 3]}})",
     R"({"metadata":{},"status":{"conditions":"Complete"}})"}) {
    auto p = read_cr_progress(running);
    ASSERT_TRUE(p.has_value()) << running;
    EXPECT_FALSE(p->terminal) << running;
  }
  for (const char* garbage : {"", "[]", "{\"status\":{}}", "{not json"}) {
    auto bad = read_cr_progress(garbage);
    ASSERT_FALSE(bad.has_value()) << garbage;
    EXPECT_EQ(bad.error().where, "custom resource");
  }
}

TEST(remediation_resource, the_annotation_is_written_and_removed_by_merge_patch) {
  remediation_state state;
  remember(state, "reset-GPU-a", {remediation_kind::gpu_reset, "gpureset-x", {}});
  auto write = remediation_annotation_request("node-1", state);
  EXPECT_EQ(write.verb, "PATCH");
  EXPECT_EQ(write.path, "/api/v1/nodes/node-1");
  EXPECT_EQ(write.content_type, kube::content_type::merge_patch);
  auto body = json::parse(write.body);
  auto value = body["metadata"]["annotations"][std::string{remediation_state_annotation}];
  auto decoded = decode_remediation_state(value.get<std::string>());
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(*decoded, state);
  auto remove = json::parse(remediation_annotation_request("node-1", {}).body);
  EXPECT_TRUE(remove["metadata"]["annotations"][std::string{remediation_state_annotation}]
                .is_null());
}

} // namespace
} // namespace vigil::control
