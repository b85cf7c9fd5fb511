#include "actors/control/drain/drain_resource.hpp"

#include <algorithm>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "actors/janitor/gpu_reset_plan.hpp"
#include "actors/janitor/janitor_resource.hpp"

namespace vigil::control {
namespace {

using nlohmann::json;

json pod(const std::string& ns, const std::string& name) {
  return {{"metadata", {{"namespace", ns}, {"name", name}}},
          {"spec", {{"containers", {{{"name", "main"}}}}}},
          {"status", {{"phase", "Running"}}}};
}

std::string list_of(std::vector<json> items) {
  return json{{"kind", "PodList"}, {"items", std::move(items)}}.dump();
}

// The pod the Job controller makes of a Job: the template's labels and spec,
// the job-name label and a controller ownerReference to the Job.
json pod_of_job(const json& job, const std::string& name) {
  auto p = pod(job["metadata"]["namespace"].get<std::string>(), name);
  p["metadata"]["labels"] = job["spec"]["template"]["metadata"]["labels"];
  p["metadata"]["labels"]["job-name"] = job["metadata"]["name"];
  p["metadata"]["ownerReferences"] = {{{"apiVersion", "batch/v1"},
                                       {"kind", "Job"},
                                       {"name", job["metadata"]["name"]},
                                       {"controller", true}}};
  p["spec"] = job["spec"]["template"]["spec"];
  return p;
}

active_record record(recommended_action action, const std::string& gpu,
                     std::optional<stage_override> overrides = std::nullopt) {
  active_record r;
  r.check_name = "SysLogsXIDError";
  r.subject = {"GPU_UUID", gpu};
  r.action = action;
  r.drain_overrides = overrides;
  return r;
}

TEST(drain_resource, reads_owner_mirror_phase_gpu_requests_and_devices) {
  auto daemon = pod("monitoring", "exporter");
  daemon["metadata"]["ownerReferences"] = {{{"kind", "Node"}, {"controller", false}},
                                           {{"kind", "DaemonSet"}, {"controller", true}}};
  auto mirror = pod("kube-system", "etcd");
  mirror["metadata"]["annotations"]["kubernetes.io/config.mirror"] = "abc";
  auto done = pod("batch", "finished");
  done["status"]["phase"] = "Succeeded";
  auto trainer = pod("train", "job");
  trainer["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "2";
  trainer["metadata"]["annotations"][gpu_devices_annotation] =
    R"({"devices":[{"resourceName":"nvidia.com/gpu","deviceIds":["GPU-a","GPU-b"]}]})";
  trainer["metadata"]["labels"] = {{"app", "trainer"}, {"replicas", 3}};
  auto unmapped = pod("train", "unmapped");
  unmapped["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = 1;

  auto pods = pods_from_list(list_of({daemon, mirror, done, trainer, unmapped}));
  ASSERT_TRUE(pods.has_value()) << pods.error().to_string();
  ASSERT_EQ(pods->size(), 5u);
  EXPECT_EQ((*pods)[0].owner_kind, "DaemonSet");
  EXPECT_TRUE((*pods)[1].mirror);
  EXPECT_TRUE((*pods)[2].finished);
  EXPECT_TRUE((*pods)[3].requests_gpu);
  EXPECT_EQ((*pods)[3].gpu_uuids, (std::vector<std::string>{"GPU-a", "GPU-b"}));
  // String labels only: a label value can be nothing else.
  EXPECT_EQ((*pods)[3].labels, (std::map<std::string, std::string>{{"app", "trainer"}}));
  EXPECT_TRUE((*pods)[4].requests_gpu);
  EXPECT_FALSE((*pods)[4].gpu_uuids.has_value());              // GPUs unknown: full drain
  EXPECT_EQ((*pods)[0].gpu_uuids, std::vector<std::string>{}); // holds none, known
}

// seed 000 §4.3 case 3: a full drain while the janitor's Jobs run on the node.
// The Jobs are the janitor's own bodies, in a namespace the drain does not
// know as vigil's: their pods are recognised by vigil's Job label.
TEST(drain_resource, the_janitors_job_pods_are_never_drained) {
  janitor::gpu_reset_request reset{"gr-1", "uid-1", "node-1", "GPU-a", "XID 79", "ev-1"};
  janitor::gpu_reset_options reset_options;
  reset_options.job_namespace = "ops";
  auto reset_job =
    janitor::build_reset_job(reset, janitor::reset_job_name(reset.name), reset_options);
  janitor::reboot_object reboot;
  reboot.name = "rn-1";
  reboot.uid = "uid-2";
  reboot.node_name = "node-1";
  janitor::reboot_options reboot_options;
  reboot_options.job_namespace = "ops";
  auto reboot_job = janitor::build_reboot_job(
    reboot, janitor::reboot_job_name(reboot.name), reboot_options);

  auto pods = pods_from_list(list_of({pod_of_job(reset_job, "vigil-gpu-reset-gr-1-x7k2p"),
                                      pod_of_job(reboot_job, "vigil-reboot-rn-1-q8w3e"),
                                      pod("train", "trainer")}));
  ASSERT_TRUE(pods.has_value()) << pods.error().to_string();
  drain_config config;
  ASSERT_EQ(
    std::count(config.vigil_namespaces.begin(), config.vigil_namespaces.end(), "ops"), 0);
  EXPECT_TRUE(is_vigils_own_pod((*pods)[0], config));
  EXPECT_TRUE(is_vigils_own_pod((*pods)[1], config));
  EXPECT_FALSE(is_vigils_own_pod((*pods)[2], config));

  drain_request full{recommended_action::restart_bm,
                     {},
                     stage_override{true, false},
                     drain_history::none,
                     ""};
  auto plan = plan_drain(*pods, full, config);
  EXPECT_EQ(plan.scope, drain_scope::full);
  ASSERT_EQ(plan.evict.size(), 1u);
  EXPECT_EQ(plan.evict[0].pod.name, "trainer");
  ASSERT_EQ(plan.skipped.size(), 2u);
  EXPECT_EQ(plan.skipped[0].reason, "vigil's own pod");
  EXPECT_EQ(plan.skipped[1].reason, "vigil's own pod");
}

// seed 000 §3.1 in production: the kubelet's allocations (through the node's
// agent) say which pod holds the failing GPU; nothing writes the annotation.
TEST(drain_resource, the_kubelets_allocations_make_a_partial_drain_possible) {
  auto trainer = pod("train", "trainer");
  trainer["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "2";
  auto other = pod("train", "other");
  other["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1";
  auto mig = pod("infer", "mig");
  mig["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1";
  const auto body = list_of({trainer, other, mig});
  gpu_allocations report;
  report.node = "node-1";
  report.allocations = {
    {"train", "trainer", "main", "nvidia.com/gpu", {"GPU-a", "GPU-b"}, {}},
    {"train", "other", "main", "nvidia.com/gpu", {"GPU-c"}, {}}};
  drain_config config;
  const drain_request reset{recommended_action::component_reset,
                            {"GPU-b"},
                            std::nullopt,
                            drain_history::none,
                            ""};

  // Without the MIG pod every GPU holder is known: only the trainer goes.
  auto pods = pods_from_list(list_of({trainer, other}));
  ASSERT_TRUE(pods.has_value());
  auto request = reset;
  request.gpu_mapping_note = apply_gpu_allocations(*pods, report);
  EXPECT_EQ(request.gpu_mapping_note, "");
  EXPECT_EQ((*pods)[0].gpu_source, "kubelet");
  auto plan = plan_drain(*pods, request, config);
  EXPECT_EQ(plan.scope, drain_scope::partial);
  ASSERT_EQ(plan.evict.size(), 1u);
  EXPECT_EQ(plan.evict[0].pod.name, "trainer");
  auto row = drain_started_body(plan, drain_key(request), false);
  EXPECT_EQ(row["evict"][0]["gpus"], json::array({"GPU-a", "GPU-b"}));
  EXPECT_EQ(row["evict"][0]["gpuSource"], "kubelet");

  // A GPU pod the report does not cover: full drain, and the row says why.
  pods = pods_from_list(body);
  request = reset;
  request.gpu_mapping_note = apply_gpu_allocations(*pods, report);
  plan = plan_drain(*pods, request, config);
  EXPECT_EQ(plan.scope, drain_scope::full);
  EXPECT_EQ(plan.why, "GPU mapping of pod infer/mig unknown: full drain");

  // The kubelet's socket was unavailable: full drain, with the agent's reason.
  gpu_allocations down;
  down.node = "node-1";
  down.available = false;
  down.error = "/var/lib/kubelet/pod-resources/kubelet.sock: List: UNAVAILABLE";
  pods = pods_from_list(list_of({trainer, other}));
  request = reset;
  request.gpu_mapping_note = apply_gpu_allocations(*pods, down);
  plan = plan_drain(*pods, request, config);
  EXPECT_EQ(plan.scope, drain_scope::full);
  EXPECT_NE(
    plan.why.find("PodResources API was unavailable to the node's agent: "
                  "/var/lib/kubelet/pod-resources/kubelet.sock: List: UNAVAILABLE"),
    std::string::npos)
    << plan.why;

  // No report at all.
  pods = pods_from_list(list_of({trainer}));
  request = reset;
  request.gpu_mapping_note = apply_gpu_allocations(*pods, std::nullopt);
  plan = plan_drain(*pods, request, config);
  EXPECT_EQ(plan.scope, drain_scope::full);
  EXPECT_NE(plan.why.find("has not reported"), std::string::npos) << plan.why;
}

TEST(drain_resource, devices_annotation_in_both_forms_and_garbage) {
  EXPECT_EQ(gpu_uuids_from_annotation(
              R"([{"resourceName":"nvidia.com/gpu","deviceIds":["GPU-x"]},
                  {"resourceName":"rdma/ib","deviceIds":["mlx5_0"]}])"),
            std::vector<std::string>{"GPU-x"});
  EXPECT_FALSE(gpu_uuids_from_annotation("not json"));
  EXPECT_FALSE(gpu_uuids_from_annotation(R"({"devices":7})"));
  EXPECT_FALSE(gpu_uuids_from_annotation(R"([{"resourceName":"nvidia.com/gpu"}])"));
  EXPECT_FALSE(
    gpu_uuids_from_annotation(R"([{"resourceName":"nvidia.com/gpu","deviceIds":[1]}])"));
}

TEST(drain_resource, a_list_that_is_not_one_names_the_problem) {
  auto bad = pods_from_list("{\"kind\":\"Status\"}");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().to_string().find("items"), std::string::npos);
  EXPECT_FALSE(pods_from_list("\x01garbage").has_value());
  EXPECT_FALSE(pods_from_list(list_of({json{{"metadata", json::object()}}})).has_value());
}

TEST(drain_resource, requests_name_the_pod_and_leave_429_to_the_drain) {
  auto evict = eviction_request({"train", "job"});
  EXPECT_EQ(evict.verb, "POST");
  EXPECT_EQ(evict.path, "/api/v1/namespaces/train/pods/job/eviction");
  EXPECT_FALSE(evict.retry_throttled);
  auto body = json::parse(evict.body);
  EXPECT_EQ(body["kind"], "Eviction");
  EXPECT_EQ(body["apiVersion"], "policy/v1");
  EXPECT_EQ(body["metadata"]["namespace"], "train");
  auto del = pod_delete_request({"train", "job"});
  EXPECT_EQ(del.verb, "DELETE");
  EXPECT_EQ(del.path, "/api/v1/namespaces/train/pods/job");
  auto list = node_pods_request("node-1");
  EXPECT_EQ(list.path, "/api/v1/pods");
  EXPECT_EQ(list.query, "fieldSelector=spec.nodeName%3Dnode-1");
}

TEST(drain_resource, answers_read_as_step_results) {
  EXPECT_EQ(classify(kube::kube_response{201, "{}"}), step_result::accepted);
  EXPECT_EQ(classify(kube::kube_error{404, "NotFound", "", {}}), step_result::not_found);
  EXPECT_EQ(classify(kube::kube_error{429, "TooManyRequests", "", {}}),
            step_result::too_many_requests);
  EXPECT_EQ(classify(kube::kube_error{500, "InternalError", "", {}}),
            step_result::failed);
  EXPECT_EQ(classify(kube::kube_error{0, "Transport", "", {}}), step_result::failed);
}

TEST(desired_drain, component_resets_alone_drain_their_gpus) {
  auto request = desired_drain({record(recommended_action::component_reset, "GPU-b"),
                                record(recommended_action::component_reset, "GPU-a")});
  ASSERT_TRUE(request.has_value());
  EXPECT_EQ(request->action, recommended_action::component_reset);
  EXPECT_EQ(request->gpu_uuids, (std::vector<std::string>{"GPU-a", "GPU-b"}));
  EXPECT_EQ(drain_key(*request), "partial:GPU-a,GPU-b");
}

TEST(desired_drain, any_other_action_drains_the_whole_node) {
  auto request = desired_drain({record(recommended_action::component_reset, "GPU-a"),
                                record(recommended_action::restart_vm, "GPU-b")});
  ASSERT_TRUE(request.has_value());
  EXPECT_EQ(drain_key(*request), "full");
  EXPECT_TRUE(request->gpu_uuids.empty());
}

TEST(desired_drain, action_none_needs_no_drain) {
  EXPECT_FALSE(desired_drain({record(recommended_action::none, "GPU-a")}));
  EXPECT_FALSE(desired_drain({}));
}

TEST(desired_drain, overrides_force_from_any_skip_only_from_all) {
  const stage_override force{true, false}, skip{false, true};
  auto forced = desired_drain({record(recommended_action::restart_vm, "GPU-a", force),
                               record(recommended_action::restart_vm, "GPU-b", skip)});
  ASSERT_TRUE(forced && forced->overrides);
  EXPECT_TRUE(forced->overrides->force);
  EXPECT_FALSE(forced->overrides->skip);
  auto partly = desired_drain({record(recommended_action::restart_vm, "GPU-a", skip),
                               record(recommended_action::restart_vm, "GPU-b")});
  ASSERT_TRUE(partly);
  EXPECT_FALSE(partly->overrides.has_value());
  auto skipped = desired_drain({record(recommended_action::restart_vm, "GPU-a", skip)});
  ASSERT_TRUE(skipped && skipped->overrides);
  EXPECT_TRUE(skipped->overrides->skip);
}

TEST(desired_drain, a_reset_without_a_gpu_is_a_full_drain) {
  auto request = desired_drain({record(recommended_action::component_reset, "")});
  ASSERT_TRUE(request.has_value());
  EXPECT_TRUE(request->gpu_uuids.empty());
  EXPECT_EQ(drain_key(*request), "full");
}

} // namespace
} // namespace vigil::control
