#include "actors/janitor/gpu_reset_plan.hpp"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

namespace vigil::janitor {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

const wall_time t0 = from_unix(1'700'000'000, 0);
const std::string dp = "nvidia.com/gpu.deploy.device-plugin";
const std::string dcgm = "nvidia.com/gpu.deploy.dcgm";
const std::string exporter = "nvidia.com/gpu.deploy.dcgm-exporter";
const std::string gfd = "nvidia.com/gpu.deploy.gpu-feature-discovery";

gpu_reset_request request() {
  return {"reset-node1-abc", "uid-1",
          "node1",           "GPU-455d8f70-2051-db6c-0430-ffc457bff834",
          "XID 79",          "event-7"};
}

// The GPU operator's usual labels: three "true", gfd absent.
std::map<std::string, std::string> operator_labels() {
  return {
    {dp, "true"}, {dcgm, "true"}, {exporter, "true"}, {"kubernetes.io/os", "linux"}};
}

std::map<std::string, std::string> torn_down() {
  return {{dp, "false"}, {dcgm, "false"}, {exporter, "false"}, {gfd, "false"}};
}

reset_observation observe(wall_time now, std::map<std::string, std::string> labels,
                          std::size_t pods = 0,
                          std::optional<job_observation> job = std::nullopt) {
  reset_observation o;
  o.now = now;
  o.node_labels = std::move(labels);
  o.operand_pods_on_node = pods;
  o.job = std::move(job);
  return o;
}

// Drives a reset to its Job: teardown done, Job created.
gpu_reset_status with_job_created() {
  auto s1 = reconcile_gpu_reset(request(), {}, observe(t0, operator_labels()));
  auto s2 = reconcile_gpu_reset(request(), s1.status, observe(t0 + 2s, torn_down(), 0));
  EXPECT_TRUE(s2.create_job.has_value());
  return s2.status;
}

TEST(gpu_reset_plan, teardown_sets_every_operand_label_to_false_and_remembers) {
  auto step = reconcile_gpu_reset(request(), {}, observe(t0, operator_labels(), 4));
  EXPECT_EQ(step.status.phase, reset_phase::tearing_down);
  EXPECT_EQ(step.status.started_at, t0);
  ASSERT_EQ(step.label_patch.size(), 4u);
  for (const auto& [key, value] : step.label_patch)
    EXPECT_EQ(value, std::optional<std::string>{"false"}) << key;
  EXPECT_EQ(step.status.saved_labels.at(dp), "true");
  EXPECT_EQ(step.status.saved_labels.at(gfd), "");
  EXPECT_FALSE(step.create_job.has_value());
  EXPECT_EQ(step.requeue_after, 2s);
}

TEST(gpu_reset_plan, waits_for_operand_pods_then_creates_one_job) {
  auto s1 = reconcile_gpu_reset(request(), {}, observe(t0, operator_labels(), 4));
  auto s2 = reconcile_gpu_reset(request(), s1.status, observe(t0 + 2s, torn_down(), 2));
  EXPECT_TRUE(s2.label_patch.empty());
  EXPECT_FALSE(s2.create_job.has_value());
  EXPECT_EQ(s2.requeue_after, 5s);
  EXPECT_EQ(s2.status.saved_labels.at(dp), "true"); // not overwritten by "false"
  auto s3 = reconcile_gpu_reset(request(), s2.status, observe(t0 + 7s, torn_down(), 0));
  EXPECT_EQ(s3.status.phase, reset_phase::resetting);
  ASSERT_TRUE(s3.create_job.has_value());
  EXPECT_EQ(s3.status.job_name, "vigil-gpu-reset-reset-node1-abc");
  EXPECT_EQ(s3.status.job_created_at, t0 + 7s);
  job_observation running;
  running.active = true;
  auto s4 =
    reconcile_gpu_reset(request(), s3.status, observe(t0 + 17s, torn_down(), 0, running));
  EXPECT_FALSE(s4.create_job.has_value());
  EXPECT_EQ(s4.requeue_after, 10s);
  // Not seen yet (cache lag): still no second Job.
  auto s5 = reconcile_gpu_reset(request(), s3.status, observe(t0 + 17s, torn_down(), 0));
  EXPECT_FALSE(s5.create_job.has_value());
}

TEST(gpu_reset_plan, success_restores_labels_then_finishes) {
  auto status = with_job_created();
  job_observation done;
  done.succeeded = true;
  auto s1 =
    reconcile_gpu_reset(request(), status, observe(t0 + 60s, torn_down(), 0, done));
  EXPECT_EQ(s1.status.phase, reset_phase::restoring);
  EXPECT_EQ(s1.label_patch.at(dp), std::optional<std::string>{"true"});
  EXPECT_EQ(s1.label_patch.at(gfd), std::nullopt); // was absent: removed
  EXPECT_FALSE(s1.finished);
  auto restored = operator_labels();
  auto s2 =
    reconcile_gpu_reset(request(), s1.status, observe(t0 + 62s, restored, 0, done));
  EXPECT_TRUE(s2.label_patch.empty());
  EXPECT_TRUE(s2.finished);
  EXPECT_EQ(s2.status.phase, reset_phase::succeeded);
  EXPECT_EQ(s2.status.completed_at, t0 + 62s);
  auto st = status_json(s2.status);
  EXPECT_EQ(st["phase"], "Succeeded");
  EXPECT_FALSE(st.contains("failureReason"));
  EXPECT_EQ(st["startedAt"], format_rfc3339(t0));
  EXPECT_EQ(st["savedLabels"][dp], "true");
  bool complete = false;
  for (const auto& c : st["conditions"])
    if (c["type"] == "Complete")
      complete = c["status"] == "True";
  EXPECT_TRUE(complete);
  // Done is done.
  auto s3 = reconcile_gpu_reset(request(), s2.status, observe(t0 + 99s, restored));
  EXPECT_FALSE(s3.status_changed);
  EXPECT_FALSE(s3.finished);
}

TEST(gpu_reset_plan, restore_leaves_labels_someone_else_changed) {
  auto status = with_job_created();
  job_observation done;
  done.succeeded = true;
  auto labels = torn_down();
  labels[dcgm] = "true";  // someone else redeployed dcgm meanwhile
  labels.erase(exporter); // and removed the exporter's label
  auto s1 = reconcile_gpu_reset(request(), status, observe(t0 + 60s, labels, 0, done));
  EXPECT_EQ(s1.label_patch.count(dcgm), 0u);
  EXPECT_EQ(s1.label_patch.count(exporter), 0u);
  EXPECT_EQ(s1.label_patch.count(dp), 1u);
  EXPECT_EQ(s1.notes.size(), 1u); // exporter; dcgm already holds its saved value
}

TEST(gpu_reset_plan, job_failures_map_to_reasons_and_still_restore) {
  struct row {
    std::optional<int> exit_code;
    bool deadline;
    std::string_view reason;
  };
  for (const auto& r : {row{2, false, failure_reason::reset_command_failed},
                        row{3, false, failure_reason::health_check_failed},
                        row{1, false, failure_reason::job_failed},
                        row{std::nullopt, true, failure_reason::timeout}}) {
    job_observation job;
    job.failed = true;
    job.exit_code = r.exit_code;
    job.deadline_exceeded = r.deadline;
    auto s1 = reconcile_gpu_reset(request(), with_job_created(),
                                  observe(t0 + 60s, torn_down(), 0, job));
    EXPECT_EQ(s1.status.failure_reason, r.reason);
    EXPECT_EQ(s1.status.phase, reset_phase::restoring);
    EXPECT_EQ(s1.label_patch.size(), 4u);
    auto s2 = reconcile_gpu_reset(request(), s1.status,
                                  observe(t0 + 62s, operator_labels(), 0, job));
    EXPECT_EQ(s2.status.phase, reset_phase::failed);
    EXPECT_TRUE(s2.finished);
    EXPECT_EQ(status_json(s2.status)["failureReason"], r.reason);
  }
}

TEST(gpu_reset_plan, a_job_running_past_its_deadline_is_deleted) {
  auto status = with_job_created();
  job_observation running;
  running.active = true;
  auto s1 = reconcile_gpu_reset(request(), status,
                                observe(t0 + 2s + 1500s, torn_down(), 0, running));
  EXPECT_FALSE(s1.delete_job); // within the grace for activeDeadlineSeconds
  auto s2 = reconcile_gpu_reset(request(), status,
                                observe(t0 + 2s + 1510s, torn_down(), 0, running));
  EXPECT_TRUE(s2.delete_job);
  EXPECT_EQ(s2.status.failure_reason, failure_reason::timeout);
  EXPECT_EQ(s2.label_patch.size(), 4u);
}

TEST(gpu_reset_plan, teardown_timeout_fails_and_restores) {
  auto s1 = reconcile_gpu_reset(request(), {}, observe(t0, operator_labels(), 4));
  auto s2 = reconcile_gpu_reset(request(), s1.status, observe(t0 + 300s, torn_down(), 1));
  EXPECT_EQ(s2.status.failure_reason, failure_reason::teardown_failed);
  EXPECT_FALSE(s2.create_job.has_value());
  EXPECT_EQ(s2.label_patch.size(), 4u);
}

TEST(gpu_reset_plan, missing_node_and_job_create_failure) {
  auto o = observe(t0, {});
  o.node_exists = false;
  auto s = reconcile_gpu_reset(request(), {}, o);
  EXPECT_EQ(s.status.phase, reset_phase::failed);
  EXPECT_TRUE(s.label_patch.empty());
  auto failed = job_create_failed(with_job_created(), "forbidden", t0 + 3s);
  EXPECT_EQ(failed.failure_reason, failure_reason::job_create_failed);
  EXPECT_EQ(failed.phase, reset_phase::restoring);
}

TEST(gpu_reset_plan, the_job_is_pinned_privileged_and_bounded) {
  auto job = build_reset_job(request(), "vigil-gpu-reset-x", {});
  EXPECT_EQ(job["apiVersion"], "batch/v1");
  EXPECT_EQ(job["kind"], "Job");
  EXPECT_EQ(job["metadata"]["namespace"], "vigil-system");
  EXPECT_EQ(job["metadata"]["ownerReferences"][0]["kind"], "GPUReset");
  EXPECT_EQ(job["metadata"]["ownerReferences"][0]["uid"], "uid-1");
  EXPECT_EQ(job["spec"]["activeDeadlineSeconds"], 1500);
  EXPECT_EQ(job["spec"]["backoffLimit"], 0);
  const auto& pod = job["spec"]["template"]["spec"];
  EXPECT_EQ(pod["nodeName"], "node1");
  EXPECT_EQ(pod["serviceAccountName"], "vigil-gpu-reset");
  EXPECT_EQ(pod["restartPolicy"], "Never");
  EXPECT_EQ(pod["tolerations"][0]["operator"], "Exists");
  EXPECT_FALSE(pod.contains("runtimeClassName"));
  const auto& c = pod["containers"][0];
  EXPECT_EQ(c["securityContext"]["privileged"], true);
  EXPECT_EQ(c["command"].back(), "GPU-455d8f70-2051-db6c-0430-ffc457bff834");
  EXPECT_EQ(c["command"][1], "/opt/vigil/gpu-reset.sh");
  EXPECT_EQ(c["env"][0]["value"], "GPU-455d8f70-2051-db6c-0430-ffc457bff834");
  EXPECT_EQ(pod["volumes"].size(), 2u);

  gpu_reset_options inline_options;
  inline_options.inline_script = "echo hi";
  inline_options.runtime_class = "nvidia";
  auto inline_job = build_reset_job(request(), "j", inline_options);
  const auto& ipod = inline_job["spec"]["template"]["spec"];
  EXPECT_EQ(ipod["runtimeClassName"], "nvidia");
  EXPECT_EQ(ipod["containers"][0]["command"][1], "-c");
  EXPECT_EQ(ipod["containers"][0]["command"][2], "echo hi");
  EXPECT_EQ(ipod["volumes"].size(), 1u);
}

TEST(gpu_reset_plan, job_names_fit_63_characters) {
  EXPECT_EQ(reset_job_name("r1"), "vigil-gpu-reset-r1");
  auto long_name = reset_job_name(std::string(200, 'a'));
  EXPECT_EQ(long_name.size(), 63u);
  EXPECT_NE(long_name, reset_job_name(std::string(199, 'a') + "b"));
  EXPECT_EQ(parse_reset_phase("TearingDown"), reset_phase::tearing_down);
  EXPECT_EQ(parse_reset_phase(""), reset_phase::pending);
  EXPECT_FALSE(parse_reset_phase("Bogus").has_value());
}

} // namespace
} // namespace vigil::janitor
