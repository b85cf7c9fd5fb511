#include "actors/janitor/janitor_actor.hpp"

#include <algorithm>
#include <map>
#include <set>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/gateway/kube_gateway_messages.hpp"
#include "actors/protocol/control_messages.hpp"
#include "messages/json_path.hpp"
#include "runtime/logging.hpp"

namespace vigil {

namespace {

using nlohmann::json;

const kube::api_resource nodes{"", "v1", "nodes", false};
const kube::api_resource pods{"", "v1", "pods", true};
const kube::api_resource jobs{"batch", "v1", "jobs", true};
const kube::api_resource gpu_resets{"vigil.dev", "v1alpha1", "gpuresets", false};
const kube::api_resource reboot_nodes{"vigil.dev", "v1alpha1", "rebootnodes", false};

std::shared_ptr<spdlog::logger> logger() {
  return component_logger("janitor");
}

using janitor::text_at;

std::string phase_of(const json& cr) {
  auto phase = text_at(cr, {"status", "phase"});
  return phase.empty() ? "Pending" : phase;
}

bool terminal(const std::string& phase) {
  return phase == "Succeeded" || phase == "Failed";
}

void work_on(janitor_actor* self, janitor_lane_ptr lane);

// The lane's current CR is done for this pass: on to the node's next.
void advance(janitor_actor* self, janitor_lane_ptr lane) {
  ++lane->next;
  work_on(self, std::move(lane));
}

template <class Then>
void send(janitor_actor* self, kube::kube_request request, Then then) {
  self->request(self->state.gateway, caf::infinite, std::move(request))
    .then([=](const kube::kube_result& result) mutable { then(result); });
}

// PATCH status (merge) through the status subresource; `then(result)`.
template <class Then>
void patch_status(janitor_actor* self, const kube::api_resource& resource,
                  const std::string& name, json status, Then then) {
  auto request =
    kube::make_request("PATCH", kube::resource_path(resource, {}, name, "status"),
                       json{{"status", std::move(status)}}.dump());
  request.content_type = kube::content_type::merge_patch;
  send(self, std::move(request), [=](const kube::kube_result& result) mutable {
    if (!result.ok())
      logger()->warn("status of {} not written: {}", name, result.error().to_string());
    then(result);
  });
}

// PATCH status, then move on.
void write_status(janitor_actor* self, janitor_lane_ptr lane,
                  const kube::api_resource& resource, const std::string& name,
                  json status) {
  patch_status(self, resource, name, std::move(status),
               [=](const kube::kube_result&) { advance(self, lane); });
}

// ---- GPUReset (seed 001 "Reset Workflow") ----

struct reset_pass {
  janitor_lane_ptr lane; ///< the node's lane this CR is worked on in
  janitor::gpu_reset_object cr;
  janitor::reset_observation observed;
  janitor::reset_step step;
  std::string latest; ///< the CR as the server last returned it; "" before any write
  bool rerun = false; ///< already taken a step further at once in this pass
};
using reset_pass_ptr = std::shared_ptr<reset_pass>;

void take_up_reset(janitor_actor* self, janitor_lane_ptr lane, const json& doc,
                   bool rerun);
void decide_reset(janitor_actor* self, reset_pass_ptr pass);

// The server's answer to a write of the CR: its new resourceVersion and
// finalizers for the next write, and what a rerun starts from.
void remember(reset_pass_ptr pass, const kube::kube_result& result) {
  auto cr = janitor::read_gpu_reset(json::parse(result.response().body, nullptr, false));
  if (!cr)
    return;
  pass->cr.resource_version = cr->resource_version;
  pass->cr.finalizers = cr->finalizers;
  pass->cr.request.has_finalizer = cr->request.has_finalizer;
  pass->latest = result.response().body;
}

gpu_reset_labels metric_labels(const reset_pass& pass) {
  return {pass.cr.request.node_name, pass.step.status.gpu_type, pass.cr.request.gpu_uuid};
}

void observe_job(janitor_actor* self, reset_pass_ptr pass) {
  const auto& ns = self->state.settings.gpu_reset.job_namespace;
  const auto& job = pass->cr.status.job_name;
  if (job.empty())
    return decide_reset(self, pass);
  send(self, kube::make_request("GET", kube::resource_path(jobs, ns, job)),
       [=](const kube::kube_result& result) {
         if (!result.ok()) {
           if (!result.error().not_found()) {
             logger()->warn("GPUReset {}: reading Job {} failed: {}",
                            pass->cr.request.name, job, result.error().to_string());
             return advance(self, pass->lane);
           }
           return decide_reset(self, pass); // gone: the plan times it out
         }
         auto observed =
           janitor::read_job(json::parse(result.response().body, nullptr, false));
         pass->observed.job = observed;
         if (!observed.failed)
           return decide_reset(self, pass);
         // gpu-reset.sh's exit code says why: on the Job's pod.
         send(
           self,
           kube::make_request("GET", kube::resource_path(pods, ns), {},
                              "labelSelector=" + kube::query_escape("job-name=" + job)),
           [=](const kube::kube_result& listed) {
             if (listed.ok())
               pass->observed.job->exit_code = janitor::terminated_exit_code(
                 json::parse(listed.response().body, nullptr, false));
             decide_reset(self, pass);
           });
       });
}

void observe_reset(janitor_actor* self, reset_pass_ptr pass) {
  const auto& node = pass->cr.request.node_name;
  send(self, kube::make_request("GET", kube::resource_path(nodes, {}, node)),
       [=](const kube::kube_result& result) {
         if (!result.ok() && !result.error().not_found()) {
           logger()->warn("GPUReset {}: reading node {} failed: {}",
                          pass->cr.request.name, node, result.error().to_string());
           return advance(self, pass->lane);
         }
         pass->observed.node_exists = result.ok();
         if (result.ok())
           pass->observed.node_labels =
             janitor::read_labels(json::parse(result.response().body, nullptr, false));
         send(self,
              kube::make_request("GET", kube::resource_path(pods, ""), {},
                                 "fieldSelector="
                                   + kube::query_escape("spec.nodeName=" + node)),
              [=](const kube::kube_result& listed) {
                if (!listed.ok()) {
                  logger()->warn("GPUReset {}: listing pods failed: {}",
                                 pass->cr.request.name, listed.error().to_string());
                  return advance(self, pass->lane);
                }
                auto list = json::parse(listed.response().body, nullptr, false);
                pass->observed.operand_pods_on_node = janitor::count_operand_pods(list);
                pass->observed.running_operands = janitor::running_operands(list);
                pass->observed.reset_pods_on_node = janitor::count_job_pods(
                  list, self->state.settings.gpu_reset.job_namespace,
                  pass->cr.status.job_name);
                observe_job(self, pass);
              });
       });
}

// The step is done; `again`: once more at once, from the server's answer.
void reset_step_done(janitor_actor* self, reset_pass_ptr pass) {
  if (pass->step.again && !pass->rerun && !pass->latest.empty())
    return take_up_reset(self, pass->lane, json::parse(pass->latest, nullptr, false),
                         true);
  advance(self, pass->lane);
}

// PATCH the CR's finalizers (merge, with its resourceVersion); `then()` on success.
template <class Then>
void patch_finalizer(janitor_actor* self, reset_pass_ptr pass, bool present, Then then) {
  const auto& name = pass->cr.request.name;
  auto request = kube::make_request("PATCH", kube::resource_path(gpu_resets, {}, name),
                                    janitor::finalizer_patch_body(pass->cr, present));
  request.content_type = kube::content_type::merge_patch;
  send(self, std::move(request), [=](const kube::kube_result& result) mutable {
    if (!result.ok()) {
      if (present || !result.error().not_found())
        logger()->warn("GPUReset {}: {} the finalizer failed: {}", name,
                       present ? "adding" : "removing", result.error().to_string());
      return advance(self, pass->lane); // the next pass reads the CR again
    }
    remember(pass, result);
    then();
  });
}

void remove_reset_finalizer(janitor_actor* self, reset_pass_ptr pass) {
  if (!pass->step.remove_finalizer || !pass->cr.request.has_finalizer)
    return reset_step_done(self, pass);
  patch_finalizer(self, pass, false, [=] {
    if (pass->cr.request.deletion_requested)
      logger()->info("GPUReset {} deleted: operand labels restored, finalizer removed",
                     pass->cr.request.name);
    reset_step_done(self, pass);
  });
}

// Counted once the status that says so is written (a lost write repeats the step).
void count_and_log(janitor_actor* self, const reset_pass& pass) {
  auto& metrics = *self->state.settings.metrics;
  const auto& step = pass.step;
  const auto& name = pass.cr.request.name;
  if (pass.cr.status.phase == janitor::reset_phase::pending
      && step.status.phase != janitor::reset_phase::pending)
    metrics.reset_started(metric_labels(pass));
  if (step.finished) {
    bool ok = step.status.phase == janitor::reset_phase::succeeded;
    metrics.reset_finished(
      metric_labels(pass), ok, step.status.failure_reason,
      janitor::reset_duration_seconds(pass.cr.created, step.status).value_or(0.0));
    if (ok)
      logger()->info("GPUReset {}: GPU {} on node {} reset", name,
                     pass.cr.request.gpu_uuid, pass.cr.request.node_name);
    else
      logger()->warn("GPUReset {}: GPU {} on node {} not reset: {}", name,
                     pass.cr.request.gpu_uuid, pass.cr.request.node_name,
                     step.status.failure_reason);
  } else if (step.status.phase != pass.cr.status.phase) {
    logger()->info("GPUReset {}: {}", name, janitor::to_string(step.status.phase));
  }
}

void write_reset_status(janitor_actor* self, reset_pass_ptr pass) {
  if (!pass->step.status_changed)
    return remove_reset_finalizer(self, pass);
  patch_status(self, gpu_resets, pass->cr.request.name,
               janitor::status_json(pass->step.status),
               [=](const kube::kube_result& result) {
                 if (!result.ok())
                   return advance(self, pass->lane); // the next pass takes the step again
                 remember(pass, result);
                 count_and_log(self, *pass);
                 remove_reset_finalizer(self, pass);
               });
}

void create_reset_job(janitor_actor* self, reset_pass_ptr pass) {
  if (!pass->step.create_job)
    return write_reset_status(self, pass);
  const auto& ns = self->state.settings.gpu_reset.job_namespace;
  send(self,
       kube::make_request("POST", kube::resource_path(jobs, ns), *pass->step.create_job),
       [=](const kube::kube_result& result) {
         // 409: created by an earlier pass whose status write was lost.
         if (!result.ok() && !result.error().conflict()) {
           if (result.error().retryable()) {
             // A busy or failing API server is no verdict on the reset.
             logger()->warn("GPUReset {}: creating the reset Job failed, tried again "
                            "next pass: {}",
                            pass->cr.request.name, result.error().to_string());
             return advance(self, pass->lane);
           }
           logger()->warn("GPUReset {}: creating the reset Job failed: {}",
                          pass->cr.request.name, result.error().to_string());
           pass->step.status = janitor::job_create_failed(
             pass->step.status, result.error().to_string(), pass->observed.now);
           pass->step.status_changed = true;
         }
         write_reset_status(self, pass);
       });
}

void patch_reset_labels(janitor_actor* self, reset_pass_ptr pass) {
  if (pass->step.label_patch.empty())
    return create_reset_job(self, pass);
  auto request = kube::make_request(
    "PATCH", kube::resource_path(nodes, {}, pass->cr.request.node_name),
    janitor::label_patch_body(pass->step.label_patch));
  request.content_type = kube::content_type::merge_patch;
  send(self, std::move(request), [=](const kube::kube_result& result) {
    if (!result.ok()) {
      logger()->warn("GPUReset {}: patching the node's labels failed: {}",
                     pass->cr.request.name, result.error().to_string());
      return advance(self, pass->lane); // the next pass tries again
    }
    create_reset_job(self, pass);
  });
}

void delete_reset_job(janitor_actor* self, reset_pass_ptr pass) {
  if (!pass->step.delete_job)
    return patch_reset_labels(self, pass);
  const auto& ns = self->state.settings.gpu_reset.job_namespace;
  auto request =
    kube::make_request("DELETE", kube::resource_path(jobs, ns, pass->cr.status.job_name),
                       json{{"propagationPolicy", "Background"}}.dump());
  send(self, std::move(request),
       [=](const kube::kube_result&) { patch_reset_labels(self, pass); });
}

// The step's actions in the order reset_step lists them, each only after the
// one before succeeded: the finalizer is on before any label changes.
void decide_reset(janitor_actor* self, reset_pass_ptr pass) {
  pass->step = janitor::reconcile_gpu_reset(
    pass->cr.request, pass->cr.status, pass->observed, self->state.settings.gpu_reset);
  for (const auto& note : pass->step.notes)
    logger()->warn("GPUReset {}: {}", pass->cr.request.name, note);
  if (!pass->step.add_finalizer)
    return delete_reset_job(self, pass);
  patch_finalizer(self, pass, true, [=] { delete_reset_job(self, pass); });
}

void take_up_reset(janitor_actor* self, janitor_lane_ptr lane, const json& doc,
                   bool rerun) {
  auto cr = janitor::read_gpu_reset(doc);
  if (!cr) {
    logger()->error("unreadable GPUReset: {}", cr.error().to_string());
    return advance(self, lane);
  }
  auto pass = std::make_shared<reset_pass>();
  pass->lane = std::move(lane);
  pass->cr = std::move(*cr);
  pass->observed.now = self->state.time->wall_now();
  pass->rerun = rerun;
  observe_reset(self, pass);
}

// ---- RebootNode ----

// From the RebootNode's creation (its start where that is unknown) to `end`.
double reboot_seconds(const janitor::reboot_object& cr, wall_time end) {
  auto start =
    cr.created != wall_time{} ? cr.created : cr.status.started_at.value_or(end);
  return std::max(0.0, std::chrono::duration<double>(end - start).count());
}

// One step of a RebootNode, with its bug report Job as read now (nullopt
// when there is none to read, or it is gone).
void step_reboot_cr(janitor_actor* self, janitor_lane_ptr lane, janitor::reboot_object cr,
                    std::optional<janitor::job_observation> bug_report);

void reconcile_reboot_cr(janitor_actor* self, janitor_lane_ptr lane,
                         janitor::reboot_object cr) {
  const auto& b = cr.status.bug_report;
  if (b.job.empty() || !b.outcome.empty() || !cr.status.job_name.empty())
    return step_reboot_cr(self, std::move(lane), std::move(cr), std::nullopt);
  const auto& ns = self->state.settings.reboot.job_namespace;
  send(self, kube::make_request("GET", kube::resource_path(jobs, ns, b.job)),
       [=](const kube::kube_result& result) {
         std::optional<janitor::job_observation> job;
         if (result.ok())
           job = janitor::read_job(json::parse(result.response().body, nullptr, false));
         else if (!result.error().not_found())
           logger()->warn("RebootNode {}: reading its bug report Job failed: {}", cr.name,
                          result.error().to_string());
         step_reboot_cr(self, lane, cr, job);
       });
}

void step_reboot_cr(janitor_actor* self, janitor_lane_ptr lane, janitor::reboot_object cr,
                    std::optional<janitor::job_observation> bug_report) {
  send(self, kube::make_request("GET", kube::resource_path(nodes, {}, cr.node_name)),
       [=](const kube::kube_result& result) {
         auto& st = self->state;
         if (!result.ok() && !result.error().not_found()) {
           logger()->warn("RebootNode {}: reading node {} failed: {}", cr.name,
                          cr.node_name, result.error().to_string());
           return advance(self, lane);
         }
         std::optional<janitor::node_boot_observation> node;
         if (result.ok())
           node = janitor::read_boot(json::parse(result.response().body, nullptr, false));
         auto now = st.time->wall_now();
         auto step =
           janitor::reconcile_reboot(cr, node, now, st.settings.reboot, bug_report);
         auto& metrics = *st.settings.metrics;
         if (cr.status.phase == janitor::reboot_phase::pending
             && step.status.phase != janitor::reboot_phase::pending)
           metrics.reboot_started(cr.node_name);
         if (step.finished) {
           bool ok = step.status.phase == janitor::reboot_phase::succeeded;
           metrics.reboot_finished(cr.node_name, ok, step.status.failure_reason,
                                   reboot_seconds(cr, now));
           logger()->log(ok ? spdlog::level::info : spdlog::level::warn,
                         "RebootNode {}: node {} {}", cr.name, cr.node_name,
                         ok ? "rebooted (boot ID " + step.status.boot_id_before + " → "
                                + step.status.boot_id_after + ")"
                            : "not rebooted: " + step.status.message);
         }
         if (!step.create_job) {
           if (!step.status_changed)
             return advance(self, lane);
           return write_status(self, lane, reboot_nodes, cr.name,
                               janitor::reboot_status_json(step.status));
         }
         const bool bug_report_job = step.status.job_name.empty();
         send(self,
              kube::make_request(
                "POST", kube::resource_path(jobs, st.settings.reboot.job_namespace),
                *step.create_job),
              [=](const kube::kube_result& created) mutable {
                // Made now, or by an earlier pass whose answer was lost.
                const bool made = created.ok() || created.error().conflict();
                if (!bug_report_job && made)
                  logger()->info("RebootNode {}: rebooting node {} (boot ID {})", cr.name,
                                 cr.node_name, step.status.boot_id_before);
                if (bug_report_job && !made) {
                  // Evidence is worth a try, never a reboot withheld.
                  step.status.bug_report.outcome =
                    "failed: Job not created: " + created.error().to_string();
                  step.status.started_at = now;
                } else if (bug_report_job) {
                  logger()->info("RebootNode {}: collecting nvidia-bug-report.sh on node "
                                 "{} into {} before the reboot",
                                 cr.name, cr.node_name, step.status.bug_report.path);
                } else if (!made && created.error().retryable()) {
                  // A busy or failing API server (after the client's
                  // retries) is no reason to give up on the node, and a
                  // failed reboot escalates to replacing it: the next pass
                  // takes the same step again.
                  logger()->warn("RebootNode {}: creating the reboot Job failed, tried "
                                 "again next pass: {}",
                                 cr.name, created.error().to_string());
                  return advance(self, lane);
                }
                if (!bug_report_job && !made) {
                  step.status.phase = janitor::reboot_phase::failed;
                  step.status.failure_reason = "job_create_failed";
                  step.status.message = created.error().to_string();
                  step.status.completed_at = now;
                  self->state.settings.metrics->reboot_finished(
                    cr.node_name, false, step.status.failure_reason,
                    reboot_seconds(cr, now));
                }
                write_status(self, lane, reboot_nodes, cr.name,
                             janitor::reboot_status_json(step.status));
              });
       });
}

// ---- the pass ----

void pass_done(janitor_actor* self) {
  auto& st = self->state;
  st.passing = false;
  st.waiting.clear();
  ++st.passes;
  self->delayed_send(self, st.settings.poll, janitor_tick_atom::value);
}

// Starts waiting lanes while fewer than max_concurrent_nodes run.
void start_lanes(janitor_actor* self) {
  auto& st = self->state;
  while (st.lanes_running < st.settings.max_concurrent_nodes && !st.waiting.empty()) {
    auto lane = std::move(st.waiting.front());
    st.waiting.pop_front();
    ++st.lanes_running;
    work_on(self, std::move(lane));
  }
}

void lane_done(janitor_actor* self) {
  auto& st = self->state;
  --st.lanes_running;
  if (st.lanes_running == 0 && st.waiting.empty())
    return pass_done(self);
  start_lanes(self);
}

void work_on(janitor_actor* self, janitor_lane_ptr lane) {
  if (lane->next >= lane->work.size())
    return lane_done(self);
  const auto& item = lane->work[lane->next];
  auto doc = json::parse(item.json, nullptr, false);
  if (item.kind == "GPUReset")
    return take_up_reset(self, std::move(lane), doc, false);
  auto cr = janitor::read_reboot_node(doc);
  if (!cr) {
    logger()->error("unreadable RebootNode: {}", cr.error().to_string());
    return advance(self, std::move(lane));
  }
  reconcile_reboot_cr(self, std::move(lane), std::move(*cr));
}

struct listed_cr {
  std::string kind;
  std::string node;
  std::string phase;
  std::string created;
  std::string name;
  std::string json;
  std::string gpu_type;   ///< GPUReset status.gpuType
  bool deleting = false;  ///< metadata.deletionTimestamp set
  bool finalizer = false; ///< holds the janitor's restore finalizer
};

bool in_progress(const listed_cr& cr) {
  return !terminal(cr.phase) && cr.phase != "Pending";
}

void collect(std::vector<listed_cr>& into, const std::string& kind,
             const std::string& body) {
  auto list = json::parse(body, nullptr, false);
  if (!list.is_object() || !list.contains("items") || !list["items"].is_array())
    return;
  for (auto& item : list["items"]) {
    if (!item.is_object())
      continue;
    listed_cr cr{kind,
                 text_at(item, {"spec", "nodeName"}),
                 phase_of(item),
                 text_at(item, {"metadata", "creationTimestamp"}),
                 text_at(item, {"metadata", "name"}),
                 item.dump(),
                 text_at(item, {"status", "gpuType"})};
    cr.deleting = !text_at(item, {"metadata", "deletionTimestamp"}).empty();
    if (const json* f = json_at(item, {"metadata", "finalizers"}); f && f->is_array())
      cr.finalizer =
        std::find(f->begin(), f->end(), std::string{janitor::restore_finalizer})
        != f->end();
    into.push_back(std::move(cr));
  }
}

// Oldest first; at most one CR per node past Pending (the node lock). A CR
// that is finished or being deleted is taken up only for its finalizer. One
// lane per node, holding that node's CRs in this order; the lanes in the
// order of their oldest CR.
std::deque<janitor_lane_ptr> schedule(std::vector<listed_cr> listed) {
  std::stable_sort(listed.begin(), listed.end(), [](const auto& a, const auto& b) {
    return std::tie(a.created, a.name) < std::tie(b.created, b.name);
  });
  std::set<std::string> locked;
  for (const auto& cr : listed)
    if (in_progress(cr) && (!cr.deleting || cr.finalizer))
      locked.insert(cr.node);
  std::deque<janitor_lane_ptr> lanes;
  std::map<std::string, janitor_lane_ptr> by_node;
  auto take = [&](const listed_cr& cr) {
    auto& lane = by_node[cr.node];
    if (!lane) {
      lane = std::make_shared<janitor_lane>();
      lanes.push_back(lane);
    }
    lane->work.push_back({cr.kind, cr.json});
  };
  for (const auto& cr : listed) {
    if (terminal(cr.phase) || cr.deleting) {
      if (cr.finalizer)
        take(cr);
      continue;
    }
    if (cr.phase == "Pending" && !locked.insert(cr.node).second)
      continue; // waits for the node's running maintenance
    take(cr);
  }
  return lanes;
}

// seed 001 gpu_reset_active_requests{node, gpu_type}, and the reboots by node.
void count_active(janitor_metrics& metrics, const std::vector<listed_cr>& listed) {
  std::map<std::pair<std::string, std::string>, std::int64_t> resets;
  std::map<std::string, std::int64_t> reboots;
  for (const auto& cr : listed) {
    if (!in_progress(cr))
      continue;
    if (cr.kind == "GPUReset")
      ++resets[{cr.node, cr.gpu_type}];
    else
      ++reboots[cr.node];
  }
  metrics.set_active_resets(resets);
  metrics.set_active_reboots(reboots);
}

void start_pass(janitor_actor* self) {
  auto& st = self->state;
  if (st.passing)
    return;
  if (st.standby) {
    self->delayed_send(self, st.settings.poll, janitor_tick_atom::value);
    return;
  }
  st.passing = true;
  auto listed = std::make_shared<std::vector<listed_cr>>();
  send(self, kube::make_request("GET", kube::resource_path(gpu_resets)),
       [=](const kube::kube_result& resets) {
         if (!resets.ok()) {
           logger()->warn("listing GPUResets failed: {}", resets.error().to_string());
           return pass_done(self);
         }
         collect(*listed, "GPUReset", resets.response().body);
         send(self, kube::make_request("GET", kube::resource_path(reboot_nodes)),
              [=](const kube::kube_result& reboots) {
                auto& st = self->state;
                if (!reboots.ok()) {
                  logger()->warn("listing RebootNodes failed: {}",
                                 reboots.error().to_string());
                  return pass_done(self);
                }
                collect(*listed, "RebootNode", reboots.response().body);
                count_active(*st.settings.metrics, *listed);
                st.waiting = schedule(std::move(*listed));
                if (st.waiting.empty())
                  return pass_done(self);
                start_lanes(self);
              });
       });
}

} // namespace

caf::behavior janitor_controllers(janitor_actor* self, janitor_settings settings,
                                  kube_gateway_handle gateway,
                                  std::shared_ptr<const clock> time) {
  auto& st = self->state;
  st.settings = std::move(settings);
  st.gateway = std::move(gateway);
  st.time = std::move(time);
  st.standby = st.settings.await_leadership;
  self->send(self, janitor_tick_atom::value);
  return {
    [=](janitor_tick_atom) { start_pass(self); },
    [=](leader_atom, bool leading) { self->state.standby = !leading; },
    [=](summary_atom) {
      const auto& st = self->state;
      return json{{"passes", st.passes},
                  {"passing", st.passing},
                  {"nodesInProgress", st.lanes_running},
                  {"nodesWaiting", st.waiting.size()},
                  {"gpuResetsActive", st.settings.metrics->active_resets()},
                  {"rebootsActive", st.settings.metrics->active_reboots()}}
        .dump();
    },
  };
}

} // namespace vigil
