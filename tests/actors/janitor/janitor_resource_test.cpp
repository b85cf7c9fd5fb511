#include "actors/janitor/janitor_resource.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace vigil::janitor {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

wall_time at(std::int64_t seconds) {
  return wall_time{} + std::chrono::seconds{seconds};
}

json reset_cr() {
  return {{"metadata",
           {{"name", "gpureset-1"},
            {"uid", "u-1"},
            {"creationTimestamp", "2026-11-23T10:00:00Z"}}},
          {"spec",
           {{"nodeName", "node-1"},
            {"gpuUUIDs", {"GPU-a"}},
            {"reason", "COMPONENT_RESET"},
            {"sourceEventId", "e1"}}}};
}

TEST(janitor_resource, a_gpureset_is_read_and_its_status_survives_a_round_trip) {
  auto cr = reset_cr();
  auto fresh = read_gpu_reset(cr);
  ASSERT_TRUE(fresh.has_value()) << fresh.error().to_string();
  EXPECT_EQ(fresh->request.gpu_uuid, "GPU-a");
  EXPECT_EQ(fresh->request.uid, "u-1");
  EXPECT_EQ(fresh->status.phase, reset_phase::pending);
  // One reconcile, its status written and read back: the next reconcile
  // resumes exactly there (the janitor is level-based, seed 001).
  reset_observation observed;
  observed.now = at(100);
  observed.node_labels = {{"nvidia.com/gpu.deploy.dcgm", "true"}};
  auto step = reconcile_gpu_reset(fresh->request, fresh->status, observed);
  cr["status"] = status_json(step.status);
  auto resumed = read_gpu_reset(cr);
  ASSERT_TRUE(resumed.has_value());
  EXPECT_EQ(resumed->status.phase, step.status.phase);
  EXPECT_EQ(resumed->status.saved_labels, step.status.saved_labels);
  EXPECT_EQ(resumed->status.started_at, step.status.started_at);
  EXPECT_EQ(resumed->status.conditions.size(), step.status.conditions.size());
}

TEST(janitor_resource, a_bad_gpureset_names_the_field) {
  auto no_node = reset_cr();
  no_node["spec"].erase("nodeName");
  EXPECT_EQ(read_gpu_reset(no_node).error().where, "spec.nodeName");
  auto two = reset_cr();
  two["spec"]["gpuUUIDs"] = {"GPU-a", "GPU-b"};
  EXPECT_EQ(read_gpu_reset(two).error().where, "spec.gpuUUIDs");
  auto none = reset_cr();
  none["spec"]["gpuUUIDs"] = json::array();
  EXPECT_EQ(read_gpu_reset(none).error().where, "spec.gpuUUIDs");
  EXPECT_FALSE(read_gpu_reset(json::array()).has_value());
  EXPECT_EQ(read_gpu_reset(json{{"spec", {{"nodeName", "n"}}}}).error().where,
            "metadata.name");
}

TEST(janitor_resource, the_finalizer_and_a_deletion_are_read_and_patched) {
  auto cr = reset_cr();
  cr["metadata"]["resourceVersion"] = "42";
  cr["metadata"]["finalizers"] = {"someone.else/keep"};
  auto plain = read_gpu_reset(cr);
  ASSERT_TRUE(plain.has_value());
  EXPECT_FALSE(plain->request.has_finalizer);
  EXPECT_FALSE(plain->request.deletion_requested);
  EXPECT_EQ(plain->resource_version, "42");
  auto add = json::parse(finalizer_patch_body(*plain, true));
  EXPECT_EQ(add["metadata"]["finalizers"],
            json::array({"someone.else/keep", "vigil.dev/restore-operand-labels"}));
  EXPECT_EQ(add["metadata"]["resourceVersion"], "42"); // a concurrent change: 409

  cr["metadata"]["finalizers"] = {"vigil.dev/restore-operand-labels",
                                  "someone.else/keep"};
  cr["metadata"]["deletionTimestamp"] = "2026-11-23T10:05:00Z";
  auto going = read_gpu_reset(cr);
  ASSERT_TRUE(going.has_value());
  EXPECT_TRUE(going->request.has_finalizer);
  EXPECT_TRUE(going->request.deletion_requested);
  auto remove = json::parse(finalizer_patch_body(*going, false));
  EXPECT_EQ(remove["metadata"]["finalizers"], json::array({"someone.else/keep"}));
  going->finalizers = {"vigil.dev/restore-operand-labels"};
  EXPECT_EQ(json::parse(finalizer_patch_body(*going, false))["metadata"]["finalizers"],
            json::array());

  // status.gpuType and jobCompletedAt survive the round trip.
  gpu_reset_status status;
  status.phase = reset_phase::restoring;
  status.started_at = at(10);
  status.gpu_type = "NVIDIA-H100-80GB-HBM3";
  status.job_completed_at = at(70);
  cr["status"] = status_json(status);
  auto read = read_gpu_reset(cr);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->status.gpu_type, "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(read->status.job_completed_at, at(70));
}

reboot_object reboot_cr() {
  auto cr = read_reboot_node(json{{"metadata", {{"name", "reboot-1"}, {"uid", "u-2"}}},
                                  {"spec", {{"nodeName", "node-1"}}}});
  EXPECT_TRUE(cr.has_value());
  return *cr;
}

TEST(janitor_resource, a_reboot_records_the_boot_id_then_waits_for_a_new_one_ready) {
  auto cr = reboot_cr();
  reboot_options options;
  auto baseline =
    reconcile_reboot(cr, node_boot_observation{"boot-1", true}, at(0), options);
  EXPECT_EQ(baseline.status.phase, reboot_phase::rebooting);
  EXPECT_EQ(baseline.status.boot_id_before, "boot-1");
  EXPECT_FALSE(baseline.create_job.has_value()); // the baseline is stored first
  cr.status = baseline.status;
  auto first =
    reconcile_reboot(cr, node_boot_observation{"boot-1", true}, at(5), options);
  EXPECT_EQ(first.status.boot_id_before, "boot-1");
  ASSERT_TRUE(first.create_job.has_value());
  auto job = json::parse(*first.create_job);
  EXPECT_EQ(job["spec"]["template"]["spec"]["nodeName"], "node-1");
  EXPECT_EQ(job["spec"]["template"]["spec"]["hostPID"], true);
  // The drain knows the Job's pod as vigil's own by this label (drain_plan).
  EXPECT_EQ(job["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "vigil");
  EXPECT_EQ(job["metadata"]["ownerReferences"][0]["uid"], "u-2");
  EXPECT_EQ(job["metadata"]["name"], reboot_job_name("reboot-1"));
  cr.status = first.status;
  auto same =
    reconcile_reboot(cr, node_boot_observation{"boot-1", true}, at(60), options);
  EXPECT_FALSE(same.status_changed);
  EXPECT_FALSE(same.create_job.has_value()); // never a second reboot Job
  auto not_ready =
    reconcile_reboot(cr, node_boot_observation{"boot-2", false}, at(120), options);
  EXPECT_EQ(not_ready.status.phase, reboot_phase::rebooting);
  auto done =
    reconcile_reboot(cr, node_boot_observation{"boot-2", true}, at(180), options);
  EXPECT_EQ(done.status.phase, reboot_phase::succeeded);
  EXPECT_EQ(done.status.boot_id_after, "boot-2");
  EXPECT_TRUE(done.finished);
  auto status = reboot_status_json(done.status);
  EXPECT_EQ(status["phase"], "Succeeded");
  EXPECT_EQ(status["conditions"][0]["type"], "Complete");
  EXPECT_EQ(status["conditions"][0]["status"], "True");
}

TEST(janitor_resource, a_reboot_fails_on_timeout_or_a_missing_node) {
  auto cr = reboot_cr();
  reboot_options options;
  options.timeout = 600s;
  cr.status =
    reconcile_reboot(cr, node_boot_observation{"boot-1", true}, at(0), options).status;
  cr.status =
    reconcile_reboot(cr, node_boot_observation{"boot-1", true}, at(1), options).status;
  auto late =
    reconcile_reboot(cr, node_boot_observation{"boot-1", true}, at(601), options);
  EXPECT_EQ(late.status.phase, reboot_phase::failed);
  EXPECT_EQ(late.status.failure_reason, "timeout");
  auto gone = reconcile_reboot(reboot_cr(), std::nullopt, at(0), options);
  EXPECT_EQ(gone.status.phase, reboot_phase::failed);
  EXPECT_EQ(gone.status.failure_reason, "node_not_found");
  // Read back from its own status.
  json cr_json = {{"metadata", {{"name", "reboot-1"}}},
                  {"spec", {{"nodeName", "node-1"}}},
                  {"status", reboot_status_json(late.status)}};
  auto reread = read_reboot_node(cr_json);
  ASSERT_TRUE(reread.has_value());
  EXPECT_EQ(reread->status.phase, reboot_phase::failed);
  EXPECT_EQ(reread->status.boot_id_before, "boot-1");
}

// A reboot after a failed reset keeps the driver's bug report first: the Job
// runs, its outcome and where it went are in the status, and only then is the
// reboot asked for, with its own timeout from then.
TEST(janitor_resource, a_reboot_after_a_failed_reset_collects_the_bug_report_first) {
  auto cr = *read_reboot_node(
    json{{"metadata", {{"name", "reboot-1"}, {"uid", "u-2"}}},
         {"spec", {{"nodeName", "node-1"}, {"collectBugReport", true}}}});
  ASSERT_TRUE(cr.collect_bug_report);
  reboot_options options;
  options.timeout = 600s;
  cr.status =
    reconcile_reboot(cr, node_boot_observation{"boot-1", true}, at(0), options).status;
  auto report =
    reconcile_reboot(cr, node_boot_observation{"boot-1", true}, at(5), options);
  ASSERT_TRUE(report.create_job.has_value());
  EXPECT_TRUE(report.status.job_name.empty()); // no reboot yet
  EXPECT_EQ(report.status.bug_report.job, bug_report_job_name("reboot-1"));
  EXPECT_EQ(report.status.bug_report.path,
            "node-1:/var/log/vigil/bug-reports/nvidia-bug-report-reboot-1.log.gz");
  auto job = json::parse(*report.create_job);
  const auto& pod = job["spec"]["template"]["spec"];
  EXPECT_EQ(pod["nodeName"], "node-1");
  EXPECT_EQ(pod["volumes"][0]["hostPath"]["path"], "/");
  const auto command = pod["containers"][0]["command"].dump();
  EXPECT_NE(command.find("nvidia-bug-report.sh --output-file "
                         "'/var/log/vigil/bug-reports/nvidia-bug-report-reboot-1.log'"),
            std::string::npos);
  EXPECT_EQ(job["spec"]["activeDeadlineSeconds"], 600);
  EXPECT_EQ(job["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "vigil");
  cr.status = report.status;

  // Running: the reboot waits.
  job_observation running;
  running.active = true;
  auto wait =
    reconcile_reboot(cr, node_boot_observation{"boot-1", true}, at(60), options, running);
  EXPECT_FALSE(wait.create_job.has_value());
  EXPECT_FALSE(wait.status_changed);

  // Done: the outcome is stored, then the reboot Job follows.
  job_observation done;
  done.succeeded = true;
  auto collected =
    reconcile_reboot(cr, node_boot_observation{"boot-1", true}, at(300), options, done);
  EXPECT_EQ(collected.status.bug_report.outcome, "collected");
  EXPECT_EQ(collected.status.started_at, at(300));
  EXPECT_FALSE(collected.create_job.has_value());
  cr.status = collected.status;
  auto reboot =
    reconcile_reboot(cr, node_boot_observation{"boot-1", true}, at(301), options);
  ASSERT_TRUE(reboot.create_job.has_value());
  EXPECT_EQ(reboot.status.job_name, reboot_job_name("reboot-1"));
  cr.status = reboot.status;
  // The reboot's 600 s count from 300 s, not from the CR's start.
  auto still =
    reconcile_reboot(cr, node_boot_observation{"boot-1", true}, at(800), options);
  EXPECT_EQ(still.status.phase, reboot_phase::rebooting);

  // Its status survives a round trip.
  json cr_json = {{"metadata", {{"name", "reboot-1"}}},
                  {"spec", {{"nodeName", "node-1"}}},
                  {"status", reboot_status_json(still.status)}};
  auto reread = read_reboot_node(cr_json);
  ASSERT_TRUE(reread.has_value());
  EXPECT_EQ(reread->status.bug_report.outcome, "collected");
  EXPECT_EQ(reread->status.bug_report.path, reboot.status.bug_report.path);
}

TEST(janitor_resource, a_bug_report_that_fails_or_hangs_never_stops_the_reboot) {
  auto cr = *read_reboot_node(
    json{{"metadata", {{"name", "reboot-2"}}},
         {"spec", {{"nodeName", "node-1"}, {"collectBugReport", true}}}});
  reboot_options options;
  options.bug_report.timeout = 120s;
  cr.status =
    reconcile_reboot(cr, node_boot_observation{"boot-1", true}, at(0), options).status;
  cr.status =
    reconcile_reboot(cr, node_boot_observation{"boot-1", true}, at(1), options).status;
  job_observation failed;
  failed.failed = true;
  failed.message = "BackoffLimitExceeded";
  EXPECT_EQ(
    reconcile_reboot(cr, node_boot_observation{"boot-1", true}, at(30), options, failed)
      .status.bug_report.outcome,
    "failed: BackoffLimitExceeded");
  auto hung =
    reconcile_reboot(cr, node_boot_observation{"boot-1", true}, at(121), options);
  EXPECT_EQ(hung.status.bug_report.outcome, "timed out");
  // Turned off: straight to the reboot.
  options.bug_report.enabled = false;
  auto off = *read_reboot_node(
    json{{"metadata", {{"name", "reboot-3"}}},
         {"spec", {{"nodeName", "node-1"}, {"collectBugReport", true}}}});
  off.status =
    reconcile_reboot(off, node_boot_observation{"boot-1", true}, at(0), options).status;
  auto direct =
    reconcile_reboot(off, node_boot_observation{"boot-1", true}, at(1), options);
  EXPECT_EQ(direct.status.job_name, reboot_job_name("reboot-3"));
  EXPECT_TRUE(direct.status.bug_report.job.empty());
}

TEST(janitor_resource, the_cluster_is_read_as_the_plans_need_it) {
  json node = {{"metadata", {{"labels", {{"a", "1"}, {"n", 3}}}}},
               {"status",
                {{"nodeInfo", {{"bootID", "b-9"}}},
                 {"conditions",
                  {{{"type", "MemoryPressure"}, {"status", "False"}},
                   {{"type", "Ready"}, {"status", "True"}}}}}}};
  auto boot = read_boot(node);
  EXPECT_EQ(boot.boot_id, "b-9");
  EXPECT_TRUE(boot.ready);
  EXPECT_EQ(read_labels(node), (std::map<std::string, std::string>{{"a", "1"}}));
  EXPECT_EQ(read_boot(json::array()).boot_id, "");

  json pods = {{"items",
                {{{"metadata", {{"labels", {{"app", "nvidia-dcgm"}}}}},
                  {"status", {{"phase", "Running"}}}},
                 {{"metadata", {{"labels", {{"app", "gpu-feature-discovery"}}}}},
                  {"status", {{"phase", "Succeeded"}}}},
                 {{"metadata", {{"labels", {{"app", "trainer"}}}}}}}}};
  EXPECT_EQ(count_operand_pods(pods), 1u);
  EXPECT_EQ(count_operand_pods(json("garbage")), 0u);

  // The reset Job's pods that have not ended, stopping ones included.
  auto reset_pod = [](const char* ns, json labels, const char* phase, bool deleting) {
    json pod = {{"metadata", {{"namespace", ns}, {"labels", std::move(labels)}}},
                {"status", {{"phase", phase}}}};
    if (deleting)
      pod["metadata"]["deletionTimestamp"] = "2026-11-23T10:00:00Z";
    return pod;
  };
  json reset_pods = {
    {"items",
     {reset_pod("vigil-system", {{"batch.kubernetes.io/job-name", "vigil-gpu-reset-r"}},
                "Running", true),
      reset_pod("vigil-system", {{"job-name", "vigil-gpu-reset-r"}}, "Pending", false),
      reset_pod("vigil-system", {{"job-name", "vigil-gpu-reset-r"}}, "Failed", false),
      reset_pod("team-a", {{"job-name", "vigil-gpu-reset-r"}}, "Running", false),
      reset_pod("vigil-system", {{"job-name", "vigil-gpu-reset-other"}}, "Running",
                false)}}};
  EXPECT_EQ(count_job_pods(reset_pods, "vigil-system", "vigil-gpu-reset-r"), 2u);
  EXPECT_EQ(count_job_pods(reset_pods, "vigil-system", ""), 0u);
  EXPECT_EQ(count_job_pods(json("garbage"), "vigil-system", "vigil-gpu-reset-r"), 0u);

  // Running again: Running, not going, not reported unready.
  auto operand = [](const char* app, json status, bool deleting = false) {
    json pod = {{"metadata", {{"labels", {{"app", app}}}}},
                {"status", std::move(status)}};
    if (deleting)
      pod["metadata"]["deletionTimestamp"] = "2026-11-23T10:00:00Z";
    return pod;
  };
  json again = {{"items",
                 {operand("nvidia-device-plugin-daemonset",
                          {{"phase", "Running"},
                           {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}),
                  operand("nvidia-dcgm", {{"phase", "Running"}}),
                  operand("nvidia-dcgm-exporter",
                          {{"phase", "Running"},
                           {"conditions", {{{"type", "Ready"}, {"status", "False"}}}}}),
                  operand("gpu-feature-discovery", {{"phase", "Running"}}, true),
                  operand("trainer", {{"phase", "Running"}})}}};
  EXPECT_EQ(running_operands(again),
            (std::set<std::string>{"nvidia.com/gpu.deploy.device-plugin",
                                   "nvidia.com/gpu.deploy.dcgm"}));
  EXPECT_TRUE(running_operands(json("garbage")).empty());

  json failed_job = {{"status",
                      {{"failed", 1},
                       {"conditions",
                        {{{"type", "Failed"},
                          {"status", "True"},
                          {"reason", "DeadlineExceeded"},
                          {"message", "too slow"}}}}}}};
  auto job = read_job(failed_job);
  EXPECT_TRUE(job.failed);
  EXPECT_TRUE(job.deadline_exceeded);
  EXPECT_EQ(job.message, "too slow");
  EXPECT_EQ(job.finished_at, std::nullopt);
  failed_job["status"]["conditions"][0]["lastTransitionTime"] = "2026-11-23T10:04:00Z";
  EXPECT_EQ(read_job(failed_job).finished_at,
            std::optional<wall_time>{*parse_rfc3339("2026-11-23T10:04:00Z")});
  auto complete = read_job(
    json{{"status", {{"succeeded", 1}, {"completionTime", "2026-11-23T10:03:00Z"}}}});
  EXPECT_TRUE(complete.succeeded);
  EXPECT_EQ(complete.finished_at,
            std::optional<wall_time>{*parse_rfc3339("2026-11-23T10:03:00Z")});
  EXPECT_TRUE(read_job(json{{"status", {{"succeeded", 1}}}}).succeeded);
  EXPECT_FALSE(read_job(json::object()).failed);

  json job_pods = {
    {"items",
     {{{"status",
        {{"containerStatuses", {{{"state", {{"terminated", {{"exitCode", 2}}}}}}}}}}}}}};
  EXPECT_EQ(terminated_exit_code(job_pods), std::optional<int>{2});
  EXPECT_EQ(terminated_exit_code(json{{"items", json::array()}}), std::nullopt);

  auto patch = json::parse(label_patch_body({{"x", "false"}, {"y", std::nullopt}}));
  EXPECT_EQ(patch["metadata"]["labels"]["x"], "false");
  EXPECT_TRUE(patch["metadata"]["labels"]["y"].is_null());
}

} // namespace
} // namespace vigil::janitor
