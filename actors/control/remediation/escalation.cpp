#include "actors/control/remediation/escalation.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "actors/control/remediation/remediation_plan.hpp"
#include "actors/janitor/gpu_reset_plan.hpp"

namespace vigil::control {

namespace {

// The ladder has four rungs; more steps than that would be a loop.
constexpr int max_ladder_steps = 4;

// Every custom remediation of a node counts against one cap.
constexpr std::string_view custom_target = "custom";

escalation_record make_record(escalation_event event, recommended_action from,
                              recommended_action to, std::string target,
                              std::string_view gpu_uuid, wall_time at) {
  escalation_record r;
  r.event = event;
  r.from = from;
  r.to = to;
  r.target = std::move(target);
  r.gpu_uuid = std::string{gpu_uuid};
  r.at = at;
  return r;
}

std::string hours(std::chrono::seconds s) {
  return std::to_string(std::chrono::duration_cast<std::chrono::hours>(s).count()) + " h";
}

} // namespace

std::string_view to_string(escalation_event event) {
  switch (event) {
    case escalation_event::admitted: return "admitted";
    case escalation_event::escalated: return "escalated";
    case escalation_event::deferred: return "deferred";
    case escalation_event::attempt_recorded: return "attempt_recorded";
    case escalation_event::verified: return "verified";
    case escalation_event::verification_timed_out: return "verification_timed_out";
    case escalation_event::attempt_failed: return "attempt_failed";
  }
  return "admitted";
}

recommended_action next_rung(recommended_action action, const escalation_policy& policy) {
  switch (action) {
    case recommended_action::component_reset: return recommended_action::restart_bm;
    case recommended_action::restart_vm:
    case recommended_action::restart_bm: return policy.after_reboots;
    default: return recommended_action::contact_support;
  }
}

std::optional<recommended_action> rung_after_failure(recommended_action action,
                                                     std::string_view failure_reason) {
  if (action == recommended_action::component_reset
      && (failure_reason == janitor::failure_reason::redeploy_failed
          || failure_reason == janitor::failure_reason::labels_not_restored))
    return recommended_action::contact_support;
  return std::nullopt;
}

std::string escalation_target(recommended_action action, std::string_view gpu_uuid) {
  switch (action) {
    case recommended_action::component_reset: return reset_group(gpu_uuid);
    case recommended_action::restart_vm:
    case recommended_action::restart_bm: return std::string{restart_group};
    case recommended_action::replace_vm: return std::string{replace_group};
    case recommended_action::custom: return std::string{custom_target};
    default: return {};
  }
}

escalation_tracker::escalation_tracker(escalation_policy policy)
  : policy_(std::move(policy)) {}

std::size_t escalation_tracker::cap(recommended_action action) const {
  switch (action) {
    case recommended_action::component_reset: return policy_.max_resets_per_gpu;
    case recommended_action::replace_vm: return policy_.max_replaces_per_node;
    case recommended_action::custom: return policy_.max_custom_per_node;
    default: return policy_.max_reboots_per_node;
  }
}

std::chrono::seconds escalation_tracker::window(recommended_action action) const {
  switch (action) {
    case recommended_action::component_reset: return policy_.reset_window;
    case recommended_action::replace_vm: return policy_.replace_window;
    case recommended_action::custom: return policy_.custom_window;
    default: return policy_.reboot_window;
  }
}

std::chrono::seconds escalation_tracker::verify_timeout(recommended_action action) const {
  switch (action) {
    case recommended_action::component_reset: return policy_.verify_reset_timeout;
    case recommended_action::replace_vm: return policy_.verify_replace_timeout;
    case recommended_action::custom: return policy_.verify_custom_timeout;
    default: return policy_.verify_reboot_timeout;
  }
}

std::chrono::seconds escalation_tracker::gap_after(std::size_t attempts) const {
  auto exponent = static_cast<double>(attempts > 0 ? attempts - 1 : 0);
  auto backoff = static_cast<double>(policy_.backoff_initial.count())
                 * std::pow(policy_.backoff_multiplier, exponent);
  auto capped = std::min(backoff, static_cast<double>(policy_.backoff_max.count()));
  return std::max(policy_.cooldown,
                  std::chrono::seconds{static_cast<std::int64_t>(capped)});
}

std::size_t escalation_tracker::attempts(const std::string& target, wall_time now) const {
  auto it = history_.find(target);
  if (it == history_.end() || it->second.empty())
    return 0;
  recommended_action action = is_reset_group(target) ? recommended_action::component_reset
                              : target == replace_group ? recommended_action::replace_vm
                              : target == custom_target ? recommended_action::custom
                                                        : recommended_action::restart_bm;
  auto since = now - window(action);
  return static_cast<std::size_t>(std::count_if(it->second.begin(), it->second.end(),
                                                [&](wall_time t) { return t > since; }));
}

std::size_t escalation_tracker::node_attempts(std::chrono::seconds window,
                                              wall_time now) const {
  std::size_t n = 0;
  for (const auto& [target, times] : history_)
    n += static_cast<std::size_t>(std::count_if(
      times.begin(), times.end(), [&](wall_time t) { return t > now - window; }));
  return n;
}

escalation_decision escalation_tracker::admit(recommended_action action,
                                              std::string_view gpu_uuid, wall_time now) {
  escalation_decision decision;
  auto current = action;
  // A node remediated over and over is not fixed by one more: a person looks.
  if (!escalation_target(action, gpu_uuid).empty()) {
    auto n = node_attempts(policy_.node_window, now);
    if (n >= policy_.max_remediations_per_node) {
      auto r = make_record(escalation_event::escalated, action,
                           recommended_action::contact_support,
                           escalation_target(action, gpu_uuid), gpu_uuid, now);
      r.attempts_in_window = n;
      r.reason = std::to_string(n) + " remediations of the node within "
                 + hours(policy_.node_window) + " (repeated-remediation rule, cap "
                 + std::to_string(policy_.max_remediations_per_node) + ")";
      decision.records.push_back(std::move(r));
      decision.action = recommended_action::contact_support;
      return decision;
    }
  }
  for (int step = 0; step < max_ladder_steps; ++step) {
    auto target = escalation_target(current, gpu_uuid);
    auto n = target.empty() ? 0 : attempts(target, now);
    if (!target.empty() && n >= cap(current)) {
      auto next = next_rung(current, policy_);
      auto r =
        make_record(escalation_event::escalated, current, next, target, gpu_uuid, now);
      r.attempts_in_window = n;
      r.reason = std::to_string(n) + " attempts on " + target + " within "
                 + hours(window(current)) + " (cap " + std::to_string(cap(current)) + ")";
      decision.records.push_back(std::move(r));
      current = next;
      continue;
    }
    decision.action = current;
    if (n > 0) {
      auto not_before = history_.at(target).back() + gap_after(n);
      if (now < not_before) {
        auto r =
          make_record(escalation_event::deferred, action, current, target, gpu_uuid, now);
        r.attempts_in_window = n;
        r.not_before = not_before;
        r.reason = "cooldown after " + std::to_string(n) + " attempts on " + target;
        decision.not_before = not_before;
        decision.records.push_back(std::move(r));
        return decision;
      }
    }
    auto r =
      make_record(escalation_event::admitted, action, current, target, gpu_uuid, now);
    r.attempts_in_window = n;
    decision.records.push_back(std::move(r));
    return decision;
  }
  // Only reachable with a policy whose after_reboots loops back; stop at support.
  decision.action = recommended_action::contact_support;
  decision.records.push_back(
    make_record(escalation_event::admitted, action, decision.action, {}, gpu_uuid, now));
  return decision;
}

void escalation_tracker::expect_healthy(recommended_action action,
                                        std::string_view gpu_uuid, wall_time now) {
  auto target = escalation_target(action, gpu_uuid);
  if (!target.empty())
    pending_[target] =
      pending_verification{action, std::string{gpu_uuid}, now + verify_timeout(action)};
}

void escalation_tracker::remember_attempt(recommended_action action,
                                          std::string_view gpu_uuid, wall_time at) {
  auto target = escalation_target(action, gpu_uuid);
  if (!target.empty())
    history_[target].push_back(at);
}

escalation_record escalation_tracker::record_attempt(recommended_action action,
                                                     std::string_view gpu_uuid,
                                                     wall_time now) {
  auto target = escalation_target(action, gpu_uuid);
  auto r = make_record(escalation_event::attempt_recorded, action, action, target,
                       gpu_uuid, now);
  if (target.empty())
    return r;
  auto& times = history_[target];
  auto since = now - window(action);
  while (!times.empty() && times.front() <= since)
    times.pop_front();
  r.attempts_in_window = times.size();
  times.push_back(now);
  auto deadline = now + verify_timeout(action);
  pending_[target] = pending_verification{action, std::string{gpu_uuid}, deadline};
  r.not_before = deadline;
  r.reason = "healthy event expected by " + format_rfc3339(deadline);
  return r;
}

std::optional<escalation_record> escalation_tracker::verified(const std::string& target,
                                                              wall_time now) {
  auto it = pending_.find(target);
  if (it == pending_.end())
    return std::nullopt;
  auto r = make_record(escalation_event::verified, it->second.action, it->second.action,
                       target, it->second.gpu_uuid, now);
  pending_.erase(it);
  return r;
}

std::vector<escalation_record> escalation_tracker::verify_all(wall_time now) {
  std::vector<escalation_record> out;
  for (const auto& [target, pending] : pending_)
    out.push_back(make_record(escalation_event::verified, pending.action, pending.action,
                              target, pending.gpu_uuid, now));
  pending_.clear();
  return out;
}

escalation_decision
escalation_tracker::escalate_from(recommended_action action, recommended_action next,
                                  std::string_view gpu_uuid, escalation_event cause,
                                  const std::string& why, wall_time now) {
  auto cause_record =
    make_record(cause, action, next, escalation_target(action, gpu_uuid), gpu_uuid, now);
  cause_record.reason = why;
  auto decision = admit(next, gpu_uuid, now);
  decision.records.insert(decision.records.begin(), std::move(cause_record));
  return decision;
}

escalation_decision escalation_tracker::attempt_failed(recommended_action action,
                                                       std::string_view gpu_uuid,
                                                       const std::string& why,
                                                       wall_time now,
                                                       std::string_view failure_reason) {
  pending_.erase(escalation_target(action, gpu_uuid));
  auto next =
    rung_after_failure(action, failure_reason).value_or(next_rung(action, policy_));
  return escalate_from(action, next, gpu_uuid, escalation_event::attempt_failed, why,
                       now);
}

std::vector<escalation_decision> escalation_tracker::expire(wall_time now) {
  std::vector<escalation_decision> out;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second.deadline > now) {
      ++it;
      continue;
    }
    auto pending = std::move(it->second);
    it = pending_.erase(it);
    out.push_back(
      escalate_from(pending.action, next_rung(pending.action, policy_), pending.gpu_uuid,
                    escalation_event::verification_timed_out,
                    "no healthy event by " + format_rfc3339(pending.deadline), now));
  }
  return out;
}

std::optional<wall_time> escalation_tracker::next_deadline() const {
  std::optional<wall_time> earliest;
  for (const auto& [target, pending] : pending_)
    if (!earliest || pending.deadline < *earliest)
      earliest = pending.deadline;
  return earliest;
}

} // namespace vigil::control
