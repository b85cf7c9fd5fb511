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

// A GPUReset the janitor has put its finalizer on (as it does first).
gpu_reset_request request() {
  gpu_reset_request r{"reset-node1-abc", "uid-1",
                      "node1",           "GPU-455d8f70-2051-db6c-0430-ffc457bff834",
                      "XID 79",          "event-7"};
  r.has_finalizer = true;
  return r;
}

gpu_reset_request deleted() {
  auto r = request();
  r.deletion_requested = true;
  return r;
}

// The GPU operator's usual labels: three "true", gfd absent.
std::map<std::string, std::string> operator_labels() {
  return {{dp, "true"},
          {dcgm, "true"},
          {exporter, "true"},
          {"kubernetes.io/os", "linux"},
          {"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}};
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

// The GPU operator has redeployed every operand whose label is "true".
reset_observation redeployed(wall_time now, std::map<std::string, std::string> labels,
                             std::optional<job_observation> job = std::nullopt) {
  auto o = observe(now, labels, 0, std::move(job));
  for (const auto& [key, value] : labels)
    if (value == "true" && key.rfind("nvidia.com/gpu.deploy.", 0) == 0)
      o.running_operands.insert(key);
  return o;
}

// Drives a reset to its Job: old labels recorded, teardown done, Job created.
gpu_reset_status with_job_created() {
  auto s1 = reconcile_gpu_reset(request(), {}, observe(t0, operator_labels()));
  auto s2 = reconcile_gpu_reset(request(), s1.status, observe(t0, operator_labels()));
  EXPECT_EQ(s2.label_patch.size(), 4u);
  auto s3 = reconcile_gpu_reset(request(), s2.status, observe(t0 + 2s, torn_down(), 0));
  EXPECT_TRUE(s3.create_job.has_value());
  return s3.status;
}

// The first step of a restore that must PATCH labels writes since when the
// labels are being put back (LabelsRestored False, Restoring) and asks to go
// on at once; the janitor takes it again from the status the server
// confirmed, and that step patches.
reset_step rerun(const gpu_reset_request& r, const reset_step& first,
                 const reset_observation& o) {
  EXPECT_TRUE(first.again);
  EXPECT_TRUE(first.label_patch.empty());
  EXPECT_TRUE(first.status_changed);
  return reconcile_gpu_reset(r, first.status, o);
}

job_observation job_done(bool succeeded) {
  job_observation job;
  job.succeeded = succeeded;
  job.failed = !succeeded;
  return job;
}

// seed 001 step 1, first half: the old values are on the CR, and its
// finalizer, before any label is touched; a lost write of that step
// therefore loses nothing.
TEST(gpu_reset_plan, the_old_labels_are_recorded_before_any_changes) {
  auto fresh = request();
  fresh.has_finalizer = false;
  auto step = reconcile_gpu_reset(fresh, {}, observe(t0, operator_labels(), 4));
  EXPECT_EQ(step.status.phase, reset_phase::tearing_down);
  EXPECT_EQ(step.status.started_at, t0);
  EXPECT_TRUE(step.label_patch.empty());
  EXPECT_TRUE(step.add_finalizer);
  EXPECT_TRUE(step.status_changed);
  EXPECT_TRUE(step.again); // the teardown may follow once the server has both
  EXPECT_EQ(step.status.saved_labels.at(dp), "true");
  EXPECT_EQ(step.status.saved_labels.at(gfd), "");
  EXPECT_EQ(step.status.gpu_type, "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(status_json(step.status)["gpuType"], "NVIDIA-H100-80GB-HBM3");
  // The write was lost: the same step again, from the same facts.
  auto retried = reconcile_gpu_reset(fresh, {}, observe(t0 + 5s, operator_labels(), 4));
  EXPECT_TRUE(retried.label_patch.empty());
  EXPECT_EQ(retried.status.saved_labels, step.status.saved_labels);
  // Recorded, but the finalizer is not on yet: still no label changes.
  auto unguarded =
    reconcile_gpu_reset(fresh, step.status, observe(t0, operator_labels()));
  EXPECT_TRUE(unguarded.label_patch.empty());
  EXPECT_TRUE(unguarded.add_finalizer);
}

TEST(gpu_reset_plan, teardown_sets_every_operand_label_to_false_once_recorded) {
  auto s1 = reconcile_gpu_reset(request(), {}, observe(t0, operator_labels(), 4));
  EXPECT_FALSE(s1.add_finalizer);
  auto s2 = reconcile_gpu_reset(request(), s1.status, observe(t0, operator_labels(), 4));
  ASSERT_EQ(s2.label_patch.size(), 4u);
  for (const auto& [key, value] : s2.label_patch)
    EXPECT_EQ(value, std::optional<std::string>{"false"}) << key;
  EXPECT_FALSE(s2.create_job.has_value());
  EXPECT_FALSE(s2.again);
  EXPECT_EQ(s2.requeue_after, 2s);
  // A CR from before the record step (saved labels missing): recorded first.
  gpu_reset_status legacy = s1.status;
  legacy.saved_labels.erase(gfd);
  auto s3 = reconcile_gpu_reset(request(), legacy, observe(t0, operator_labels()));
  EXPECT_TRUE(s3.label_patch.empty());
  EXPECT_EQ(s3.status.saved_labels.at(gfd), "");
}

TEST(gpu_reset_plan, waits_for_operand_pods_then_creates_one_job) {
  auto s1 = reconcile_gpu_reset(request(), {}, observe(t0, operator_labels(), 4));
  auto s1b = reconcile_gpu_reset(request(), s1.status, observe(t0, operator_labels(), 4));
  auto s2 = reconcile_gpu_reset(request(), s1b.status, observe(t0 + 2s, torn_down(), 2));
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

TEST(gpu_reset_plan, success_restores_labels_waits_for_the_operands_then_finishes) {
  auto status = with_job_created();
  auto done = job_done(true);
  done.finished_at = t0 + 55s;
  auto s0 =
    reconcile_gpu_reset(request(), status, observe(t0 + 60s, torn_down(), 0, done));
  EXPECT_EQ(s0.status.phase, reset_phase::restoring);
  EXPECT_EQ(s0.status.job_completed_at, t0 + 55s);
  auto s1 = rerun(request(), s0, observe(t0 + 60s, torn_down(), 0, done));
  EXPECT_EQ(s1.label_patch.at(dp), std::optional<std::string>{"true"});
  EXPECT_EQ(s1.label_patch.at(gfd), std::nullopt); // was absent: removed
  EXPECT_FALSE(s1.finished);
  EXPECT_FALSE(s1.remove_finalizer);
  auto restored = operator_labels();
  // seed 001 step 5: the labels are back, the operands not yet.
  auto s2 =
    reconcile_gpu_reset(request(), s1.status, observe(t0 + 62s, restored, 0, done));
  EXPECT_TRUE(s2.label_patch.empty());
  EXPECT_FALSE(s2.finished);
  EXPECT_EQ(s2.status.phase, reset_phase::restoring);
  EXPECT_EQ(s2.requeue_after, 5s);
  EXPECT_TRUE(s2.status_changed); // LabelsRestored, from when the wait counts
  // Two of the three are back: still waiting.
  auto partly = observe(t0 + 67s, restored, 0, done);
  partly.running_operands = {dp, dcgm};
  auto s3 = reconcile_gpu_reset(request(), s2.status, partly);
  EXPECT_FALSE(s3.finished);
  auto s4 =
    reconcile_gpu_reset(request(), s3.status, redeployed(t0 + 72s, restored, done));
  EXPECT_TRUE(s4.finished);
  EXPECT_TRUE(s4.remove_finalizer);
  EXPECT_EQ(s4.status.phase, reset_phase::succeeded);
  EXPECT_EQ(s4.status.completed_at, t0 + 72s);
  EXPECT_EQ(reset_duration_seconds(t0 - 10s, s4.status), 65.0); // creation → Job done
  auto st = status_json(s4.status);
  EXPECT_EQ(st["phase"], "Succeeded");
  EXPECT_FALSE(st.contains("failureReason"));
  EXPECT_EQ(st["startedAt"], format_rfc3339(t0));
  EXPECT_EQ(st["jobCompletedAt"], format_rfc3339(t0 + 55s));
  EXPECT_EQ(st["savedLabels"][dp], "true");
  std::map<std::string, std::string> conditions;
  for (const auto& c : st["conditions"])
    conditions[c["type"]] = c["status"];
  EXPECT_EQ(conditions["Complete"], "True");
  EXPECT_EQ(conditions["LabelsRestored"], "True");
  EXPECT_EQ(conditions["OperandsRedeployed"], "True");
  // Done is done; the finalizer comes off even when its removal was lost.
  auto s5 = reconcile_gpu_reset(request(), s4.status, observe(t0 + 99s, restored));
  EXPECT_FALSE(s5.status_changed);
  EXPECT_FALSE(s5.finished);
  EXPECT_TRUE(s5.remove_finalizer);
  auto without = request();
  without.has_finalizer = false;
  EXPECT_FALSE(reconcile_gpu_reset(without, s4.status, observe(t0 + 99s, restored))
                 .remove_finalizer);
}

TEST(gpu_reset_plan, operands_that_do_not_come_back_fail_the_reset) {
  auto status = with_job_created();
  auto done = job_done(true);
  auto s1 =
    reconcile_gpu_reset(request(), status, observe(t0 + 60s, torn_down(), 0, done));
  auto restored = operator_labels();
  auto s2 =
    reconcile_gpu_reset(request(), s1.status, observe(t0 + 62s, restored, 0, done));
  auto late = observe(t0 + 62s + 299s, restored, 0, done);
  late.running_operands = {dp, exporter};
  EXPECT_FALSE(reconcile_gpu_reset(request(), s2.status, late).finished);
  late.now = t0 + 62s + 300s;
  auto s3 = reconcile_gpu_reset(request(), s2.status, late);
  EXPECT_TRUE(s3.finished);
  EXPECT_EQ(s3.status.phase, reset_phase::failed);
  EXPECT_EQ(s3.status.failure_reason, failure_reason::redeploy_failed);
  bool named = false;
  for (const auto& c : s3.status.conditions)
    named = named
            || (c.type == "OperandsRedeployed" && !c.status
                && c.message.find("nvidia-dcgm") != std::string::npos);
  EXPECT_TRUE(named);
  // A reset that had failed already keeps its own reason.
  auto failed = job_create_failed(status, "forbidden", t0 + 3s);
  auto f1 = reconcile_gpu_reset(request(), failed, observe(t0 + 4s, restored));
  auto f2 = reconcile_gpu_reset(request(), f1.status, observe(t0 + 400s, restored));
  EXPECT_EQ(f2.status.failure_reason, failure_reason::job_create_failed);
  // Labels "false" before the reset were never redeployed: nothing to wait for.
  auto off = request();
  auto o1 = reconcile_gpu_reset(off, {}, observe(t0, torn_down()));
  auto o2 = reconcile_gpu_reset(off, o1.status, observe(t0, torn_down()));
  EXPECT_TRUE(o2.label_patch.empty());
  EXPECT_EQ(o2.status.phase, reset_phase::resetting);
  auto o3 = reconcile_gpu_reset(off, o2.status, observe(t0 + 60s, torn_down(), 0, done));
  EXPECT_TRUE(o3.finished);
  EXPECT_EQ(o3.status.phase, reset_phase::succeeded);
}

TEST(gpu_reset_plan, restore_leaves_labels_someone_else_changed) {
  auto status = with_job_created();
  job_observation done;
  done.succeeded = true;
  auto labels = torn_down();
  labels[dcgm] = "true";  // someone else redeployed dcgm meanwhile
  labels.erase(exporter); // and removed the exporter's label
  auto s0 = reconcile_gpu_reset(request(), status, observe(t0 + 60s, labels, 0, done));
  EXPECT_TRUE(s0.notes.empty()); // said by the step that patches
  auto s1 = rerun(request(), s0, observe(t0 + 60s, labels, 0, done));
  EXPECT_EQ(s1.label_patch.count(dcgm), 0u);
  EXPECT_EQ(s1.label_patch.count(exporter), 0u);
  EXPECT_EQ(s1.label_patch.count(dp), 1u);
  EXPECT_EQ(s1.notes.size(), 1u); // exporter; dcgm already holds its saved value
  labels[dp] = "true";
  labels.erase(gfd);
  auto s2 = reconcile_gpu_reset(request(), s1.status, observe(t0 + 62s, labels, 0, done));
  EXPECT_TRUE(s2.label_patch.empty());
  EXPECT_EQ(s2.notes.size(), 1u);
  // Restored once: while the operands come back, the labels are not read again.
  auto s3 = reconcile_gpu_reset(request(), s2.status, observe(t0 + 67s, labels, 0, done));
  EXPECT_TRUE(s3.notes.empty());
  EXPECT_TRUE(s3.label_patch.empty());
}

TEST(gpu_reset_plan, job_failures_map_to_reasons_and_still_restore) {
  struct row {
    std::optional<int> exit_code;
    bool deadline;
    std::string_view reason;
  };
  for (const auto& r : {row{2, false, failure_reason::reset_command_failed},
                        row{3, false, failure_reason::health_check_failed},
                        row{5, false, failure_reason::gpu_in_use},
                        row{1, false, failure_reason::job_failed},
                        row{std::nullopt, true, failure_reason::timeout}}) {
    job_observation job;
    job.failed = true;
    job.exit_code = r.exit_code;
    job.deadline_exceeded = r.deadline;
    auto s0 = reconcile_gpu_reset(request(), with_job_created(),
                                  observe(t0 + 60s, torn_down(), 0, job));
    auto s1 = rerun(request(), s0, observe(t0 + 60s, torn_down(), 0, job));
    EXPECT_EQ(s1.status.failure_reason, r.reason);
    EXPECT_EQ(s1.status.phase, reset_phase::restoring);
    EXPECT_EQ(s1.label_patch.size(), 4u);
    auto s2 = reconcile_gpu_reset(request(), s1.status,
                                  redeployed(t0 + 62s, operator_labels(), job));
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
  EXPECT_EQ(
    rerun(request(), s2, observe(t0 + 2s + 1511s, torn_down())).label_patch.size(), 4u);
}

TEST(gpu_reset_plan, teardown_timeout_fails_and_restores) {
  auto s1 = reconcile_gpu_reset(request(), {}, observe(t0, operator_labels(), 4));
  auto s1b = reconcile_gpu_reset(request(), s1.status, observe(t0, operator_labels(), 4));
  EXPECT_EQ(s1b.label_patch.size(), 4u);
  auto s2 =
    reconcile_gpu_reset(request(), s1b.status, observe(t0 + 300s, torn_down(), 1));
  EXPECT_EQ(s2.status.failure_reason, failure_reason::teardown_failed);
  EXPECT_FALSE(s2.create_job.has_value());
  EXPECT_EQ(rerun(request(), s2, observe(t0 + 300s, torn_down(), 1)).label_patch.size(),
            4u);
}

TEST(gpu_reset_plan, missing_node_and_job_create_failure) {
  auto o = observe(t0, {});
  o.node_exists = false;
  auto s = reconcile_gpu_reset(request(), {}, o);
  EXPECT_EQ(s.status.phase, reset_phase::failed);
  EXPECT_EQ(s.status.failure_reason, failure_reason::teardown_failed);
  EXPECT_TRUE(s.label_patch.empty());
  EXPECT_TRUE(s.finished);
  EXPECT_TRUE(s.remove_finalizer);
  auto failed = job_create_failed(with_job_created(), "forbidden", t0 + 3s);
  EXPECT_EQ(failed.failure_reason, failure_reason::job_create_failed);
  EXPECT_EQ(failed.phase, reset_phase::restoring);
}

// seed 001 step 5: a GPUReset deleted mid-way puts the labels back before
// its finalizer lets it go, whatever its phase; it writes no status any more.
TEST(gpu_reset_plan, a_deleted_reset_restores_the_labels_then_lets_go) {
  auto s1 = reconcile_gpu_reset(request(), {}, observe(t0, operator_labels(), 4));
  auto tearing =
    reconcile_gpu_reset(request(), s1.status, observe(t0, operator_labels()));
  auto d1 =
    reconcile_gpu_reset(deleted(), tearing.status, observe(t0 + 3s, torn_down(), 4));
  EXPECT_EQ(d1.label_patch.size(), 4u);
  EXPECT_EQ(d1.label_patch.at(dp), std::optional<std::string>{"true"});
  EXPECT_EQ(d1.label_patch.at(gfd), std::nullopt);
  EXPECT_TRUE(d1.remove_finalizer); // after the labels, in the same step
  EXPECT_FALSE(d1.status_changed);
  EXPECT_FALSE(d1.add_finalizer);
  EXPECT_FALSE(d1.create_job.has_value());
  // Labels someone else changed meanwhile stay as they are.
  auto changed = torn_down();
  changed[dcgm] = "pinned";
  auto d2 = reconcile_gpu_reset(deleted(), tearing.status, observe(t0 + 3s, changed));
  EXPECT_EQ(d2.label_patch.count(dcgm), 0u);
  EXPECT_EQ(d2.notes.size(), 1u);
  // Deleted before the teardown (recorded, labels untouched) or after the end.
  auto d3 =
    reconcile_gpu_reset(deleted(), s1.status, observe(t0 + 3s, operator_labels()));
  EXPECT_TRUE(d3.label_patch.empty());
  EXPECT_TRUE(d3.remove_finalizer);
  gpu_reset_status pending;
  EXPECT_TRUE(reconcile_gpu_reset(deleted(), pending, observe(t0, {})).remove_finalizer);
  // Not ours to hold: nothing at all.
  auto foreign = deleted();
  foreign.has_finalizer = false;
  auto d4 = reconcile_gpu_reset(foreign, tearing.status, observe(t0 + 3s, torn_down()));
  EXPECT_TRUE(d4.label_patch.empty());
  EXPECT_FALSE(d4.remove_finalizer);
  // The node is gone: nothing to restore.
  auto gone = observe(t0 + 3s, {});
  gone.node_exists = false;
  auto d5 = reconcile_gpu_reset(deleted(), tearing.status, gone);
  EXPECT_TRUE(d5.label_patch.empty());
  EXPECT_TRUE(d5.remove_finalizer);
}

// Operands redeployed under a running reset would hold the GPU: a deletion
// waits for the Job (bounded by its deadline, then deletes it).
TEST(gpu_reset_plan, a_reset_deleted_while_its_job_runs_waits_for_the_job) {
  auto status = with_job_created();
  job_observation running;
  running.active = true;
  auto d1 =
    reconcile_gpu_reset(deleted(), status, observe(t0 + 30s, torn_down(), 0, running));
  EXPECT_TRUE(d1.label_patch.empty());
  EXPECT_FALSE(d1.remove_finalizer);
  EXPECT_FALSE(d1.delete_job);
  EXPECT_EQ(d1.requeue_after, 10s);
  auto d2 = reconcile_gpu_reset(deleted(), status,
                                observe(t0 + 60s, torn_down(), 0, job_done(false)));
  EXPECT_EQ(d2.label_patch.size(), 4u);
  EXPECT_TRUE(d2.remove_finalizer);
  EXPECT_FALSE(d2.delete_job);
  auto d3 = reconcile_gpu_reset(deleted(), status,
                                observe(t0 + 2s + 1510s, torn_down(), 0, running));
  EXPECT_TRUE(d3.delete_job);
  EXPECT_EQ(d3.label_patch.size(), 4u);
  EXPECT_TRUE(d3.remove_finalizer);
  // The Job is gone (its deletion, or never seen): restore.
  auto d4 = reconcile_gpu_reset(deleted(), status, observe(t0 + 60s, torn_down()));
  EXPECT_EQ(d4.label_patch.size(), 4u);
  EXPECT_TRUE(d4.remove_finalizer);
}

// seed 001 step 1 in reverse: the operands come back only once the reset
// Job's pod has left the node, or after reset_pod_exit_wait past the Job's
// end when it does not (a kubelet that no longer acts).
TEST(gpu_reset_plan, the_labels_wait_for_the_reset_pod_to_leave_the_node) {
  auto status = with_job_created(); // the Job created at t0 + 2s
  job_observation running;
  running.active = true;
  // The janitor gives up on the Job and deletes it: its pod is still stopping.
  auto stopping = observe(t0 + 2s + 1510s, torn_down(), 0, running);
  stopping.reset_pods_on_node = 1;
  auto s1 = reconcile_gpu_reset(request(), status, stopping);
  EXPECT_TRUE(s1.delete_job);
  EXPECT_EQ(s1.status.failure_reason, failure_reason::timeout);
  EXPECT_TRUE(s1.label_patch.empty());
  EXPECT_EQ(s1.requeue_after, 5s);
  // Gone: the labels go back.
  auto gone = observe(t0 + 2s + 1530s, torn_down());
  auto back = reconcile_gpu_reset(request(), s1.status, gone);
  EXPECT_EQ(rerun(request(), back, gone).label_patch.size(), 4u);
  // Never gone: back anyway, reset_pod_exit_wait after the Job's end, said once.
  auto stuck = observe(t0 + 2s + 1510s + reset_pod_exit_wait - 1s, torn_down());
  stuck.reset_pods_on_node = 1;
  auto waiting = reconcile_gpu_reset(request(), s1.status, stuck);
  EXPECT_TRUE(waiting.label_patch.empty());
  EXPECT_FALSE(waiting.again);
  stuck.now += 1s;
  auto s2 = reconcile_gpu_reset(request(), s1.status, stuck);
  ASSERT_EQ(s2.notes.size(), 1u);
  EXPECT_NE(s2.notes[0].find("still on the node"), std::string::npos);
  auto s3 = rerun(request(), s2, stuck);
  EXPECT_EQ(s3.label_patch.size(), 4u);
  EXPECT_TRUE(s3.notes.empty());
  // Kubernetes' own deadline: the Job failed while the kubelet stops its pod.
  job_observation exceeded;
  exceeded.failed = true;
  exceeded.deadline_exceeded = true;
  exceeded.finished_at = t0 + 1502s;
  auto k8s = observe(t0 + 1505s, torn_down(), 0, exceeded);
  k8s.reset_pods_on_node = 1;
  auto k1 = reconcile_gpu_reset(request(), status, k8s);
  EXPECT_EQ(k1.status.failure_reason, failure_reason::timeout);
  EXPECT_TRUE(k1.label_patch.empty());
  // A CR deleted after its Job's deadline waits for the pod the same way.
  auto d1 = reconcile_gpu_reset(deleted(), status, stopping);
  EXPECT_TRUE(d1.delete_job);
  EXPECT_TRUE(d1.label_patch.empty());
  EXPECT_FALSE(d1.remove_finalizer);
  auto d2 = reconcile_gpu_reset(deleted(), status, gone);
  EXPECT_EQ(d2.label_patch.size(), 4u);
  EXPECT_TRUE(d2.remove_finalizer);
}

// A label restore the API server keeps refusing must not hold the CR, and the
// janitor's lock on the node, for ever: past the redeploy timeout the reset
// ends failed, naming the command that puts the labels back by hand.
TEST(gpu_reset_plan, labels_the_server_keeps_refusing_end_the_reset_for_a_person) {
  auto status = with_job_created();
  auto done = job_done(true);
  done.finished_at = t0 + 55s;
  auto s0 =
    reconcile_gpu_reset(request(), status, observe(t0 + 60s, torn_down(), 0, done));
  EXPECT_EQ(
    rerun(request(), s0, observe(t0 + 60s, torn_down(), 0, done)).label_patch.size(), 4u);
  // The PATCH is refused, and with it that step's status write: each pass
  // starts again from the status s0 wrote, which says since when.
  const auto due = t0 + 60s + 300s;
  auto late =
    reconcile_gpu_reset(request(), s0.status, observe(due - 1s, torn_down(), 0, done));
  EXPECT_EQ(late.label_patch.size(), 4u);
  EXPECT_FALSE(late.finished);
  auto s2 = reconcile_gpu_reset(request(), s0.status, observe(due, torn_down(), 0, done));
  EXPECT_TRUE(s2.finished);
  EXPECT_TRUE(s2.label_patch.empty()); // the status write does not wait on it
  EXPECT_TRUE(s2.status_changed);
  EXPECT_TRUE(s2.remove_finalizer);
  EXPECT_EQ(s2.status.phase, reset_phase::failed);
  EXPECT_EQ(s2.status.failure_reason, failure_reason::labels_not_restored);
  const auto st = status_json(s2.status);
  std::string message;
  for (const auto& c : st["conditions"])
    if (c["type"] == "LabelsRestored") {
      EXPECT_EQ(c["status"], "False");
      message = c["message"];
    }
  EXPECT_NE(message.find("kubectl label node node1 --overwrite"), std::string::npos);
  EXPECT_NE(message.find(" " + dp + "=true"), std::string::npos);
  EXPECT_NE(message.find(" " + gfd + "-"), std::string::npos); // was absent
  // A janitor back long after the Job ended tries first: the timeout counts
  // from its first attempt, not from the Job's end.
  auto away = observe(t0 + 55s + 2h, torn_down(), 0, done);
  auto a0 = reconcile_gpu_reset(request(), status, away);
  EXPECT_FALSE(a0.finished);
  auto a1 = rerun(request(), a0, away);
  EXPECT_EQ(a1.label_patch.size(), 4u);
  EXPECT_FALSE(a1.finished);
  // A reset that had failed already says so too.
  auto failed = job_create_failed(status, "forbidden", t0 + 3s);
  auto f0 = reconcile_gpu_reset(request(), failed, observe(t0 + 4s, torn_down()));
  auto f1 =
    reconcile_gpu_reset(request(), f0.status, observe(t0 + 4s + 300s, torn_down()));
  EXPECT_EQ(f1.status.failure_reason, failure_reason::labels_not_restored);
  EXPECT_NE(f1.notes.back().find("job_create_failed"), std::string::npos);
}

TEST(gpu_reset_plan, the_duration_runs_from_creation_to_the_job_completion) {
  gpu_reset_status s;
  EXPECT_EQ(reset_duration_seconds(t0, s), std::nullopt); // not ended
  s.phase = reset_phase::failed;
  s.started_at = t0 + 1s;
  s.completed_at = t0 + 40s; // failed before any Job: until the failure
  EXPECT_EQ(reset_duration_seconds(t0, s), 40.0);
  s.job_completed_at = t0 + 30s;
  EXPECT_EQ(reset_duration_seconds(t0, s), 30.0);
  EXPECT_EQ(reset_duration_seconds(wall_time{}, s), 29.0); // no creationTimestamp
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
  // The drain knows the Job's pod as vigil's own by this label (drain_plan).
  EXPECT_EQ(job["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "vigil");
  const auto& pod = job["spec"]["template"]["spec"];
  EXPECT_EQ(pod["nodeName"], "node1");
  EXPECT_EQ(pod["serviceAccountName"], "vigil-gpu-reset");
  EXPECT_EQ(pod["restartPolicy"], "Never");
  EXPECT_EQ(pod["tolerations"][0]["operator"], "Exists");
  // The in-use check sees the holders in every container and on the host.
  EXPECT_EQ(pod["hostPID"], true);
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
