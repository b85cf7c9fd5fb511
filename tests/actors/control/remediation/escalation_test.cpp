#include "actors/control/remediation/escalation.hpp"
#include "actors/janitor/gpu_reset_plan.hpp"

#include <gtest/gtest.h>

namespace vigil::control {
namespace {

using namespace std::chrono_literals;

const std::string gpu = "GPU-aaaaaaaa-0000-0000-0000-000000000000";
const wall_time t0 = from_unix(1'700'000'000, 0);

escalation_policy no_cooldown() {
  escalation_policy p;
  p.cooldown = 0s;
  p.backoff_initial = 0s;
  return p;
}

TEST(escalation, first_attempt_is_admitted) {
  escalation_tracker tracker;
  auto d = tracker.admit(recommended_action::component_reset, gpu, t0);
  EXPECT_EQ(d.action, recommended_action::component_reset);
  EXPECT_FALSE(d.not_before.has_value());
  ASSERT_EQ(d.records.size(), 1u);
  EXPECT_EQ(d.records[0].event, escalation_event::admitted);
  EXPECT_EQ(d.records[0].target, "reset-" + gpu);
}

TEST(escalation, three_resets_of_one_gpu_in_a_day_escalate_to_reboot) {
  escalation_tracker tracker(no_cooldown());
  for (int i = 0; i < 3; ++i)
    tracker.record_attempt(recommended_action::component_reset, gpu, t0 + i * 1h);
  EXPECT_EQ(tracker.attempts("reset-" + gpu, t0 + 3h), 3u);
  auto d = tracker.admit(recommended_action::component_reset, gpu, t0 + 3h);
  EXPECT_EQ(d.action, recommended_action::restart_bm);
  ASSERT_EQ(d.records.size(), 2u);
  EXPECT_EQ(d.records[0].event, escalation_event::escalated);
  EXPECT_EQ(d.records[0].attempts_in_window, 3u);
  EXPECT_NE(d.records[0].reason.find("cap 3"), std::string::npos) << d.records[0].reason;
  EXPECT_EQ(d.records[1].event, escalation_event::admitted);
  EXPECT_EQ(d.records[1].target, "restart");
  // Another GPU is not affected; the window slides.
  EXPECT_EQ(
    tracker.admit(recommended_action::component_reset, "GPU-other", t0 + 3h).action,
    recommended_action::component_reset);
  EXPECT_EQ(tracker.admit(recommended_action::component_reset, gpu, t0 + 24h + 1s).action,
            recommended_action::component_reset);
}

TEST(escalation, three_reboots_escalate_to_the_configured_action_then_support) {
  escalation_tracker tracker(no_cooldown());
  for (int i = 0; i < 3; ++i)
    tracker.record_attempt(recommended_action::restart_vm, "", t0 + i * 1h);
  EXPECT_EQ(tracker.admit(recommended_action::restart_bm, "", t0 + 3h).action,
            recommended_action::replace_vm);
  tracker.record_attempt(recommended_action::replace_vm, "", t0 + 3h);
  auto d = tracker.admit(recommended_action::restart_bm, "", t0 + 4h);
  EXPECT_EQ(d.action, recommended_action::contact_support);
  EXPECT_EQ(d.records.size(), 3u);

  auto policy = no_cooldown();
  policy.after_reboots = recommended_action::contact_support;
  escalation_tracker support_only(policy);
  for (int i = 0; i < 3; ++i)
    support_only.record_attempt(recommended_action::restart_bm, "", t0 + i * 1h);
  EXPECT_EQ(support_only.admit(recommended_action::restart_bm, "", t0 + 3h).action,
            recommended_action::contact_support);
}

TEST(escalation, resets_at_cap_climb_over_reboots_at_cap_too) {
  auto policy = no_cooldown();
  policy.max_remediations_per_node = 100; // the per-target ladder alone
  escalation_tracker tracker(policy);
  for (int i = 0; i < 3; ++i) {
    tracker.record_attempt(recommended_action::component_reset, gpu, t0 + i * 1h);
    tracker.record_attempt(recommended_action::restart_bm, "", t0 + i * 1h);
  }
  EXPECT_EQ(tracker.admit(recommended_action::component_reset, gpu, t0 + 3h).action,
            recommended_action::replace_vm);
}

TEST(escalation, cooldown_and_exponential_backoff_defer_attempts) {
  escalation_policy policy;
  policy.cooldown = 60s;
  policy.backoff_initial = 120s;
  policy.backoff_multiplier = 2.0;
  policy.backoff_max = 300s;
  policy.max_resets_per_gpu = 10;
  escalation_tracker tracker(policy);
  tracker.record_attempt(recommended_action::component_reset, gpu, t0);
  auto d = tracker.admit(recommended_action::component_reset, gpu, t0 + 30s);
  ASSERT_TRUE(d.not_before.has_value());
  EXPECT_EQ(*d.not_before, t0 + 120s);
  EXPECT_EQ(d.records.back().event, escalation_event::deferred);
  EXPECT_FALSE(tracker.admit(recommended_action::component_reset, gpu, t0 + 120s)
                 .not_before.has_value());
  tracker.record_attempt(recommended_action::component_reset, gpu, t0 + 120s);
  EXPECT_EQ(
    *tracker.admit(recommended_action::component_reset, gpu, t0 + 121s).not_before,
    t0 + 120s + 240s);
  tracker.record_attempt(recommended_action::component_reset, gpu, t0 + 400s);
  EXPECT_EQ(
    *tracker.admit(recommended_action::component_reset, gpu, t0 + 401s).not_before,
    t0 + 400s + 300s); // capped by backoff_max
}

TEST(escalation, verification_clears_on_the_healthy_event) {
  escalation_tracker tracker;
  auto r = tracker.record_attempt(recommended_action::component_reset, gpu, t0);
  EXPECT_EQ(r.event, escalation_event::attempt_recorded);
  EXPECT_EQ(tracker.next_deadline(), t0 + 600s);
  auto v = tracker.verified("reset-" + gpu, t0 + 90s);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->event, escalation_event::verified);
  EXPECT_FALSE(tracker.verified("reset-" + gpu, t0 + 91s).has_value());
  EXPECT_TRUE(tracker.expire(t0 + 1h).empty());
  EXPECT_FALSE(tracker.next_deadline().has_value());
}

TEST(escalation, a_missing_healthy_event_escalates) {
  escalation_tracker tracker;
  tracker.record_attempt(recommended_action::component_reset, gpu, t0);
  tracker.record_attempt(recommended_action::restart_bm, "", t0);
  EXPECT_TRUE(tracker.expire(t0 + 599s).empty());
  auto out = tracker.expire(t0 + 600s);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].action, recommended_action::restart_bm);
  EXPECT_EQ(out[0].records.front().event, escalation_event::verification_timed_out);
  EXPECT_EQ(out[0].records.front().target, "reset-" + gpu);
  auto later = tracker.expire(t0 + 1h);
  ASSERT_EQ(later.size(), 1u); // the reboot's own 30 min deadline
  EXPECT_EQ(later[0].action, recommended_action::replace_vm);
}

TEST(escalation, counting_and_verifying_apart_start_the_clock_at_success) {
  escalation_tracker tracker;
  // The node actor counts an attempt when its CR is created …
  tracker.remember_attempt(recommended_action::component_reset, gpu, t0);
  EXPECT_FALSE(tracker.next_deadline().has_value());
  EXPECT_EQ(tracker.attempts("reset-" + gpu, t0 + 1s), 1u);
  // … and expects the healthy event from when the 20-minute Job succeeded.
  tracker.expect_healthy(recommended_action::component_reset, gpu, t0 + 20min);
  EXPECT_EQ(tracker.next_deadline(), t0 + 20min + 600s);
  EXPECT_TRUE(tracker.expire(t0 + 20min + 599s).empty());
  EXPECT_EQ(tracker.expire(t0 + 20min + 600s).size(), 1u);
  // A replayed attempt counts towards the cap.
  escalation_tracker replayed;
  for (int i = 0; i < 3; ++i)
    replayed.remember_attempt(recommended_action::component_reset, gpu, t0 + i * 1h);
  EXPECT_EQ(replayed.admit(recommended_action::component_reset, gpu, t0 + 5h).action,
            recommended_action::restart_bm);
}

TEST(escalation, five_remediations_of_a_node_in_a_week_ask_for_a_person) {
  escalation_policy policy;
  policy.cooldown = 0s;
  policy.backoff_initial = 0s;
  escalation_tracker tracker(policy);
  // Five different GPUs reset over six days: each within its own cap.
  for (int i = 0; i < 5; ++i)
    tracker.remember_attempt(recommended_action::component_reset,
                             "GPU-" + std::to_string(i), t0 + i * 24h);
  auto d = tracker.admit(recommended_action::component_reset, "GPU-9", t0 + 6 * 24h);
  EXPECT_EQ(d.action, recommended_action::contact_support);
  ASSERT_EQ(d.records.size(), 1u);
  EXPECT_NE(d.records[0].reason.find("repeated-remediation"), std::string::npos);
  // A week after the first, four remain in the window: admitted again.
  auto later =
    tracker.admit(recommended_action::component_reset, "GPU-9", t0 + 7 * 24h + 1s);
  EXPECT_EQ(later.action, recommended_action::component_reset);
}

TEST(escalation, a_failed_attempt_escalates_at_once) {
  escalation_tracker tracker;
  tracker.record_attempt(recommended_action::component_reset, gpu, t0);
  auto d = tracker.attempt_failed(recommended_action::component_reset, gpu,
                                  "health_check_failed", t0 + 2min);
  EXPECT_EQ(d.action, recommended_action::restart_bm);
  EXPECT_EQ(d.records.front().event, escalation_event::attempt_failed);
  EXPECT_EQ(d.records.front().reason, "health_check_failed");
  EXPECT_FALSE(tracker.next_deadline().has_value());
  auto r = tracker.attempt_failed(recommended_action::replace_vm, "", "no capacity", t0);
  EXPECT_EQ(r.action, recommended_action::contact_support);
}

// A reset that failed because the GPU operator's operands did not come back
// (or their labels could not be restored) goes to a person, not to a reboot
// that drains the node's healthy GPUs and mends neither.
TEST(escalation, a_reset_the_gpu_operator_failed_goes_to_a_person) {
  for (auto reason : {janitor::failure_reason::redeploy_failed,
                      janitor::failure_reason::labels_not_restored}) {
    escalation_tracker tracker;
    tracker.record_attempt(recommended_action::component_reset, gpu, t0);
    auto d = tracker.attempt_failed(recommended_action::component_reset, gpu,
                                    "operands not back", t0 + 10min, reason);
    EXPECT_EQ(d.action, recommended_action::contact_support) << reason;
    EXPECT_EQ(d.records.front().event, escalation_event::attempt_failed);
    EXPECT_EQ(d.records.front().to, recommended_action::contact_support);
    EXPECT_FALSE(tracker.next_deadline().has_value());
  }
  // The reset's own failures still climb to a reboot; other actions ignore it.
  EXPECT_EQ(rung_after_failure(recommended_action::component_reset,
                               janitor::failure_reason::health_check_failed),
            std::nullopt);
  EXPECT_EQ(rung_after_failure(recommended_action::restart_bm,
                               janitor::failure_reason::redeploy_failed),
            std::nullopt);
}

TEST(escalation, manual_actions_are_admitted_untracked) {
  escalation_tracker tracker;
  auto d = tracker.admit(recommended_action::run_fielddiag, gpu, t0);
  EXPECT_EQ(d.action, recommended_action::run_fielddiag);
  auto r = tracker.record_attempt(recommended_action::contact_support, "", t0);
  EXPECT_EQ(r.target, "");
  EXPECT_FALSE(tracker.next_deadline().has_value());
}

// issue 19: the operator's custom remediations count against a cap of their
// own; past it, a failure or a missing healthy event, a person looks.
TEST(escalation, custom_remediations_have_their_own_cap_then_support) {
  auto p = no_cooldown();
  p.max_custom_per_node = 2;
  p.verify_custom_timeout = 20min;
  escalation_tracker tracker(p);
  EXPECT_EQ(escalation_target(recommended_action::custom, gpu), "custom");
  EXPECT_EQ(next_rung(recommended_action::custom, p),
            recommended_action::contact_support);
  tracker.record_attempt(recommended_action::custom, gpu, t0);
  EXPECT_EQ(tracker.next_deadline(), t0 + 20min);
  EXPECT_EQ(tracker.admit(recommended_action::custom, "", t0 + 1h).action,
            recommended_action::custom);
  tracker.record_attempt(recommended_action::custom, "", t0 + 1h);
  auto capped = tracker.admit(recommended_action::custom, "", t0 + 2h);
  EXPECT_EQ(capped.action, recommended_action::contact_support);
  EXPECT_EQ(capped.records.front().event, escalation_event::escalated);
  // The reboots' cap is untouched by them.
  EXPECT_EQ(tracker.admit(recommended_action::restart_bm, "", t0 + 2h).action,
            recommended_action::restart_bm);
  auto failed = tracker.attempt_failed(recommended_action::custom, "", "no", t0 + 3h);
  EXPECT_EQ(failed.action, recommended_action::contact_support);
}

TEST(escalation, ladder_and_targets) {
  escalation_policy p;
  EXPECT_EQ(next_rung(recommended_action::component_reset, p),
            recommended_action::restart_bm);
  EXPECT_EQ(next_rung(recommended_action::restart_vm, p), recommended_action::replace_vm);
  EXPECT_EQ(next_rung(recommended_action::replace_vm, p),
            recommended_action::contact_support);
  EXPECT_EQ(next_rung(recommended_action::contact_support, p),
            recommended_action::contact_support);
  EXPECT_EQ(escalation_target(recommended_action::restart_vm, gpu), "restart");
  EXPECT_EQ(escalation_target(recommended_action::replace_vm, gpu), "replace");
  EXPECT_EQ(escalation_target(recommended_action::contact_support, gpu), "");
  EXPECT_EQ(to_string(escalation_event::verification_timed_out),
            "verification_timed_out");
}

} // namespace
} // namespace vigil::control
