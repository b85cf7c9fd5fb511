#include "actors/janitor/janitor_actor.hpp"

#include <algorithm>
#include <set>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/gateway/kube_gateway_messages.hpp"
#include "messages/control_messages.hpp"
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

void pass_done(janitor_actor* self);
void work_on(janitor_actor* self);

// The current CR is done for this pass.
void advance(janitor_actor* self) {
  ++self->state.next;
  work_on(self);
}

template <class Then>
void send(janitor_actor* self, kube::kube_request request, Then then) {
  self->request(self->state.gateway, caf::infinite, std::move(request))
    .then([=](const kube::kube_result& result) mutable { then(result); });
}

void count_start(maintenance_metrics& m) {
  ++m.requests;
}

void count_finish(maintenance_metrics& m, bool succeeded, const std::string& reason,
                  std::optional<wall_time> started, wall_time completed) {
  ++(succeeded ? m.succeeded : m.failed);
  if (!succeeded)
    m.count_failure(reason);
  if (started)
    m.observe_duration(std::chrono::duration<double>(completed - *started).count());
}

// PATCH status (merge) through the status subresource, then move on.
void write_status(janitor_actor* self, const kube::api_resource& resource,
                  const std::string& name, json status) {
  auto request =
    kube::make_request("PATCH", kube::resource_path(resource, {}, name, "status"),
                       json{{"status", std::move(status)}}.dump());
  request.content_type = kube::content_type::merge_patch;
  send(self, std::move(request), [=](const kube::kube_result& result) {
    if (!result.ok())
      logger()->warn("status of {} not written: {}", name, result.error().to_string());
    advance(self);
  });
}

// ---- GPUReset (seed 001 "Reset Workflow") ----

struct reset_pass {
  janitor::gpu_reset_object cr;
  janitor::reset_observation observed;
};

void apply_reset(janitor_actor* self, std::shared_ptr<reset_pass> pass);

void observe_job(janitor_actor* self, std::shared_ptr<reset_pass> pass) {
  const auto& ns = self->state.settings.gpu_reset.job_namespace;
  const auto& job = pass->cr.status.job_name;
  if (job.empty())
    return apply_reset(self, pass);
  send(self, kube::make_request("GET", kube::resource_path(jobs, ns, job)),
       [=](const kube::kube_result& result) {
         if (!result.ok()) {
           if (!result.error().not_found()) {
             logger()->warn("GPUReset {}: reading Job {} failed: {}",
                            pass->cr.request.name, job, result.error().to_string());
             return advance(self);
           }
           return apply_reset(self, pass); // gone: the plan times it out
         }
         auto observed =
           janitor::read_job(json::parse(result.response().body, nullptr, false));
         pass->observed.job = observed;
         if (!observed.failed)
           return apply_reset(self, pass);
         // gpu-reset.sh's exit code says why: on the Job's pod.
         send(
           self,
           kube::make_request("GET", kube::resource_path(pods, ns), {},
                              "labelSelector=" + kube::query_escape("job-name=" + job)),
           [=](const kube::kube_result& listed) {
             if (listed.ok())
               pass->observed.job->exit_code = janitor::terminated_exit_code(
                 json::parse(listed.response().body, nullptr, false));
             apply_reset(self, pass);
           });
       });
}

void observe_reset(janitor_actor* self, std::shared_ptr<reset_pass> pass) {
  const auto& node = pass->cr.request.node_name;
  send(self, kube::make_request("GET", kube::resource_path(nodes, {}, node)),
       [=](const kube::kube_result& result) {
         if (!result.ok() && !result.error().not_found()) {
           logger()->warn("GPUReset {}: reading node {} failed: {}",
                          pass->cr.request.name, node, result.error().to_string());
           return advance(self);
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
                  return advance(self);
                }
                pass->observed.operand_pods_on_node = janitor::count_operand_pods(
                  json::parse(listed.response().body, nullptr, false));
                observe_job(self, pass);
              });
       });
}

void finish_reset_step(janitor_actor* self, std::shared_ptr<reset_pass> pass,
                       janitor::reset_step step) {
  auto& st = self->state;
  const auto& name = pass->cr.request.name;
  for (const auto& note : step.notes)
    logger()->warn("GPUReset {}: {}", name, note);
  auto& metrics = st.settings.metrics->gpu_reset;
  if (pass->cr.status.phase == janitor::reset_phase::pending
      && step.status.phase != janitor::reset_phase::pending)
    count_start(metrics);
  if (step.finished) {
    bool ok = step.status.phase == janitor::reset_phase::succeeded;
    count_finish(metrics, ok, step.status.failure_reason, step.status.started_at,
                 step.status.completed_at.value_or(pass->observed.now));
    if (ok)
      logger()->info("GPUReset {}: GPU {} on node {} reset", name,
                     pass->cr.request.gpu_uuid, pass->cr.request.node_name);
    else
      logger()->warn("GPUReset {}: GPU {} on node {} not reset: {}", name,
                     pass->cr.request.gpu_uuid, pass->cr.request.node_name,
                     step.status.failure_reason);
  } else if (step.status.phase != pass->cr.status.phase) {
    logger()->info("GPUReset {}: {}", name, janitor::to_string(step.status.phase));
  }
  if (!step.status_changed)
    return advance(self);
  write_status(self, gpu_resets, name, janitor::status_json(step.status));
}

void create_reset_job(janitor_actor* self, std::shared_ptr<reset_pass> pass,
                      janitor::reset_step step) {
  if (!step.create_job)
    return finish_reset_step(self, pass, std::move(step));
  const auto& ns = self->state.settings.gpu_reset.job_namespace;
  send(self, kube::make_request("POST", kube::resource_path(jobs, ns), *step.create_job),
       [=](const kube::kube_result& result) mutable {
         // 409: created by an earlier pass whose status write was lost.
         if (!result.ok() && !result.error().conflict()) {
           logger()->warn("GPUReset {}: creating the reset Job failed: {}",
                          pass->cr.request.name, result.error().to_string());
           step.status = janitor::job_create_failed(
             step.status, result.error().to_string(), pass->observed.now);
           step.status_changed = true;
         }
         finish_reset_step(self, pass, std::move(step));
       });
}

void delete_reset_job(janitor_actor* self, std::shared_ptr<reset_pass> pass,
                      janitor::reset_step step) {
  if (!step.delete_job)
    return create_reset_job(self, pass, std::move(step));
  const auto& ns = self->state.settings.gpu_reset.job_namespace;
  auto request =
    kube::make_request("DELETE", kube::resource_path(jobs, ns, pass->cr.status.job_name),
                       json{{"propagationPolicy", "Background"}}.dump());
  send(self, std::move(request), [=](const kube::kube_result&) mutable {
    create_reset_job(self, pass, std::move(step));
  });
}

void apply_reset(janitor_actor* self, std::shared_ptr<reset_pass> pass) {
  auto step = janitor::reconcile_gpu_reset(
    pass->cr.request, pass->cr.status, pass->observed, self->state.settings.gpu_reset);
  if (step.label_patch.empty())
    return delete_reset_job(self, pass, std::move(step));
  // The labels first: a status that says "torn down" must not precede them.
  auto request = kube::make_request(
    "PATCH", kube::resource_path(nodes, {}, pass->cr.request.node_name),
    janitor::label_patch_body(step.label_patch));
  request.content_type = kube::content_type::merge_patch;
  send(self, std::move(request), [=](const kube::kube_result& result) mutable {
    if (!result.ok()) {
      logger()->warn("GPUReset {}: patching the node's labels failed: {}",
                     pass->cr.request.name, result.error().to_string());
      return advance(self); // the next pass tries again
    }
    delete_reset_job(self, pass, std::move(step));
  });
}

// ---- RebootNode ----

void reconcile_reboot_cr(janitor_actor* self, janitor::reboot_object cr) {
  send(self, kube::make_request("GET", kube::resource_path(nodes, {}, cr.node_name)),
       [=](const kube::kube_result& result) {
         auto& st = self->state;
         if (!result.ok() && !result.error().not_found()) {
           logger()->warn("RebootNode {}: reading node {} failed: {}", cr.name,
                          cr.node_name, result.error().to_string());
           return advance(self);
         }
         std::optional<janitor::node_boot_observation> node;
         if (result.ok())
           node = janitor::read_boot(json::parse(result.response().body, nullptr, false));
         auto now = st.time->wall_now();
         auto step = janitor::reconcile_reboot(cr, node, now, st.settings.reboot);
         auto& metrics = st.settings.metrics->reboot;
         if (cr.status.phase == janitor::reboot_phase::pending
             && step.status.phase != janitor::reboot_phase::pending)
           count_start(metrics);
         if (step.finished) {
           bool ok = step.status.phase == janitor::reboot_phase::succeeded;
           count_finish(metrics, ok, step.status.failure_reason, step.status.started_at,
                        now);
           logger()->log(ok ? spdlog::level::info : spdlog::level::warn,
                         "RebootNode {}: node {} {}", cr.name, cr.node_name,
                         ok ? "rebooted (boot ID " + step.status.boot_id_before + " → "
                                + step.status.boot_id_after + ")"
                            : "not rebooted: " + step.status.message);
         }
         if (!step.create_job) {
           if (!step.status_changed)
             return advance(self);
           return write_status(self, reboot_nodes, cr.name,
                               janitor::reboot_status_json(step.status));
         }
         logger()->info("RebootNode {}: rebooting node {} (boot ID {})", cr.name,
                        cr.node_name, step.status.boot_id_before);
         send(self,
              kube::make_request(
                "POST", kube::resource_path(jobs, st.settings.reboot.job_namespace),
                *step.create_job),
              [=](const kube::kube_result& created) mutable {
                if (!created.ok() && !created.error().conflict()) {
                  step.status.phase = janitor::reboot_phase::failed;
                  step.status.failure_reason = "job_create_failed";
                  step.status.message = created.error().to_string();
                  step.status.completed_at = now;
                  count_finish(self->state.settings.metrics->reboot, false,
                               step.status.failure_reason, step.status.started_at, now);
                }
                write_status(self, reboot_nodes, cr.name,
                             janitor::reboot_status_json(step.status));
              });
       });
}

// ---- the pass ----

void work_on(janitor_actor* self) {
  auto& st = self->state;
  if (st.next >= st.work.size())
    return pass_done(self);
  const auto& item = st.work[st.next];
  auto doc = json::parse(item.json, nullptr, false);
  if (item.kind == "GPUReset") {
    auto cr = janitor::read_gpu_reset(doc);
    if (!cr) {
      logger()->error("unreadable GPUReset: {}", cr.error().to_string());
      return advance(self);
    }
    auto pass = std::make_shared<reset_pass>();
    pass->cr = std::move(*cr);
    pass->observed.now = st.time->wall_now();
    return observe_reset(self, pass);
  }
  auto cr = janitor::read_reboot_node(doc);
  if (!cr) {
    logger()->error("unreadable RebootNode: {}", cr.error().to_string());
    return advance(self);
  }
  reconcile_reboot_cr(self, std::move(*cr));
}

void pass_done(janitor_actor* self) {
  auto& st = self->state;
  st.passing = false;
  st.work.clear();
  st.next = 0;
  ++st.passes;
  self->delayed_send(self, st.settings.poll, jtick_atom::value);
}

struct listed_cr {
  std::string kind;
  std::string node;
  std::string phase;
  std::string created;
  std::string name;
  std::string json;
};

void collect(std::vector<listed_cr>& into, const std::string& kind,
             const std::string& body) {
  auto list = json::parse(body, nullptr, false);
  if (!list.is_object() || !list.contains("items") || !list["items"].is_array())
    return;
  for (auto& item : list["items"]) {
    if (!item.is_object())
      continue;
    auto phase = phase_of(item);
    into.push_back({kind, text_at(item, {"spec", "nodeName"}), phase,
                    text_at(item, {"metadata", "creationTimestamp"}),
                    text_at(item, {"metadata", "name"}), item.dump()});
  }
}

// Oldest first; at most one CR per node past Pending (the node lock).
std::vector<janitor_work> schedule(std::vector<listed_cr> listed) {
  std::stable_sort(listed.begin(), listed.end(), [](const auto& a, const auto& b) {
    return std::tie(a.created, a.name) < std::tie(b.created, b.name);
  });
  std::set<std::string> locked;
  for (const auto& cr : listed)
    if (!terminal(cr.phase) && cr.phase != "Pending")
      locked.insert(cr.node);
  std::vector<janitor_work> work;
  for (const auto& cr : listed) {
    if (terminal(cr.phase))
      continue;
    if (cr.phase == "Pending") {
      if (!locked.insert(cr.node).second)
        continue; // waits for the node's running maintenance
    }
    work.push_back({cr.kind, cr.json});
  }
  return work;
}

void start_pass(janitor_actor* self) {
  auto& st = self->state;
  if (st.passing)
    return;
  if (st.standby) {
    self->delayed_send(self, st.settings.poll, jtick_atom::value);
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
                std::int64_t active_resets = 0, active_reboots = 0;
                for (const auto& cr : *listed)
                  if (!terminal(cr.phase))
                    ++(cr.kind == "GPUReset" ? active_resets : active_reboots);
                st.settings.metrics->gpu_reset.active = active_resets;
                st.settings.metrics->reboot.active = active_reboots;
                st.work = schedule(std::move(*listed));
                st.next = 0;
                work_on(self);
              });
       });
}

} // namespace

maintenance_metrics::maintenance_metrics(std::vector<std::string> known_reasons)
  : reasons(std::move(known_reasons)),
    failures(new std::atomic<std::uint64_t>[reasons.size() + 1]) {
  for (std::size_t i = 0; i <= reasons.size(); ++i)
    failures[i] = 0;
}

void maintenance_metrics::observe_duration(double seconds) {
  duration_ms_sum += static_cast<std::uint64_t>(std::max(0.0, seconds) * 1000);
  std::size_t i = 0;
  while (i < duration_buckets.size() && seconds > duration_buckets[i])
    ++i;
  ++duration_counts[i];
}

void maintenance_metrics::count_failure(const std::string& reason) {
  auto it = std::find(reasons.begin(), reasons.end(), reason);
  ++failures[static_cast<std::size_t>(it - reasons.begin())];
}

janitor_metrics::janitor_metrics()
  : gpu_reset({std::string{janitor::failure_reason::teardown_failed},
               std::string{janitor::failure_reason::job_create_failed},
               std::string{janitor::failure_reason::reset_command_failed},
               std::string{janitor::failure_reason::health_check_failed},
               std::string{janitor::failure_reason::job_failed},
               std::string{janitor::failure_reason::timeout}}),
    reboot({"job_create_failed", "timeout", "node_not_found"}) {}

std::string render_janitor_metrics(const janitor_metrics& metrics) {
  std::string out;
  auto family = [&](const std::string& prefix, const char* what,
                    const maintenance_metrics& m) {
    auto line = [&](const std::string& name, const std::string& labels, auto value) {
      out += name + (labels.empty() ? "" : "{" + labels + "}") + " "
             + std::to_string(value) + "\n";
    };
    out += "# HELP " + prefix + "_requests_total " + what + " requests taken up.\n";
    out += "# TYPE " + prefix + "_requests_total counter\n";
    line(prefix + "_requests_total", "", m.requests.load());
    out += "# HELP " + prefix + "_requests_completed_total " + what
           + " requests completed, by status.\n";
    out += "# TYPE " + prefix + "_requests_completed_total counter\n";
    line(prefix + "_requests_completed_total", "status=\"succeeded\"",
         m.succeeded.load());
    line(prefix + "_requests_completed_total", "status=\"failed\"", m.failed.load());
    out += "# HELP " + prefix + "_active_requests " + what + " requests not finished.\n";
    out += "# TYPE " + prefix + "_active_requests gauge\n";
    line(prefix + "_active_requests", "", m.active.load());
    out += "# HELP " + prefix + "_failure_reasons_total Failed " + what
           + " requests, by reason.\n";
    out += "# TYPE " + prefix + "_failure_reasons_total counter\n";
    for (std::size_t i = 0; i <= m.reasons.size(); ++i)
      line(prefix + "_failure_reasons_total",
           "reason=\"" + (i < m.reasons.size() ? m.reasons[i] : std::string{"other"})
             + "\"",
           m.failures[i].load());
    out += "# HELP " + prefix + "_duration_seconds Time from start to completion.\n";
    out += "# TYPE " + prefix + "_duration_seconds histogram\n";
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < maintenance_metrics::duration_buckets.size(); ++i) {
      cumulative += m.duration_counts[i].load();
      char le[32];
      std::snprintf(le, sizeof le, "%g", maintenance_metrics::duration_buckets[i]);
      line(prefix + "_duration_seconds_bucket", "le=\"" + std::string{le} + "\"",
           cumulative);
    }
    cumulative += m.duration_counts.back().load();
    line(prefix + "_duration_seconds_bucket", "le=\"+Inf\"", cumulative);
    char sum[32];
    std::snprintf(sum, sizeof sum, "%.3f", m.duration_ms_sum.load() / 1000.0);
    out += prefix + "_duration_seconds_sum " + sum + "\n";
    line(prefix + "_duration_seconds_count", "", cumulative);
  };
  family("gpu_reset", "GPU reset", metrics.gpu_reset);
  family("reboot_node", "Node reboot", metrics.reboot);
  return out;
}

caf::behavior janitor_controllers(janitor_actor* self, janitor_settings settings,
                                  caf::actor gateway, std::shared_ptr<const clock> time) {
  auto& st = self->state;
  st.settings = std::move(settings);
  st.gateway = std::move(gateway);
  st.time = std::move(time);
  st.standby = st.settings.await_leadership;
  self->send(self, jtick_atom::value);
  return {
    [=](jtick_atom) { start_pass(self); },
    [=](leader_atom, bool leading) { self->state.standby = !leading; },
    [=](summary_atom) {
      const auto& st = self->state;
      return json{{"passes", st.passes},
                  {"passing", st.passing},
                  {"gpuResetsActive", st.settings.metrics->gpu_reset.active.load()},
                  {"rebootsActive", st.settings.metrics->reboot.active.load()}}
        .dump();
    },
  };
}

} // namespace vigil
