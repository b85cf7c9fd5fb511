// remediation_machine, creating and following the maintenance CR (seed 000
// §4, seed 001): the "created" row journaled before the CR is asked for, a CR
// created before a restart found and followed, REPLACE_VM handed to the
// provider, the CR polled until it is done or times out, and its outcome.
#include <utility>

#include "actors/control/remediation/remediation_machine.hpp"
#include "actors/control/remediation/remediation_machine_internal.hpp"

namespace vigil::control {

namespace cmd = remediation_command;

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
    // It runs whatever the budget says now: it counts against the pool, and
    // gives its slot back when it is over.
    admitted_ = true;
    c.out.push_back(cmd::occupy_slot{});
  }
  return std::move(c.out);
}

remediation_commands remediation_machine::on_cr_absent(std::uint64_t generation,
                                                       const remediation_view& view,
                                                       wall_time now) {
  context c{&view, now, {}};
  if (generation != generation_ || step_ != remediation_step::finding)
    return std::move(c.out);
  if (view.records.empty()) {
    // The fault cleared while it looked, and no CR runs: the node returns.
    release(c);
    c.out.push_back(cmd::hold_ended{});
    return std::move(c.out);
  }
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
    const auto repair_began = progress.started_at.value_or(cr_created_);
    if (request.plan.kind == remediation_kind::reboot_node) {
      // The boot ID changed and the node is Ready (the janitor checked both):
      // what was reported up to the moment the reboot began is gone with the
      // old boot; a fault reported after it belongs to the new one and stays.
      std::vector<active_record> predating;
      for (const auto& record : c.node().records)
        if (!record.generated || *record.generated <= repair_began)
          predating.push_back(record);
      repaired_ = repair_mark{repair_began, ""};
      if (!predating.empty())
        c.out.push_back(cmd::clear_records{cr, std::move(predating)});
    } else if (request.plan.kind == remediation_kind::gpu_reset) {
      // The GPU's healthy event clears what predates the reset; a fault of
      // the GPU reported since is its next one.
      repaired_ = repair_mark{repair_began, request.plan.gpu_uuid};
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
  auto decision = escalation_.attempt_failed(request.plan.action, request.plan.gpu_uuid,
                                             why, c.now, progress.failure_reason);
  next(c, request.plan.group);
  escalate(c, request, decision);
}

} // namespace vigil::control
