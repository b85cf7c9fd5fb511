// remediation_machine after a CR: proof of recovery by a validation Job
// (seed 003 "Verification and Rollback"), verification by the healthy event
// that follows a fix, and the escalation ladder (seed 000 §4) for a failed or
// unverified remediation.
#include <utility>

#include "actors/control/remediation/remediation_machine.hpp"
#include "actors/control/remediation/remediation_machine_internal.hpp"
#include "actors/janitor/gpu_reset_plan.hpp"

namespace vigil::control {

namespace cmd = remediation_command;
using nlohmann::json;

std::string validation_job_name(std::string_view cr) {
  return janitor::job_name_for("vigil-validate-", cr);
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

// After a restart or a shard's handover the journal says the CR succeeded
// and its validation began, with no verdict: the same Job (its name comes
// from the CR's) is asked for again, which finds the one running, and
// followed with a full timeout; the CR keeps its slot meanwhile. The GPU
// count from before the CR is not known here: a Job created now (the
// predecessor died before creating it) does not check it.
void remediation_machine::resume_validation(context& c, const std::string& cr) {
  cr_name_ = cr;
  step_ = remediation_step::validating;
  validation_job_ = validation_job_name(cr_name_);
  validation_deadline_ = c.now + config_.validation.timeout;
  admitted_ = true;
  c.out.push_back(cmd::occupy_slot{});
  c.out.push_back(cmd::log{"following the validation " + validation_job_ + " of " + cr
                           + ", begun before a restart"});
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
  c.out.push_back(cmd::journal_step{
    "validated", request, {{"job", validation_job_}, {"cr", cr_name_}}});
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
  c.out.push_back(
    cmd::journal_step{"validation_failed",
                      request,
                      {{"job", validation_job_}, {"cr", cr_name_}, {"why", why}}});
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

// seed 000 §4 escalation ladder: the next rung for a failed or unverified
// remediation, planned and submitted like a new request.
void remediation_machine::escalate(context& c, const remediation_request& failed,
                                   const escalation_decision& decision) {
  journal_escalation(c, failed, decision.records);
  if (decision.action == failed.plan.action || c.node().records.empty())
    return;
  remediation_request request;
  request.plan = plan(c, decision.action, failed.plan.gpu_uuid);
  request.plan.collect_bug_report = failed.plan.kind == remediation_kind::gpu_reset
                                    && request.plan.kind == remediation_kind::reboot_node;
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

} // namespace vigil::control
