#include "actors/control/node/node_remediation.hpp"

#include <algorithm>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/control/ingest/ingest_actor.hpp"
#include "actors/control/remediation/remediation_resource.hpp"
#include "actors/control/rules/circuit_breaker.hpp"
#include "actors/gateway/kube_gateway_messages.hpp"
#include "actors/journal/journal_messages.hpp"
#include "messages/control_messages.hpp"
#include "runtime/logging.hpp"

namespace vigil::node_remediation_steps {

namespace {

using control::remediation_kind;
using control::remediation_plan;
using control::remediation_request;
using nlohmann::json;

/// Node labels that tell the reset planner what the node's GPUs are (seed 001
/// "Scope of Support"). The product label is GPU feature discovery's; the
/// other two are set by whoever provisions such nodes.
constexpr const char* product_label = "nvidia.com/gpu.product";
constexpr const char* nvswitch_label = "vigil.dev/nvswitch-fabric";
constexpr const char* vgpu_guest_label = "vigil.dev/mig-vgpu-guest";
/// REPLACE_VM handed to the provider: the time it was asked for.
constexpr const char* replace_requested_annotation = "vigil.dev/replace-requested";

std::shared_ptr<spdlog::logger> logger() {
  return component_logger("remediation");
}

const remediation_settings& settings(const node_state& st) {
  return st.settings->remediation;
}

// Global dry run, or this stage's (issue #7 item 8), or the drain's: pods a
// dry-run drain left running must not lose their GPU to a reset or reboot.
bool dry_run(const node_state& st) {
  return st.settings->dry_run || st.settings->remediation.dry_run
         || st.settings->drain->dry_run;
}

caf::timespan until(const node_state& st, wall_time at) {
  return std::max(caf::timespan{0}, caf::timespan{at - st.time->wall_now()});
}

control::node_gpu_facts facts_of(const node_state& st) {
  control::node_gpu_facts facts;
  if (!st.node)
    return facts;
  const auto& labels = st.node->observation.labels;
  auto label = [&](const char* key) {
    auto it = labels.find(key);
    return it == labels.end() ? std::string{} : it->second;
  };
  facts.product_name = label(product_label);
  facts.nvswitch_fabric = label(nvswitch_label) == "true";
  facts.mig_vgpu_guest = label(vgpu_guest_label) == "true";
  return facts;
}

// Some active record still names the GPU.
bool names_gpu(const node_state& st, const std::string& uuid) {
  for (const auto& record : st.active.records())
    if (control::gpu_uuid_of(record) == uuid)
      return true;
  return false;
}

// The journal row of one remediation step. The key makes a step repeated on
// the same request (a retry, a replay) a duplicate, never a second row.
journal_record step_row(const node_state& st, const std::string& phase,
                        const remediation_request& request, json details) {
  details["phase"] = phase;
  details["group"] = request.plan.group;
  details["kind"] = std::string{control::to_string(request.plan.kind)};
  details["action"] = std::string{to_string(request.plan.action)};
  details["gpuUUID"] = request.plan.gpu_uuid;
  details["eventId"] = request.event_id;
  details["reason"] = request.plan.reason;
  details["dryRun"] = dry_run(st);
  journal_record row;
  row.recorded_at = st.time->wall_now();
  row.node = st.node_name;
  row.kind = control::remediation_row;
  // "created" once per CR (its name is fixed by group and event): a replay
  // counts each attempt once. The other steps may recur (a retried start).
  row.idempotency_key = st.node_name + "/remediation/" + request.plan.group + "/"
                        + request.event_id + "/" + phase;
  if (phase != "created")
    row.idempotency_key +=
      "/" + std::to_string(row.recorded_at.time_since_epoch().count());
  row.body = details.dump();
  return row;
}

// A step that only records (its effect, if any, is already done or not one
// the journal must precede): logged if the journal cannot take it.
void journal_step(node_actor* self, const std::string& phase,
                  const remediation_request& request, json details = json::object()) {
  self
    ->request(self->state.journal, caf::infinite, append_atom::value,
              step_row(self->state, phase, request, std::move(details)))
    .then([](const append_outcome&) {},
          [=](const caf::error& err) {
            logger()->warn("node {}: remediation step {} not journaled: {}",
                           self->state.node_name, phase, caf::to_string(err));
          });
}

void journal_escalation(node_actor* self, const remediation_request& request,
                        const std::vector<control::escalation_record>& records) {
  for (const auto& r : records) {
    if (r.event == control::escalation_event::admitted
        || r.event == control::escalation_event::attempt_recorded)
      continue;
    if (r.event == control::escalation_event::escalated) {
      ++self->state.settings->counters->escalations;
      logger()->warn("node {}: {} escalated to {}: {}", self->state.node_name,
                     to_string(r.from), to_string(r.to), r.reason);
    }
    json details = {{"escalation", std::string{control::to_string(r.event)}},
                    {"from", std::string{to_string(r.from)}},
                    {"to", std::string{to_string(r.to)}},
                    {"target", r.target},
                    {"attemptsInWindow", r.attempts_in_window},
                    {"why", r.reason}};
    if (r.not_before)
      details["notBefore"] = format_rfc3339(*r.not_before);
    journal_step(self, std::string{control::to_string(r.event)}, request,
                 std::move(details));
  }
}

void post_event(node_actor* self, const std::string& reason, const std::string& message,
                bool warning) {
  if (!dry_run(self->state))
    post_node_event(self, reason, message, warning);
}

void write_annotation(node_actor* self) {
  auto& st = self->state;
  if (dry_run(st))
    return;
  self
    ->request(
      st.gateway, caf::infinite,
      control::remediation_annotation_request(st.node_name, st.remediation.annotation))
    .then([=](const kube::kube_result& result) {
      if (!result.ok())
        logger()->warn("node {}: {} not written: {}", self->state.node_name,
                       control::remediation_state_annotation, result.error().to_string());
    });
}

void start(node_actor* self);
void submit(node_actor* self, remediation_request request);

void arm_poll(node_actor* self) {
  auto& r = self->state.remediation;
  if (r.poll_armed)
    return;
  r.poll_armed = true;
  self->delayed_send(self, settings(self->state).poll, rpoll_atom::value);
}

void arm_verify(node_actor* self) {
  auto& st = self->state;
  auto& r = st.remediation;
  if (r.verify_armed)
    return;
  if (auto at = r.escalation.next_deadline()) {
    r.verify_armed = true;
    self->delayed_send(self, until(st, *at), rverify_atom::value);
  }
}

// The breaker no longer counts this node's remediation against its pool.
void leave_pool(node_actor* self) {
  auto& r = self->state.remediation;
  if (!r.admitted)
    return;
  r.admitted = false;
  self->send(self->state.breaker, remedied_atom::value, self->state.node_name);
}

// The request in flight is over: the next waiting one starts.
void next(node_actor* self, const std::string& group) {
  auto& r = self->state.remediation;
  r.cr_name.clear();
  leave_pool(self);
  if (r.queue.finish(group))
    start(self);
}

// issue #8 item 3: the ladder's next rung for a failed or unverified
// remediation, planned and submitted like a new request.
void escalate(node_actor* self, const remediation_request& failed,
              const control::escalation_decision& decision) {
  journal_escalation(self, failed, decision.records);
  if (decision.action == failed.plan.action || self->state.active.empty())
    return;
  remediation_request request;
  request.plan =
    control::plan_remediation(decision.action, failed.plan.gpu_uuid,
                              facts_of(self->state), settings(self->state).options);
  request.event_id = failed.event_id;
  request.requested_at = self->state.time->wall_now();
  submit(self, std::move(request));
}

// A reboot that succeeded reset everything on the node: its boot ID changed
// and it is Ready (the janitor checked both). Every active event is cleared
// by a healthy event of the same agent and check, journaled first like any
// other event, so a replay reaches the same state.
void clear_after_reboot(node_actor* self, const std::string& cr) {
  auto& st = self->state;
  for (const auto& record : st.active.records()) {
    health_event healthy;
    healthy.agent = record.agent;
    healthy.component_class = record.component_class;
    healthy.check_name = record.check_name;
    healthy.is_healthy = true;
    healthy.entities = {record.subject};
    healthy.node_name = st.node_name;
    healthy.generated = st.time->wall_now();
    healthy.message = "cleared by RebootNode " + cr
                      + ": the node rebooted (boot ID changed) "
                        "and is Ready";
    healthy.id = cr + "/" + record.agent + "/" + record.check_name + "/"
                 + record.subject.type + "/" + record.subject.value;
    self
      ->request(st.journal, caf::infinite, append_atom::value,
                event_row(healthy, st.time->wall_now()))
      .then(
        [=](const append_outcome&) {
          self->send(self, route_atom::value, healthy, std::int64_t{0});
        },
        [=](const caf::error& err) {
          logger()->error("node {}: healthy event after reboot {} not journaled ({}); "
                          "the node stays quarantined",
                          self->state.node_name, cr, caf::to_string(err));
        });
  }
}

void on_finished(node_actor* self, const control::cr_progress& progress) {
  auto& st = self->state;
  auto& r = st.remediation;
  if (!r.queue.in_flight())
    return;
  auto request = *r.queue.in_flight();
  auto cr = r.cr_name;
  journal_step(self, progress.succeeded ? "succeeded" : "failed", request,
               {{"cr", cr},
                {"crPhase", progress.phase},
                {"failureReason", progress.failure_reason},
                {"message", progress.message}});
  const auto kind = std::string{control::to_string(request.plan.kind)};
  if (progress.succeeded) {
    ++st.stats.remediations_succeeded;
    ++st.settings->counters->remediations_succeeded;
    logger()->info("node {}: {} {} succeeded", st.node_name, kind, cr);
    post_event(self, "RemediationSucceeded", kind + " " + cr + " succeeded", false);
    const auto target =
      control::escalation_target(request.plan.action, request.plan.gpu_uuid);
    if (r.healthy_early.erase(target) > 0)
      journal_step(self, "verified", request, {{"target", target}, {"cr", cr}});
    else
      r.escalation.expect_healthy(request.plan.action, request.plan.gpu_uuid,
                                  st.time->wall_now());
    if (request.plan.kind == remediation_kind::reboot_node)
      clear_after_reboot(self, cr);
    arm_verify(self);
    return next(self, request.plan.group);
  }
  ++st.stats.remediations_failed;
  ++st.settings->counters->remediations_failed;
  auto why = kind + " " + cr + " failed"
             + (progress.failure_reason.empty() ? "" : ": " + progress.failure_reason);
  logger()->warn("node {}: {}", st.node_name, why);
  post_event(self, "RemediationFailed", why, true);
  auto decision = r.escalation.attempt_failed(request.plan.action, request.plan.gpu_uuid,
                                              why, st.time->wall_now());
  next(self, request.plan.group);
  escalate(self, request, decision);
}

void poll(node_actor* self) {
  auto& st = self->state;
  auto& r = st.remediation;
  if (!r.queue.in_flight() || r.cr_name.empty())
    return;
  auto kind = r.queue.in_flight()->plan.kind;
  auto cr = r.cr_name;
  self->request(st.gateway, caf::infinite, control::get_cr_request(kind, cr))
    .then([=](const kube::kube_result& result) {
      auto& r = self->state.remediation;
      if (r.cr_name != cr) // finished meanwhile (a release)
        return;
      if (!result.ok()) {
        if (result.error().not_found()) {
          // Someone deleted it: the remediation did not happen.
          return on_finished(self, {"Deleted", true, false, "deleted",
                                    "the CR was deleted before it finished"});
        }
        logger()->warn("node {}: reading {} failed: {}", self->state.node_name, cr,
                       result.error().to_string());
        return arm_poll(self);
      }
      auto progress = control::read_cr_progress(result.response().body);
      if (!progress) {
        logger()->error("node {}: unreadable {}: {}", self->state.node_name, cr,
                        progress.error().to_string());
        return arm_poll(self);
      }
      if (progress->terminal)
        return on_finished(self, *progress);
      if (self->state.time->wall_now() >= r.cr_deadline)
        return on_finished(self, {progress->phase, true, false, "timeout",
                                  "not finished within remediation.cr_timeout_seconds"});
      arm_poll(self);
    });
}

// The CR exists: created now (`fresh`), or found under its name, created
// before a restart (its attempt is already counted, replayed from the journal).
void created(node_actor* self, const remediation_request& request, const std::string& cr,
             bool fresh) {
  auto& st = self->state;
  auto& r = st.remediation;
  r.starting = false;
  r.cr_name = cr;
  auto now = st.time->wall_now();
  r.cr_deadline = now + settings(st).cr_timeout;
  if (fresh) {
    ++st.stats.remediations_started;
    ++st.settings->counters->remediations_started;
    // Counted now; verified once the CR has succeeded (on_finished).
    r.escalation.remember_attempt(request.plan.action, request.plan.gpu_uuid, now);
  }
  control::remember(r.annotation, request.plan.group, {request.plan.kind, cr, now});
  write_annotation(self);
  const auto kind = std::string{control::to_string(request.plan.kind)};
  logger()->info("node {}: {} {} created for {} ({})", st.node_name, kind, cr,
                 request.plan.group, request.plan.reason);
  post_event(self, "RemediationStarted",
             kind + " " + cr + " created for " + request.plan.group, false);
  arm_poll(self);
}

// REPLACE_VM with remediation.replace_with: ProviderHook: no CR; the node is
// annotated for the provider's own automation (which watches for it), and the
// replacement is expected within verify_replace_seconds, else CONTACT_SUPPORT.
void hand_to_provider(node_actor* self, const remediation_request& request) {
  auto& st = self->state;
  auto now = st.time->wall_now();
  journal_step(self, "handed_to_provider", request,
               {{"annotation", std::string{replace_requested_annotation}}});
  if (!dry_run(st)) {
    st.remediation.escalation.remember_attempt(request.plan.action, request.plan.gpu_uuid,
                                               now);
    st.remediation.escalation.expect_healthy(request.plan.action, request.plan.gpu_uuid,
                                             now);
    arm_verify(self);
    ++st.stats.remediations_started;
    ++st.settings->counters->remediations_started;
    logger()->warn("node {}: replacement handed to the provider ({} annotated)",
                   st.node_name, replace_requested_annotation);
    json patch = {
      {"metadata",
       {{"annotations",
         {{std::string{replace_requested_annotation}, format_rfc3339(now)}}}}}};
    auto write = kube::make_request(
      "PATCH", kube::resource_path({"", "v1", "nodes", false}, {}, st.node_name),
      patch.dump());
    write.content_type = kube::content_type::merge_patch;
    self->request(st.gateway, caf::infinite, std::move(write))
      .then([=](const kube::kube_result& result) {
        if (!result.ok())
          logger()->warn("node {}: {} not written: {}", self->state.node_name,
                         replace_requested_annotation, result.error().to_string());
      });
    post_event(self, "ReplaceRequested",
               "REPLACE_VM for event " + request.event_id
                 + ": handed to the provider's automation",
               true);
  }
  st.remediation.starting = false;
  next(self, request.plan.group);
}

void post_cr(node_actor* self, const remediation_request& request, const std::string& cr);

void create(node_actor* self, const remediation_request& request) {
  auto& st = self->state;
  if (request.plan.kind == remediation_kind::provider_hook)
    return hand_to_provider(self, request);
  auto cr = control::maintenance_cr_name(st.node_name, request.plan, request.event_id);
  // Journal first (ARCHITECTURE.md §2): the CR is asked for only once its
  // "created" row is stored, so a replay never misses an attempt.
  self
    ->request(st.journal, caf::infinite, append_atom::value,
              step_row(st, "created", request, {{"cr", cr}}))
    .then(
      [=, generation = st.remediation.generation](const append_outcome&) {
        if (self->state.remediation.generation == generation)
          post_cr(self, request, cr);
      },
      [=, generation = st.remediation.generation](const caf::error& err) {
        auto& r = self->state.remediation;
        if (r.generation != generation)
          return;
        logger()->warn("node {}: {} not journaled ({}); retrying", self->state.node_name,
                       cr, caf::to_string(err));
        r.starting = false;
        r.start_armed = true;
        self->delayed_send(self, self->state.settings->retry_max, rstart_atom::value);
      });
}

void post_cr(node_actor* self, const remediation_request& request,
             const std::string& cr) {
  auto& st = self->state;
  if (dry_run(st)) {
    logger()->info("node {}: would create {} {} (dry run)", st.node_name,
                   control::to_string(request.plan.kind), cr);
    st.remediation.starting = false;
    return next(self, request.plan.group);
  }
  auto body =
    control::maintenance_cr_body(cr, st.node_name, request.plan, request.event_id);
  self
    ->request(st.gateway, caf::infinite,
              control::create_cr_request(request.plan.kind, body))
    .then([=, generation = st.remediation.generation](const kube::kube_result& result) {
      auto& st = self->state;
      auto& r = st.remediation;
      if (r.generation != generation)
        return; // released meanwhile; the CR (if any) runs its course
      if (result.ok() || result.error().conflict())
        return created(self, request, cr, true);
      const auto& err = result.error();
      if (!err.retryable()) {
        // Refused for good (403 RBAC, 422 invalid, 404 no CRD): a failed attempt.
        r.starting = false;
        r.cr_name = cr;
        return on_finished(self, {"Rejected", true, false, "rejected", err.to_string()});
      }
      logger()->warn("node {}: creating {} failed ({}); retrying", st.node_name, cr,
                     err.to_string());
      r.starting = false;
      r.start_armed = true;
      self->delayed_send(self, st.settings->retry_max, rstart_atom::value);
    });
}

// Starts the request in flight: the escalation ladder first (caps, cooldown,
// backoff), then the breaker, then the CR.
void admit_and_create(node_actor* self);

// A CR under the request's name already exists (created before a restart):
// follow it instead of asking again. Then the ladder, the breaker, the CR.
void start(node_actor* self) {
  auto& st = self->state;
  auto& r = st.remediation;
  if (!r.queue.in_flight() || r.starting || !r.cr_name.empty())
    return;
  auto request = *r.queue.in_flight();
  if (request.plan.kind == remediation_kind::provider_hook || dry_run(st))
    return admit_and_create(self);
  r.starting = true;
  auto cr = control::maintenance_cr_name(st.node_name, request.plan, request.event_id);
  self->request(st.gateway, caf::infinite, control::get_cr_request(request.plan.kind, cr))
    .then([=, generation = r.generation](const kube::kube_result& result) {
      auto& r = self->state.remediation;
      if (r.generation != generation)
        return;
      r.starting = false;
      if (result.ok()) {
        logger()->info("node {}: following {}, created before a restart",
                       self->state.node_name, cr);
        return created(self, request, cr, false);
      }
      if (result.error().not_found())
        return admit_and_create(self);
      r.start_armed = true;
      self->delayed_send(self, self->state.settings->retry_max, rstart_atom::value);
    });
}

void admit_and_create(node_actor* self) {
  auto& st = self->state;
  auto& r = st.remediation;
  auto request = *r.queue.in_flight();
  auto now = st.time->wall_now();
  auto decision = r.escalation.admit(request.plan.action, request.plan.gpu_uuid, now);
  journal_escalation(self, request, decision.records);
  // A climb takes effect at once, even when its rung must wait out a
  // cooldown: the queue holds the escalated request, so the deferred start
  // admits that one and does not climb (nor journal and count the climb)
  // again.
  if (decision.action != request.plan.action) {
    auto plan = control::plan_remediation(decision.action, request.plan.gpu_uuid,
                                          facts_of(st), settings(st).options);
    if (strength(plan.kind) == 0) {
      // The ladder ends with a person: CONTACT_SUPPORT.
      ++st.settings->counters->remediations_manual;
      journal_step(self, "manual", {plan, request.event_id, now});
      post_event(self, "RemediationNeedsOperator",
                 request.plan.group + " escalated to " + plan.reason
                   + ": no automatic action; the node stays quarantined",
                 true);
      return next(self, request.plan.group);
    }
    for (const auto& dropped : r.queue.escalate_in_flight(plan))
      journal_step(self, "covered", dropped, {{"coveredBy", plan.group}});
    request = *r.queue.in_flight();
  }
  if (decision.not_before) {
    if (!r.start_armed) {
      r.start_armed = true;
      self->delayed_send(self, until(st, *decision.not_before), rstart_atom::value);
    }
    return;
  }
  r.starting = true;
  // issue #7 item 4: none while the breaker is tripped, and at most the pool's
  // budget in flight at once.
  std::string pool;
  if (st.node)
    pool = control::pool_of(st.node->observation.labels, settings(st).pool_label);
  self->request(st.breaker, caf::infinite, remedy_atom::value, st.node_name, pool)
    .then(
      [=, generation = r.generation](const std::string& refusal) {
        auto& st = self->state;
        auto& r = st.remediation;
        if (r.generation != generation) { // released meanwhile
          if (refusal.empty() && !r.admitted)
            self->send(st.breaker, remedied_atom::value, st.node_name);
          return;
        }
        if (!refusal.empty()) {
          logger()->warn("node {}: remediation {} held: {}", st.node_name,
                         request.plan.group, refusal);
          journal_step(self, "held", request, {{"why", refusal}});
          r.starting = false;
          r.start_armed = true;
          self->delayed_send(self, st.settings->retry_max, rstart_atom::value);
          return;
        }
        r.admitted = true;
        create(self, request);
      },
      [=, generation = r.generation](const caf::error& err) {
        auto& r = self->state.remediation;
        if (r.generation != generation)
          return;
        r.starting = false;
        r.start_armed = true;
        logger()->warn("node {}: the breaker did not answer ({})", self->state.node_name,
                       caf::to_string(err));
        self->delayed_send(self, self->state.settings->retry_max, rstart_atom::value);
      });
}

// seed 000 §4.3 through the queue: start, queue behind, or skip as redundant.
void submit(node_actor* self, remediation_request request) {
  auto& st = self->state;
  auto& r = st.remediation;
  if (request.plan.kind == remediation_kind::none)
    return;
  if (request.plan.kind == remediation_kind::manual) {
    ++st.settings->counters->remediations_manual;
    journal_step(self, "manual", request);
    logger()->warn("node {}: {} asks for an operator; the node stays quarantined",
                   st.node_name, request.plan.reason);
    post_event(self, "RemediationNeedsOperator",
               request.plan.reason + " for event " + request.event_id
                 + ": no automatic action; the node stays quarantined",
               true);
    return;
  }
  auto decision = r.queue.submit(request);
  json details = {{"verdict", std::string{control::to_string(decision.verdict)}},
                  {"coveringGroup", decision.covering_group},
                  {"why", decision.reason}};
  if (request.plan.fell_back)
    details["fellBack"] = true;
  journal_step(self, "requested", request, std::move(details));
  for (const auto& dropped : decision.superseded)
    journal_step(self, "covered", dropped, {{"coveredBy", request.plan.group}});
  switch (decision.verdict) {
    case control::queue_verdict::start_now: return start(self);
    case control::queue_verdict::skipped_same:
    case control::queue_verdict::skipped_covered: {
      ++st.settings->counters->remediations_skipped;
      // seed 000 §4.3 case 4: the covered group is recorded with the CR
      // that covers it.
      if (const auto* by = control::find_group(r.annotation, decision.covering_group)) {
        control::remember(r.annotation, request.plan.group, *by);
        write_annotation(self);
      }
      logger()->info("node {}: remediation {} skipped: {}", st.node_name,
                     request.plan.group, decision.reason);
      return;
    }
    default: return;
  }
}

// seed 000 §4 "after draining": the node is quarantined (cordoned; in dry run
// it would be), not opted out, no drain runs, and what its events want
// drained has been drained (fully or partially).
bool ready(const node_state& st) {
  if (!st.node || st.active.empty() || st.drain || st.drain_permit_pending)
    return false;
  const auto& observed = st.node->observation;
  if (!observed.unschedulable && !dry_run(st))
    return false;
  auto opt_out = observed.labels.find(st.settings->quarantine.opt_out_label);
  if (opt_out != observed.labels.end() && opt_out->second == "true")
    return false;
  auto wanted = control::desired_drain(st.active.records());
  return !wanted || st.drain_history == control::drain_history::full_done
         || control::drain_key(*wanted) == st.drained_key;
}

// seed 000 §4.2: the release ends the node's remediations and removes the
// annotation. A CR in flight is not deleted: it runs its course.
void release(node_actor* self) {
  auto& st = self->state;
  auto& r = st.remediation;
  auto now = st.time->wall_now();
  if (auto in_flight = r.queue.in_flight())
    journal_step(self, "released", *in_flight, {{"cr", r.cr_name}});
  for (const auto& dropped : r.queue.clear())
    journal_step(self, "released", dropped);
  // The release is the verification of whatever was pending.
  for (const auto& v : r.escalation.verify_all(now)) {
    remediation_request verified;
    verified.plan =
      control::plan_remediation(v.to, v.gpu_uuid, facts_of(st), settings(st).options);
    verified.event_id = "release";
    journal_step(self, "verified", verified, {{"target", v.target}});
  }
  r.cr_name.clear();
  r.handled.clear();
  r.healthy_early.clear();
  r.starting = false;
  ++r.generation;
  // Always: a node actor restarted after a crash may hold a slot it does not
  // know of (the breaker counts a node once).
  r.admitted = false;
  self->send(st.breaker, remedied_atom::value, st.node_name);
  if (!r.annotation.groups.empty()) {
    r.annotation = {};
    write_annotation(self);
  }
}

} // namespace

void consider(node_actor* self) {
  auto& st = self->state;
  auto& r = st.remediation;
  if (!settings(st).enabled)
    return;
  if (st.active.empty()) {
    if (!r.queue.idle() || !r.handled.empty() || !r.annotation.groups.empty())
      release(self);
    return;
  }
  if (!ready(st))
    return;
  const auto facts = facts_of(st);
  for (const auto& record : st.active.records()) {
    if (!r.handled.insert(record.event_id).second)
      continue;
    remediation_request request;
    request.plan = control::plan_remediation(record.action, control::gpu_uuid_of(record),
                                             facts, settings(st).options);
    request.event_id = record.event_id;
    request.requested_at = st.time->wall_now();
    submit(self, std::move(request));
  }
}

void on_start_timer(node_actor* self) {
  self->state.remediation.start_armed = false;
  start(self);
}

void on_poll_timer(node_actor* self) {
  self->state.remediation.poll_armed = false;
  poll(self);
}

void on_verify_timer(node_actor* self) {
  auto& st = self->state;
  auto& r = st.remediation;
  r.verify_armed = false;
  for (const auto& decision : r.escalation.expire(st.time->wall_now())) {
    if (decision.records.empty())
      continue;
    const auto& first = decision.records.front();
    if (!first.gpu_uuid.empty() && !names_gpu(st, first.gpu_uuid)) {
      // Nothing active names the GPU any more: its healthy event did come.
      continue;
    }
    remediation_request timed_out;
    timed_out.plan = control::plan_remediation(first.from, first.gpu_uuid, facts_of(st),
                                               settings(st).options);
    // Unique per timeout: its CRs must never be mistaken for an earlier one's.
    timed_out.event_id =
      "verification/" + first.target + "/" + format_rfc3339(st.time->wall_now());
    logger()->warn("node {}: no healthy event for {} in time: {}", st.node_name,
                   first.target, first.reason);
    escalate(self, timed_out, decision);
  }
  arm_verify(self);
}

void on_healthy_event(node_actor* self, const health_event& event) {
  auto& st = self->state;
  auto& r = st.remediation;
  auto now = st.time->wall_now();
  for (const auto& e : event.entities) {
    if (e.type != "GPU_UUID")
      continue;
    auto target = control::reset_group(e.value);
    if (r.queue.in_flight() && r.queue.in_flight()->plan.group == target)
      r.healthy_early.insert(target); // before the CR's success was seen
    if (auto v = st.remediation.escalation.verified(target, now)) {
      logger()->info("node {}: reset of {} verified by event {}", st.node_name, e.value,
                     event.id);
      remediation_request verified;
      verified.plan.kind = remediation_kind::gpu_reset;
      verified.plan.action = recommended_action::component_reset;
      verified.plan.group = target;
      verified.plan.gpu_uuid = e.value;
      verified.event_id = event.id;
      journal_step(self, "verified", verified, {{"target", target}});
    }
  }
}

nlohmann::json summary(const node_state& st) {
  const auto& r = st.remediation;
  json waiting = json::array();
  for (const auto& w : r.queue.waiting())
    waiting.push_back(w.plan.group);
  json out = {{"inFlight", r.queue.in_flight() ? r.queue.in_flight()->plan.group : ""},
              {"cr", r.cr_name},
              {"waiting", waiting},
              {"started", st.stats.remediations_started},
              {"succeeded", st.stats.remediations_succeeded},
              {"failed", st.stats.remediations_failed},
              {"annotation", control::encode_remediation_state(r.annotation)}};
  if (r.queue.in_flight())
    out["kind"] = std::string{control::to_string(r.queue.in_flight()->plan.kind)};
  return out;
}

} // namespace vigil::node_remediation_steps
