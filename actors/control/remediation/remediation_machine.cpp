// remediation_machine (seed 000 §4): its inputs (the node's state, the
// breaker's answer, the timers), the queue of requests (seed 000 §4.3), the
// admission of the one in flight, its release (seed 000 §4.2) and the
// commands that arm timers, journal and post. Creating and following the CR
// is in remediation_machine_cr.cpp; validation, verification and escalation
// in remediation_machine_verification.cpp.
#include "actors/control/remediation/remediation_machine.hpp"

#include <utility>

#include "actors/control/remediation/remediation_machine_internal.hpp"

namespace vigil::control {

namespace cmd = remediation_command;
using nlohmann::json;

std::string_view to_string(remediation_step step) {
  switch (step) {
    case remediation_step::idle: return "idle";
    case remediation_step::ready: return "ready";
    case remediation_step::finding: return "finding";
    case remediation_step::deferred: return "deferred";
    case remediation_step::draining_fully: return "draining_fully";
    case remediation_step::asking_breaker: return "asking_breaker";
    case remediation_step::creating: return "creating";
    case remediation_step::following: return "following";
    case remediation_step::validating: return "validating";
  }
  return "idle";
}

std::optional<drain_request> drain_wanted(const std::vector<active_record>& records,
                                          bool full_drain_required) {
  auto wanted = desired_drain(records);
  if (!full_drain_required || records.empty())
    return wanted;
  // seed 000 §3.1: a reboot or a replacement disturbs every pod, so every pod
  // is evicted first (PDBs asked), whatever the records alone would drain.
  drain_request full;
  if (wanted)
    full = *wanted;
  full.action = recommended_action::restart_bm;
  full.gpu_uuids.clear();
  return full;
}

escalation_policy node_escalation_policy(escalation_policy policy,
                                         std::size_t remediation_repeat_threshold,
                                         std::chrono::seconds remediation_window) {
  policy.max_remediations_per_node = remediation_repeat_threshold;
  policy.node_window = remediation_window;
  return policy;
}

remediation_machine::remediation_machine(std::string node_name, remediation_config config)
  : node_(std::move(node_name)), config_(std::move(config)),
    escalation_(config_.escalation) {}

remediation_plan remediation_machine::plan(const context& c, recommended_action action,
                                           const std::string& gpu_uuid,
                                           const std::string& custom_action) const {
  return plan_remediation(action, gpu_uuid, c.node().facts, config_.options,
                          custom_action);
}

// seed 000 §4 "after draining": quarantined (cordoned; in a dry run it would
// be), not opted out, no drain running, and what the records want drained
// has been drained, fully or partially.
bool remediation_machine::ready(const remediation_view& view) const {
  if (view.records.empty() || view.drain_busy || !view.quarantined || view.opted_out)
    return false;
  auto wanted = desired_drain(view.records);
  return !wanted || view.drained == drain_history::full_done
         || drain_key(*wanted) == view.drained_key;
}

void remediation_machine::resume(recommended_action action, const std::string& gpu_uuid,
                                 const std::string& event_id,
                                 const std::string& custom_action, const std::string& cr,
                                 bool validating) {
  resume_ =
    resumed{action, gpu_uuid, event_id, custom_action, cr, validating && !cr.empty()};
}

remediation_commands remediation_machine::consider(const remediation_view& view,
                                                   wall_time now) {
  context c{&view, now, {}};
  if (resume_ && queue_.idle() && step_ == remediation_step::idle) {
    // The request the journal says is in flight: its CR is looked for
    // (finding holds the quarantine) and followed if it is there.
    remediation_request request;
    request.plan = plan(c, resume_->action, resume_->gpu_uuid, resume_->custom_action);
    request.event_id = resume_->event_id;
    request.requested_at = now;
    handled_.insert(request.event_id);
    queue_.restore_in_flight(std::move(request));
    const auto from = *resume_;
    resume_.reset();
    step_ = remediation_step::ready;
    if (from.validating)
      resume_validation(c, from.cr);
    else
      start(c);
  }
  if (!fault_pending_.empty())
    for (const auto& record : view.records)
      if (record.event_id == fault_pending_)
        fault_pending_.clear();
  if (view.records.empty()) {
    if (holds_quarantine()) // released once the CR or its validation is over
      return std::move(c.out);
    if (!queue_.idle() || !handled_.empty() || !annotation_.groups.empty())
      release(c);
    return std::move(c.out);
  }
  if (!ready(view))
    return std::move(c.out);
  plan_new_records(c); // first: a fault the machine reported climbs the ladder
  replan_after_repair(c);
  // The full drain a reboot or replacement waited for is done.
  if (step_ == remediation_step::draining_fully
      && view.drained == drain_history::full_done) {
    step_ = remediation_step::ready;
    start(c);
  }
  return std::move(c.out);
}

// A request for every active record not planned yet.
void remediation_machine::plan_new_records(context& c) {
  for (const auto& record : c.node().records) {
    if (!handled_.insert(record.event_id).second)
      continue;
    remediation_request request;
    request.plan = plan(c, record.action, gpu_uuid_of(record), record.custom_action);
    request.event_id = record.event_id;
    request.requested_at = c.now;
    submit(c, std::move(request));
  }
}

// seed 000 §4.3 through the queue: start, queue behind, or skip as redundant.
void remediation_machine::submit(context& c, remediation_request request) {
  if (request.plan.kind == remediation_kind::none)
    return;
  if (request.plan.kind == remediation_kind::manual) {
    auto why = request.plan.reason + " for event " + request.event_id
               + ": no automatic action; the node stays quarantined";
    c.out.push_back(cmd::hand_to_operator{std::move(request), std::move(why)});
    return;
  }
  auto decision = queue_.submit(request);
  json details = {{"verdict", std::string{to_string(decision.verdict)}},
                  {"coveringGroup", decision.covering_group},
                  {"why", decision.reason}};
  if (request.plan.fell_back)
    details["fellBack"] = true;
  c.out.push_back(cmd::journal_step{"requested", request, std::move(details)});
  for (auto& dropped : decision.superseded)
    c.out.push_back(cmd::journal_step{
      "covered", std::move(dropped), {{"coveredBy", request.plan.group}}});
  switch (decision.verdict) {
    case queue_verdict::start_now: step_ = remediation_step::ready; return start(c);
    case queue_verdict::skipped_same:
    case queue_verdict::skipped_covered:
      c.out.push_back(cmd::count{remediation_metric::skipped});
      // seed 000 §4.3 case 4: the covered group is recorded with the CR that
      // covers it.
      if (const auto* by = find_group(annotation_, decision.covering_group)) {
        remember(annotation_, request.plan.group, *by);
        write_annotation(c);
      }
      c.out.push_back(
        cmd::log{"remediation " + request.plan.group + " skipped: " + decision.reason});
      return;
    default: return;
  }
}

// A CR under the request's name may exist (created before a restart): follow
// it instead of asking again. Else the ladder, the breaker, the CR.
void remediation_machine::start(context& c) {
  if (!queue_.in_flight() || step_ != remediation_step::ready)
    return;
  const auto& request = *queue_.in_flight();
  if (request.plan.kind == remediation_kind::provider_hook || config_.dry_run)
    return admit(c);
  step_ = remediation_step::finding;
  c.out.push_back(cmd::find_cr{
    request, maintenance_cr_name(node_, request.plan, request.event_id), generation_});
}

// The escalation ladder first (caps, cooldown, backoff), then the full drain
// a reboot or replacement needs, then the breaker.
void remediation_machine::admit(context& c) {
  auto request = *queue_.in_flight();
  auto decision = escalation_.admit(request.plan.action, request.plan.gpu_uuid, c.now);
  journal_escalation(c, request, decision.records);
  // A climb takes effect at once, even when its rung must wait out a
  // cooldown: the queue holds the escalated request, so the deferred start
  // admits that one and does not climb (nor journal and count the climb)
  // again.
  if (decision.action != request.plan.action) {
    auto climbed = plan(c, decision.action, request.plan.gpu_uuid);
    if (!is_automatic(climbed.kind)) { // the ladder ends with a person
      c.out.push_back(
        cmd::hand_to_operator{{climbed, request.event_id, c.now},
                              request.plan.group + " escalated to " + climbed.reason
                                + ": no automatic action; the node stays quarantined"});
      return next(c, request.plan.group);
    }
    for (auto& dropped : queue_.escalate_in_flight(climbed))
      c.out.push_back(
        cmd::journal_step{"covered", std::move(dropped), {{"coveredBy", climbed.group}}});
    request = *queue_.in_flight();
  }
  if (decision.not_before)
    return defer(c, *decision.not_before);
  // seed 000 §3.1: a partial drain preceded a reset; a reboot or replacement
  // after it (a fallback, a failed or unverified reset) would take down pods
  // that were never evicted and whose PodDisruptionBudgets were never asked.
  if (strength(request.plan.kind) > strength(remediation_kind::gpu_reset)
      && c.node().drained != drain_history::full_done) {
    step_ = remediation_step::draining_fully;
    c.out.push_back(
      cmd::journal_step{"drain_widened",
                        request,
                        {{"why", "a full drain comes before " + request.plan.group}}});
    c.out.push_back(cmd::drain_fully{request});
    return;
  }
  step_ = remediation_step::asking_breaker;
  c.out.push_back(cmd::ask_breaker{request, c.node().pool, generation_});
}

remediation_commands remediation_machine::on_breaker_answer(std::uint64_t generation,
                                                            const std::string& refusal,
                                                            const remediation_view& view,
                                                            wall_time now) {
  context c{&view, now, {}};
  if (generation != generation_) {
    // Released meanwhile: give back the slot that came too late.
    if (refusal.empty() && !admitted_)
      c.out.push_back(cmd::leave_pool{});
    return std::move(c.out);
  }
  if (step_ != remediation_step::asking_breaker)
    return std::move(c.out);
  const auto& request = *queue_.in_flight();
  if (!refusal.empty()) {
    c.out.push_back(
      cmd::log{"remediation " + request.plan.group + " held: " + refusal, true});
    c.out.push_back(cmd::journal_step{"held", request, {{"why", refusal}}});
    defer(c, now + config_.retry);
    return std::move(c.out);
  }
  admitted_ = true;
  create(c);
  return std::move(c.out);
}

// The request in flight is over: the next waiting one starts.
void remediation_machine::next(context& c, const std::string& group) {
  const bool held = holds_quarantine();
  cr_name_.clear();
  step_ = remediation_step::idle;
  if (held && !holds_quarantine())
    c.out.push_back(cmd::hold_ended{});
  leave_pool(c);
  if (queue_.finish(group)) {
    step_ = remediation_step::ready;
    start(c);
  }
  replan_after_repair(c);
}

// A repair is over (it and its validation): what was reported about its
// target since it began was not fixed by it. Waits for a view of the node,
// for no request of the repair's own to be in flight, and for a fault the
// machine reported (a failed validation, which climbs the ladder first) to
// be applied.
void remediation_machine::replan_after_repair(context& c) {
  if (!repaired_ || c.view == nullptr || !fault_pending_.empty()
      || step_ == remediation_step::following || step_ == remediation_step::validating)
    return;
  for (const auto& record : c.node().records)
    if (record.generated && *record.generated > repaired_->began
        && (repaired_->gpu_uuid.empty() || gpu_uuid_of(record) == repaired_->gpu_uuid))
      handled_.erase(record.event_id);
  repaired_.reset();
  if (ready(*c.view))
    plan_new_records(c);
}

// seed 000 §4.2: the release ends the node's remediations and removes the
// annotation. A CR in flight is not deleted: it runs its course.
void remediation_machine::release(context& c) {
  if (auto in_flight = queue_.in_flight())
    c.out.push_back(cmd::journal_step{"released", *in_flight, {{"cr", cr_name_}}});
  for (auto& dropped : queue_.clear())
    c.out.push_back(cmd::journal_step{"released", std::move(dropped)});
  // The release is the verification of whatever was pending.
  for (const auto& v : escalation_.verify_all(c.now)) {
    remediation_request verified;
    verified.plan = plan(c, v.to, v.gpu_uuid);
    verified.event_id = "release";
    c.out.push_back(
      cmd::journal_step{"verified", std::move(verified), {{"target", v.target}}});
  }
  cr_name_.clear();
  handled_.clear();
  healthy_early_.clear();
  repaired_.reset();
  step_ = remediation_step::idle;
  ++generation_;
  // Always: a node actor restarted after a crash may hold a slot it does not
  // know of (the breaker counts a node once).
  admitted_ = false;
  c.out.push_back(cmd::leave_pool{});
  if (!annotation_.groups.empty()) {
    annotation_ = {};
    write_annotation(c);
  }
}

remediation_commands remediation_machine::on_timer(remediation_timer timer,
                                                   const remediation_view& view,
                                                   wall_time now) {
  context c{&view, now, {}};
  switch (timer) {
    case remediation_timer::start:
      start_armed_ = false;
      if (step_ == remediation_step::deferred) {
        step_ = remediation_step::ready;
        start(c);
      }
      break;
    case remediation_timer::poll:
      poll_armed_ = false;
      if (step_ == remediation_step::following)
        c.out.push_back(cmd::read_cr{queue_.in_flight()->plan, cr_name_, generation_});
      else if (step_ == remediation_step::validating)
        c.out.push_back(cmd::read_validation{validation_job_, generation_});
      break;
    case remediation_timer::verify:
      verify_armed_ = false;
      for (const auto& decision : escalation_.expire(now)) {
        if (decision.records.empty())
          continue;
        const auto& first = decision.records.front();
        bool still_named = first.gpu_uuid.empty();
        for (const auto& record : view.records)
          still_named = still_named || gpu_uuid_of(record) == first.gpu_uuid;
        if (!still_named) // nothing names the GPU: its healthy event did come
          continue;
        remediation_request timed_out;
        timed_out.plan = plan(c, first.from, first.gpu_uuid);
        // Unique per timeout: its CRs must never be mistaken for an earlier one's.
        timed_out.event_id = "verification/" + first.target + "/" + format_rfc3339(now);
        c.out.push_back(cmd::log{
          "no healthy event for " + first.target + " in time: " + first.reason, true});
        escalate(c, timed_out, decision);
      }
      arm_verify(c);
      break;
  }
  return std::move(c.out);
}

void remediation_machine::arm(context& c, remediation_timer timer, wall_time at) {
  bool& armed = timer == remediation_timer::start  ? start_armed_
                : timer == remediation_timer::poll ? poll_armed_
                                                   : verify_armed_;
  if (armed)
    return;
  armed = true;
  c.out.push_back(cmd::wake{timer, at});
}

void remediation_machine::arm_verify(context& c) {
  if (auto at = escalation_.next_deadline())
    arm(c, remediation_timer::verify, *at);
}

void remediation_machine::defer(context& c, wall_time until) {
  step_ = remediation_step::deferred;
  deferred_until_ = until;
  arm(c, remediation_timer::start, until);
}

void remediation_machine::leave_pool(context& c) {
  if (!admitted_)
    return;
  admitted_ = false;
  c.out.push_back(cmd::leave_pool{});
}

void remediation_machine::write_annotation(context& c) {
  if (!config_.dry_run)
    c.out.push_back(cmd::write_annotation{annotation_});
}

void remediation_machine::post_event(context& c, std::string reason, std::string message,
                                     bool warning) {
  if (!config_.dry_run)
    c.out.push_back(cmd::post_event{std::move(reason), std::move(message), warning});
}

json remediation_machine::summary(wall_time now) const {
  json waiting = json::array();
  for (const auto& w : queue_.waiting())
    waiting.push_back(w.plan.group);
  json out = {{"inFlight", queue_.in_flight() ? queue_.in_flight()->plan.group : ""},
              {"step", std::string{to_string(step_)}},
              {"cr", cr_name_},
              {"waiting", waiting},
              {"annotation", encode_remediation_state(annotation_)}};
  // The CR's kind as kubectl shows it: an operator's own for CUSTOM.
  if (const auto& in_flight = queue_.in_flight()) {
    const auto& custom = in_flight->plan.custom;
    out["kind"] = custom ? custom->kind : std::string{to_string(in_flight->plan.kind)};
    if (custom)
      out["customAction"] = custom->name;
    const auto action = in_flight->plan.action;
    out["action"] = std::string{to_string(action)};
    out["attempts"] =
      escalation_.attempts(escalation_target(action, in_flight->plan.gpu_uuid), now);
    out["nextRung"] = std::string{to_string(next_rung(action, config_.escalation))};
    if (step_ == remediation_step::deferred)
      out["deferredUntil"] = format_rfc3339(deferred_until_);
  }
  return out;
}

} // namespace vigil::control
