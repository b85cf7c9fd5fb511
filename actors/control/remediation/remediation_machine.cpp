#include "actors/control/remediation/remediation_machine.hpp"

#include <utility>

#include "actors/janitor/gpu_reset_plan.hpp"

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

std::string validation_job_name(std::string_view cr) {
  return janitor::job_name_for("vigil-validate-", cr);
}

escalation_policy node_escalation_policy(escalation_policy policy,
                                         std::size_t remediation_repeat_threshold,
                                         std::chrono::seconds remediation_window) {
  policy.max_remediations_per_node = remediation_repeat_threshold;
  policy.node_window = remediation_window;
  return policy;
}

/// One input's surroundings: what the node looks like, when, and the
/// commands collected so far.
struct remediation_machine::context {
  const remediation_view* view; ///< null for inputs that need none
  wall_time now;
  remediation_commands out;

  const remediation_view& node() const {
    static const remediation_view none;
    return view != nullptr ? *view : none;
  }
};

remediation_machine::remediation_machine(std::string node_name, remediation_config config)
  : node_(std::move(node_name)), config_(std::move(config)),
    escalation_(config_.escalation) {}

remediation_plan remediation_machine::plan(const context& c, recommended_action action,
                                           const std::string& gpu_uuid) const {
  return plan_remediation(action, gpu_uuid, c.node().facts, config_.options);
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

remediation_commands remediation_machine::consider(const remediation_view& view,
                                                   wall_time now) {
  context c{&view, now, {}};
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
  for (const auto& record : view.records) {
    if (!handled_.insert(record.event_id).second)
      continue;
    remediation_request request;
    request.plan = plan(c, record.action, gpu_uuid_of(record));
    request.event_id = record.event_id;
    request.requested_at = now;
    submit(c, std::move(request));
  }
  // The full drain a reboot or replacement waited for is done.
  if (step_ == remediation_step::draining_fully
      && view.drained == drain_history::full_done) {
    step_ = remediation_step::ready;
    start(c);
  }
  return std::move(c.out);
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
    if (strength(climbed.kind) == 0) { // the ladder ends with a person
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

void remediation_machine::create(context& c) {
  const auto request = *queue_.in_flight();
  if (request.plan.kind == remediation_kind::provider_hook)
    return hand_to_provider(c, request);
  auto cr = maintenance_cr_name(node_, request.plan, request.event_id);
  if (config_.dry_run) {
    c.out.push_back(cmd::journal_step{"created", request, {{"cr", cr}}});
    c.out.push_back(cmd::log{"would create " + std::string{to_string(request.plan.kind)}
                             + " " + cr + " (dry run)"});
    return next(c, request.plan.group);
  }
  step_ = remediation_step::creating;
  gpus_before_ = c.node().gpu_count;
  c.out.push_back(cmd::create_cr{request, std::move(cr), generation_});
}

// REPLACE_VM with remediation.replace_with: ProviderHook: no CR; the node is
// annotated for the provider's own automation, and the replacement is
// expected within verify_replace_seconds, else CONTACT_SUPPORT.
void remediation_machine::hand_to_provider(context& c,
                                           const remediation_request& request) {
  c.out.push_back(cmd::journal_step{
    "handed_to_provider", request, {{"annotation", "vigil.dev/replace-requested"}}});
  if (!config_.dry_run) {
    escalation_.remember_attempt(request.plan.action, request.plan.gpu_uuid, c.now);
    escalation_.expect_healthy(request.plan.action, request.plan.gpu_uuid, c.now);
    arm_verify(c);
    c.out.push_back(cmd::count{remediation_metric::started});
    c.out.push_back(cmd::request_replacement{request, c.now});
    post_event(c, "ReplaceRequested",
               "REPLACE_VM for event " + request.event_id
                 + ": handed to the provider's automation",
               true);
  }
  next(c, request.plan.group);
}

remediation_commands remediation_machine::on_cr_found(std::uint64_t generation,
                                                      const std::string& cr,
                                                      wall_time now) {
  context c{nullptr, now, {}};
  if (generation == generation_ && step_ == remediation_step::finding) {
    c.out.push_back(cmd::log{"following " + cr + ", created before a restart"});
    created(c, cr, false);
  }
  return std::move(c.out);
}

remediation_commands remediation_machine::on_cr_absent(std::uint64_t generation,
                                                       const remediation_view& view,
                                                       wall_time now) {
  context c{&view, now, {}};
  if (generation == generation_ && step_ == remediation_step::finding)
    admit(c);
  return std::move(c.out);
}

remediation_commands remediation_machine::on_retry(std::uint64_t generation,
                                                   const std::string& why,
                                                   wall_time now) {
  context c{nullptr, now, {}};
  if (generation != generation_)
    return std::move(c.out);
  if (step_ == remediation_step::finding || step_ == remediation_step::asking_breaker
      || step_ == remediation_step::creating) {
    c.out.push_back(cmd::log{why + "; retrying", true});
    defer(c, now + config_.retry);
  }
  return std::move(c.out);
}

remediation_commands remediation_machine::on_cr_created(std::uint64_t generation,
                                                        const std::string& cr,
                                                        wall_time now) {
  context c{nullptr, now, {}};
  if (generation == generation_ && step_ == remediation_step::creating)
    created(c, cr, true);
  return std::move(c.out);
}

remediation_commands remediation_machine::on_cr_rejected(std::uint64_t generation,
                                                         const std::string& why,
                                                         const remediation_view& view,
                                                         wall_time now) {
  context c{&view, now, {}};
  if (generation != generation_ || step_ != remediation_step::creating)
    return std::move(c.out);
  // Refused for good (403 RBAC, 422 invalid, 404 no CRD): a failed attempt.
  cr_name_ =
    maintenance_cr_name(node_, queue_.in_flight()->plan, queue_.in_flight()->event_id);
  finished(c, {"Rejected", true, false, "rejected", why, std::nullopt});
  return std::move(c.out);
}

// The CR exists: created now (`fresh`), or found under its name, created
// before a restart (its attempt is already counted, replayed from the journal).
void remediation_machine::created(context& c, const std::string& cr, bool fresh) {
  const auto& request = *queue_.in_flight();
  step_ = remediation_step::following;
  cr_name_ = cr;
  cr_created_ = c.now;
  // A replacement takes hours (a new machine joins); a reset or reboot minutes.
  cr_deadline_ =
    c.now
    + (request.plan.kind == remediation_kind::terminate_node ? config_.terminate_timeout
                                                             : config_.cr_timeout);
  if (fresh) {
    c.out.push_back(cmd::count{remediation_metric::started});
    // Counted now; verified once the CR has succeeded (finished()).
    escalation_.remember_attempt(request.plan.action, request.plan.gpu_uuid, c.now);
  }
  remember(annotation_, request.plan.group, {request.plan.kind, cr, c.now});
  write_annotation(c);
  const auto kind = std::string{to_string(request.plan.kind)};
  c.out.push_back(cmd::log{kind + " " + cr + " created for " + request.plan.group + " ("
                           + request.plan.reason + ")"});
  post_event(c, "RemediationStarted",
             kind + " " + cr + " created for " + request.plan.group, false);
  arm(c, remediation_timer::poll, c.now + config_.poll);
}

remediation_commands remediation_machine::on_cr_progress(std::uint64_t generation,
                                                         const cr_progress& progress,
                                                         const remediation_view& view,
                                                         wall_time now) {
  context c{&view, now, {}};
  if (generation != generation_ || step_ != remediation_step::following)
    return std::move(c.out);
  if (progress.terminal)
    finished(c, progress);
  else if (now >= cr_deadline_)
    finished(c, {progress.phase, true, false, "timeout",
                 "not finished within remediation.cr_timeout_seconds", std::nullopt});
  else
    arm(c, remediation_timer::poll, now + config_.poll);
  return std::move(c.out);
}

remediation_commands remediation_machine::on_cr_missing(std::uint64_t generation,
                                                        const remediation_view& view,
                                                        wall_time now) {
  context c{&view, now, {}};
  if (generation == generation_ && step_ == remediation_step::following)
    // Someone deleted it: the remediation did not happen.
    finished(c, {"Deleted", true, false, "deleted",
                 "the CR was deleted before it finished", std::nullopt});
  return std::move(c.out);
}

remediation_commands remediation_machine::on_cr_unreadable(std::uint64_t generation,
                                                           wall_time now) {
  context c{nullptr, now, {}};
  if (generation == generation_ && step_ == remediation_step::following)
    arm(c, remediation_timer::poll, now + config_.poll);
  return std::move(c.out);
}

// The CR in flight is done, one way or the other.
void remediation_machine::finished(context& c, const cr_progress& progress) {
  const auto request = *queue_.in_flight();
  const auto cr = cr_name_;
  c.out.push_back(cmd::journal_step{progress.succeeded ? "succeeded" : "failed",
                                    request,
                                    {{"cr", cr},
                                     {"crPhase", progress.phase},
                                     {"failureReason", progress.failure_reason},
                                     {"message", progress.message}}});
  const auto kind = std::string{to_string(request.plan.kind)};
  if (progress.succeeded) {
    c.out.push_back(cmd::count{remediation_metric::succeeded});
    c.out.push_back(cmd::log{kind + " " + cr + " succeeded"});
    post_event(c, "RemediationSucceeded", kind + " " + cr + " succeeded", false);
    const auto target = escalation_target(request.plan.action, request.plan.gpu_uuid);
    if (healthy_early_.erase(target) > 0)
      c.out.push_back(
        cmd::journal_step{"verified", request, {{"target", target}, {"cr", cr}}});
    else
      escalation_.expect_healthy(request.plan.action, request.plan.gpu_uuid, c.now);
    if (request.plan.kind == remediation_kind::reboot_node) {
      // The boot ID changed and the node is Ready (the janitor checked both):
      // what was reported before the reboot began is gone with the old boot;
      // a fault reported since belongs to the new one and stays.
      const auto boot_began = progress.started_at.value_or(cr_created_);
      std::vector<active_record> predating;
      for (const auto& record : c.node().records)
        if (!record.generated || *record.generated < boot_began)
          predating.push_back(record);
      if (!predating.empty())
        c.out.push_back(cmd::clear_records{cr, std::move(predating)});
    }
    arm_verify(c);
    const bool validated = request.plan.kind == remediation_kind::gpu_reset
                             ? config_.validation.after_reset
                             : request.plan.kind == remediation_kind::reboot_node
                                 && config_.validation.after_reboot;
    if (validated)
      return validate(c);
    return next(c, request.plan.group);
  }
  c.out.push_back(cmd::count{remediation_metric::failed});
  auto why = kind + " " + cr + " failed"
             + (progress.failure_reason.empty() ? "" : ": " + progress.failure_reason);
  c.out.push_back(cmd::log{why, true});
  post_event(c, "RemediationFailed", why, true);
  auto decision =
    escalation_.attempt_failed(request.plan.action, request.plan.gpu_uuid, why, c.now);
  next(c, request.plan.group);
  escalate(c, request, decision);
}

// seed 003 "validate before return": a reset or reboot can "succeed" while
// CUDA, DCGM or NCCL still fail. The node stays quarantined until a Job on it
// proves the GPUs work and that none went missing.
void remediation_machine::validate(context& c) {
  const auto& request = *queue_.in_flight();
  step_ = remediation_step::validating;
  validation_job_ = validation_job_name(cr_name_);
  validation_deadline_ = c.now + config_.validation.timeout;
  c.out.push_back(cmd::journal_step{
    "validating", request, {{"job", validation_job_}, {"cr", cr_name_}}});
  run_validation(c);
}

remediation_commands
remediation_machine::on_validation_progress(std::uint64_t generation,
                                            const validation_progress& progress,
                                            const remediation_view& view, wall_time now) {
  context c{&view, now, {}};
  if (generation != generation_ || step_ != remediation_step::validating)
    return std::move(c.out);
  if (!progress.done) {
    if (now >= validation_deadline_)
      validation_failed(c, "not passed within remediation.validation.timeout_seconds");
    else
      arm(c, remediation_timer::poll, now + config_.poll);
    return std::move(c.out);
  }
  if (!progress.passed) {
    validation_failed(c, progress.message.empty() ? "the validation Job failed"
                                                  : progress.message);
    return std::move(c.out);
  }
  const auto request = *queue_.in_flight();
  c.out.push_back(cmd::journal_step{"validated", request, {{"job", validation_job_}}});
  c.out.push_back(cmd::count{remediation_metric::validated});
  post_event(c, "RemediationValidated",
             std::string{to_string(request.plan.kind)} + " " + cr_name_ + " validated by "
               + validation_job_,
             false);
  next(c, request.plan.group);
  return std::move(c.out);
}

remediation_commands
remediation_machine::on_validation_missing(std::uint64_t generation,
                                           const remediation_view& view, wall_time now) {
  context c{&view, now, {}};
  if (generation != generation_ || step_ != remediation_step::validating)
    return std::move(c.out);
  if (now >= validation_deadline_)
    validation_failed(c, "the validation Job " + validation_job_ + " does not exist");
  else // its creation failed or it was deleted: ask again
    run_validation(c);
  return std::move(c.out);
}

// Asks for the validation Job (again, after a missing one: the name is
// fixed, so a Job that exists is the one) and reads it at the next poll.
void remediation_machine::run_validation(context& c) {
  const auto& request = *queue_.in_flight();
  std::vector<std::string> gpus;
  if (!request.plan.gpu_uuid.empty())
    gpus.push_back(request.plan.gpu_uuid);
  c.out.push_back(cmd::run_validation{request, validation_job_, std::move(gpus),
                                      gpus_before_, generation_});
  arm(c, remediation_timer::poll, c.now + config_.poll);
}

// A failed validation is a fault vigil found itself: it climbs the ladder as
// a failed attempt does, through a HealthEvent of its own that keeps the node
// quarantined (its agent's healthy event may already have cleared the rest).
void remediation_machine::validation_failed(context& c, const std::string& why) {
  const auto request = *queue_.in_flight();
  c.out.push_back(cmd::journal_step{
    "validation_failed", request, {{"job", validation_job_}, {"why", why}}});
  c.out.push_back(cmd::count{remediation_metric::validation_failed});
  const auto kind = std::string{to_string(request.plan.kind)};
  c.out.push_back(cmd::log{kind + " " + cr_name_ + " not validated: " + why, true});
  post_event(c, "RemediationValidationFailed", kind + " " + cr_name_ + ": " + why, true);
  auto decision = escalation_.attempt_failed(request.plan.action, request.plan.gpu_uuid,
                                             "validation failed: " + why, c.now);
  journal_escalation(c, request, decision.records);
  health_event fault;
  fault.id = validation_job_ + "/failed";
  fault.agent = "vigil-validation";
  fault.component_class = "GPU";
  fault.check_name = "RemediationValidation";
  fault.is_fatal = true;
  fault.is_healthy = false;
  fault.action = decision.action;
  fault.node_name = node_;
  fault.generated = c.now;
  fault.message = kind + " " + cr_name_ + " succeeded but its validation failed: " + why;
  if (!request.plan.gpu_uuid.empty())
    fault.entities = {{"GPU_UUID", request.plan.gpu_uuid}};
  fault_pending_ = fault.id;
  next(c, request.plan.group);
  c.out.push_back(cmd::report_fault{std::move(fault)});
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
}

// seed 000 §4 escalation ladder: the next rung for a failed or unverified
// remediation, planned and submitted like a new request.
void remediation_machine::escalate(context& c, const remediation_request& failed,
                                   const escalation_decision& decision) {
  journal_escalation(c, failed, decision.records);
  if (decision.action == failed.plan.action || c.node().records.empty())
    return;
  remediation_request request;
  request.plan = plan(c, decision.action, failed.plan.gpu_uuid);
  request.event_id = failed.event_id;
  request.requested_at = c.now;
  submit(c, std::move(request));
}

void remediation_machine::journal_escalation(
  context& c, const remediation_request& request,
  const std::vector<escalation_record>& records) {
  for (const auto& r : records) {
    if (r.event == escalation_event::admitted
        || r.event == escalation_event::attempt_recorded)
      continue;
    // Every climb counts: a cap reached, a failed or unverified attempt.
    const bool climbs = r.event == escalation_event::escalated
                        || ((r.event == escalation_event::attempt_failed
                             || r.event == escalation_event::verification_timed_out)
                            && r.to != r.from);
    if (climbs) {
      c.out.push_back(cmd::count{remediation_metric::escalated});
      c.out.push_back(cmd::log{std::string{vigil::to_string(r.from)} + " escalated to "
                                 + std::string{vigil::to_string(r.to)} + ": " + r.reason,
                               true});
    }
    json details = {{"escalation", std::string{to_string(r.event)}},
                    {"from", std::string{vigil::to_string(r.from)}},
                    {"to", std::string{vigil::to_string(r.to)}},
                    {"target", r.target},
                    {"attemptsInWindow", r.attempts_in_window},
                    {"why", r.reason}};
    if (r.not_before)
      details["notBefore"] = format_rfc3339(*r.not_before);
    c.out.push_back(
      cmd::journal_step{std::string{to_string(r.event)}, request, std::move(details)});
  }
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
        c.out.push_back(
          cmd::read_cr{queue_.in_flight()->plan.kind, cr_name_, generation_});
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

remediation_commands remediation_machine::on_healthy_event(const health_event& event,
                                                           wall_time now) {
  context c{nullptr, now, {}};
  for (const auto& e : event.entities) {
    if (e.type != "GPU_UUID")
      continue;
    auto target = reset_group(e.value);
    if (queue_.in_flight() && queue_.in_flight()->plan.group == target)
      healthy_early_.insert(target); // before the CR's success was seen
    if (escalation_.verified(target, now)) {
      c.out.push_back(cmd::log{"reset of " + e.value + " verified by event " + event.id});
      remediation_request verified;
      verified.plan.kind = remediation_kind::gpu_reset;
      verified.plan.action = recommended_action::component_reset;
      verified.plan.group = target;
      verified.plan.gpu_uuid = e.value;
      verified.event_id = event.id;
      c.out.push_back(
        cmd::journal_step{"verified", std::move(verified), {{"target", target}}});
    }
  }
  return std::move(c.out);
}

void remediation_machine::remember_attempt(recommended_action action,
                                           const std::string& gpu_uuid, wall_time at) {
  escalation_.remember_attempt(action, gpu_uuid, at);
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

json remediation_machine::summary() const {
  json waiting = json::array();
  for (const auto& w : queue_.waiting())
    waiting.push_back(w.plan.group);
  json out = {{"inFlight", queue_.in_flight() ? queue_.in_flight()->plan.group : ""},
              {"step", std::string{to_string(step_)}},
              {"cr", cr_name_},
              {"waiting", waiting},
              {"annotation", encode_remediation_state(annotation_)}};
  if (queue_.in_flight())
    out["kind"] = std::string{to_string(queue_.in_flight()->plan.kind)};
  return out;
}

} // namespace vigil::control
