#include "actors/control/rules/drain_plan.hpp"

#include <gtest/gtest.h>

namespace vigil::control {
namespace {

using namespace std::chrono_literals;

const wall_time t0 = from_unix(1761219482, 0);
const std::string bad_gpu = "GPU-455d8f70";
const std::string good_gpu = "GPU-938m2ds2";

pod_info make_pod(std::string ns, std::string name, std::string owner) {
  pod_info p;
  p.ns = std::move(ns);
  p.name = std::move(name);
  p.owner_kind = std::move(owner);
  return p;
}

pod_info gpu_pod(std::string ns, std::string name, std::vector<std::string> uuids) {
  auto p = make_pod(std::move(ns), std::move(name), "ReplicaSet");
  p.requests_gpu = true;
  p.gpu_uuids = std::move(uuids);
  return p;
}

std::vector<pod_info> node_pods() {
  auto ds = make_pod("monitoring", "dcgm-exporter-x", "DaemonSet");
  auto mirror = make_pod("default", "static-web", "Node");
  mirror.mirror = true;
  auto system = make_pod("kube-system", "coredns-1", "ReplicaSet");
  auto cpu_only = make_pod("default", "web-1", "ReplicaSet");
  return {gpu_pod("train", "job-a", {bad_gpu}),
          gpu_pod("train", "job-b", {good_gpu}),
          ds,
          mirror,
          system,
          cpu_only};
}

// A pod of one of the janitor's Jobs: owned by the Job, carrying vigil's label.
pod_info vigil_job_pod(std::string ns, std::string name) {
  auto p = make_pod(std::move(ns), std::move(name), "Job");
  p.labels = {{std::string{vigil_job_label}, std::string{vigil_job_label_value}},
              {"job-name", "vigil-gpu-reset-gr-1"}};
  return p;
}

drain_request reset_of(const std::string& uuid) {
  return {
    recommended_action::component_reset, {uuid}, std::nullopt, drain_history::none, ""};
}

std::vector<std::string> evicted_names(const drain_plan& plan) {
  std::vector<std::string> out;
  for (const auto& e : plan.evict)
    out.push_back(e.pod.name);
  return out;
}

TEST(drain_plan, partial_drain_evicts_only_the_pod_on_the_bad_gpu) {
  auto plan = plan_drain(node_pods(), reset_of(bad_gpu), drain_config{});
  EXPECT_EQ(plan.scope, drain_scope::partial);
  EXPECT_EQ(evicted_names(plan), std::vector<std::string>{"job-a"});
  EXPECT_EQ(plan.skipped.size(), 5u);
}

TEST(drain_plan, pod_holding_several_gpus_is_drained_when_any_is_bad) {
  auto pods = std::vector<pod_info>{gpu_pod("train", "big", {good_gpu, bad_gpu})};
  EXPECT_EQ(evicted_names(plan_drain(pods, reset_of(bad_gpu), drain_config{})),
            std::vector<std::string>{"big"});
}

TEST(drain_plan, partial_drain_with_no_holder_evicts_nothing) {
  auto plan = plan_drain(node_pods(), reset_of("GPU-unused"), drain_config{});
  EXPECT_EQ(plan.scope, drain_scope::partial);
  EXPECT_TRUE(plan.evict.empty());
}

TEST(drain_plan, unknown_gpu_mapping_falls_back_to_full_drain) {
  auto pods = node_pods();
  pods[1].gpu_uuids.reset(); // job-b requests a GPU but has no devices annotation
  auto plan = plan_drain(pods, reset_of(bad_gpu), drain_config{});
  EXPECT_EQ(plan.scope, drain_scope::full);
  EXPECT_EQ(evicted_names(plan), (std::vector<std::string>{"job-a", "job-b", "web-1"}));
}

TEST(drain_plan, reset_without_gpu_uuid_and_reboot_are_full_drains) {
  auto no_uuid = reset_of(bad_gpu);
  no_uuid.gpu_uuids.clear();
  EXPECT_EQ(plan_drain(node_pods(), no_uuid, drain_config{}).scope, drain_scope::full);
  drain_request reboot{
    recommended_action::restart_bm, {bad_gpu}, std::nullopt, drain_history::none, ""};
  auto plan = plan_drain(node_pods(), reboot, drain_config{});
  EXPECT_EQ(plan.scope, drain_scope::full);
  // DaemonSet, mirror and system-namespace pods are skipped even then.
  EXPECT_EQ(evicted_names(plan), (std::vector<std::string>{"job-a", "job-b", "web-1"}));
}

TEST(drain_plan, completed_full_drain_skips_later_drains_but_partial_does_not) {
  auto request = reset_of(bad_gpu);
  request.history = drain_history::full_done;
  EXPECT_EQ(plan_drain(node_pods(), request, drain_config{}).scope, drain_scope::none);
  request.history = drain_history::partial_done;
  EXPECT_EQ(plan_drain(node_pods(), request, drain_config{}).scope, drain_scope::partial);
}

TEST(drain_plan, overrides_skip_and_force) {
  drain_config config;
  config.namespaces = {{"train", drain_mode::allow_completion, 0min}};
  auto request = reset_of(bad_gpu);
  EXPECT_EQ(plan_drain(node_pods(), request, config).evict[0].mode,
            drain_mode::allow_completion);
  request.overrides = stage_override{true, false};
  EXPECT_EQ(plan_drain(node_pods(), request, config).evict[0].mode,
            drain_mode::immediate);
  request.overrides = stage_override{false, true};
  auto plan = plan_drain(node_pods(), request, config);
  EXPECT_EQ(plan.scope, drain_scope::none);
  EXPECT_EQ(plan.why, "drainOverrides.skip");
}

TEST(drain_plan, namespace_modes_first_match_wins) {
  drain_config config;
  config.namespaces = {{"tr.*", drain_mode::delete_after_timeout, 30min},
                       {"train", drain_mode::allow_completion, 0min}};
  ASSERT_TRUE(validate(config));
  auto reboot = reset_of(bad_gpu);
  reboot.action = recommended_action::restart_bm;
  auto plan = plan_drain(node_pods(), reboot, config);
  EXPECT_EQ(plan.evict[0].mode, drain_mode::delete_after_timeout);
  EXPECT_EQ(plan.evict[0].timeout, 30min);
  EXPECT_EQ(plan.evict[2].mode, drain_mode::immediate); // "default" matches none
}

TEST(drain_plan, validate_names_the_bad_field) {
  drain_config config;
  config.namespaces = {{"ok", drain_mode::immediate, 0min},
                       {"(", drain_mode::immediate, 0min}};
  auto st = validate(config);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().where, "drain.namespaces[1].namespace");
  config.namespaces = {{"ns", drain_mode::delete_after_timeout, 0min}};
  EXPECT_EQ(validate(config).error().where, "drain.namespaces[0].timeout");
}

TEST(drain_plan, vigils_own_pods_are_known_by_namespace_or_job_label) {
  drain_config config;
  EXPECT_TRUE(is_vigils_own_pod(make_pod("vigil-system", "any", "ReplicaSet"), config));
  EXPECT_TRUE(
    is_vigils_own_pod(make_pod("vigil", "vigil-control-0", "ReplicaSet"), config));
  // A janitor Job's pod is vigil's wherever it runs.
  EXPECT_TRUE(
    is_vigils_own_pod(vigil_job_pod("ops", "vigil-gpu-reset-gr-1-x7k2p"), config));
  EXPECT_FALSE(is_vigils_own_pod(gpu_pod("train", "job-a", {bad_gpu}), config));
  // A DaemonSet pod is not vigil's (plan_drain skips it as a DaemonSet pod).
  EXPECT_FALSE(
    is_vigils_own_pod(make_pod("monitoring", "dcgm-exporter-x", "DaemonSet"), config));
  // The label needs a Job owner, and a Job pod needs vigil's label value.
  auto not_a_job = vigil_job_pod("train", "web-1");
  not_a_job.owner_kind = "ReplicaSet";
  EXPECT_FALSE(is_vigils_own_pod(not_a_job, config));
  auto other_job = vigil_job_pod("train", "batch-1");
  other_job.labels[std::string{vigil_job_label}] = "Helm";
  EXPECT_FALSE(is_vigils_own_pod(other_job, config));
  // The namespaces are exact names from the configuration.
  config.vigil_namespaces = {"ops-vigil"};
  EXPECT_FALSE(is_vigils_own_pod(make_pod("vigil-system", "any", "ReplicaSet"), config));
  EXPECT_FALSE(is_vigils_own_pod(make_pod("ops-vigil-2", "any", "ReplicaSet"), config));
  EXPECT_TRUE(is_vigils_own_pod(make_pod("ops-vigil", "any", "ReplicaSet"), config));
}

// seed 000 §4.3 case 3: a RebootNode's full drain starts while the GPUReset's
// Job still runs on the node; the drain must not take the reset Job's pod.
TEST(drain_plan, full_drain_never_evicts_or_deletes_vigils_job_pods) {
  auto pods = node_pods();
  pods.push_back(vigil_job_pod("vigil-system", "vigil-gpu-reset-gr-1-x7k2p"));
  pods.push_back(vigil_job_pod("ops", "vigil-reboot-rn-1-q8w3e"));
  drain_request reboot{recommended_action::restart_bm,
                       {bad_gpu},
                       stage_override{true, false},
                       drain_history::none,
                       ""};
  auto plan = plan_drain(pods, reboot, drain_config{});
  EXPECT_EQ(plan.scope, drain_scope::full);
  EXPECT_EQ(evicted_names(plan), (std::vector<std::string>{"job-a", "job-b", "web-1"}));
  std::vector<std::string> own;
  for (const auto& s : plan.skipped)
    if (s.reason == "vigil's own pod")
      own.push_back(s.pod.name);
  EXPECT_EQ(own, (std::vector<std::string>{"vigil-gpu-reset-gr-1-x7k2p",
                                           "vigil-reboot-rn-1-q8w3e"}));
  // DeleteAfterTimeout everywhere: past the deadline only the others are deleted.
  drain_config config;
  config.namespaces = {{".*", drain_mode::delete_after_timeout, 30min}};
  reboot.overrides.reset();
  drain_progress progress(plan_drain(pods, reboot, config), t0, config);
  auto steps = progress.due(t0 + 31min);
  ASSERT_EQ(steps.size(), 3u);
  for (const auto& step : steps) {
    EXPECT_EQ(step.what, drain_step::kind::delete_pod);
    EXPECT_NE(step.pod.name.rfind("vigil-", 0), 0u) << step.pod.name;
  }
}

drain_plan one_pod_plan(drain_mode mode, std::chrono::minutes timeout = 0min) {
  drain_plan plan;
  plan.scope = drain_scope::partial;
  plan.evict = {{{"train", "job-a"}, mode, timeout, true, "Job", std::nullopt, ""}};
  return plan;
}

const pod_ref job_a{"train", "job-a"};
const drain_step evict_a{drain_step::kind::evict, job_a};

TEST(drain_progress, immediate_eviction_retries_429_with_backoff) {
  drain_progress drain(one_pod_plan(drain_mode::immediate), t0, drain_config{});
  EXPECT_EQ(drain.due(t0), std::vector<drain_step>{evict_a});
  EXPECT_TRUE(drain.due(t0).empty()); // one outstanding step per pod
  drain.on_result(job_a, step_result::too_many_requests, t0);
  EXPECT_EQ(drain.state_of(job_a), pod_drain_state::retry_wait);
  EXPECT_EQ(drain.next_wakeup(), t0 + 5s);
  EXPECT_TRUE(drain.due(t0 + 4s).empty());
  EXPECT_EQ(drain.due(t0 + 5s), std::vector<drain_step>{evict_a});
  drain.on_result(job_a, step_result::too_many_requests, t0 + 5s);
  EXPECT_EQ(drain.next_wakeup(), t0 + 15s); // backoff doubled
  EXPECT_EQ(drain.due(t0 + 15s).size(), 1u);
  drain.on_result(job_a, step_result::accepted, t0 + 15s);
  EXPECT_EQ(drain.status(), drain_status::in_progress);
  drain.on_pod_gone(job_a);
  EXPECT_EQ(drain.status(), drain_status::succeeded);
}

TEST(drain_progress, allow_completion_waits_for_the_pod) {
  drain_progress drain(one_pod_plan(drain_mode::allow_completion), t0, drain_config{});
  EXPECT_TRUE(drain.due(t0 + 24h).empty());
  EXPECT_FALSE(drain.next_wakeup());
  drain.on_pod_gone(job_a);
  EXPECT_EQ(drain.status(), drain_status::succeeded);
}

TEST(drain_progress, delete_after_timeout_deletes_at_the_deadline) {
  drain_progress drain(one_pod_plan(drain_mode::delete_after_timeout, 30min), t0,
                       drain_config{});
  EXPECT_EQ(drain.next_wakeup(), t0 + 30min);
  EXPECT_TRUE(drain.due(t0 + 29min).empty());
  auto steps = drain.due(t0 + 30min);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].what, drain_step::kind::delete_pod);
  drain.on_result(job_a, step_result::not_found, t0 + 30min);
  EXPECT_EQ(drain.status(), drain_status::succeeded);
}

TEST(drain_progress, a_recovery_cancels_the_drain) {
  drain_progress drain(one_pod_plan(drain_mode::immediate), t0, drain_config{});
  drain.due(t0);
  drain.on_result(job_a, step_result::too_many_requests, t0);
  drain.cancel("uncordoned: every event recovered");
  EXPECT_EQ(drain.status(), drain_status::cancelled);
  EXPECT_TRUE(drain.due(t0 + 1h).empty());
  EXPECT_FALSE(drain.next_wakeup());
  EXPECT_EQ(drain.cancel_reason(), "uncordoned: every event recovered");
}

TEST(drain_progress, empty_plan_succeeds_at_once_and_cannot_be_cancelled) {
  drain_progress drain(drain_plan{}, t0, drain_config{});
  EXPECT_EQ(drain.status(), drain_status::succeeded);
  drain.cancel("late");
  EXPECT_EQ(drain.status(), drain_status::succeeded);
}

} // namespace
} // namespace vigil::control
