#include "actors/janitor/gpu_reset_plan.hpp"

#include <cstdint>
#include <cstdio>
#include <utility>

#include <nlohmann/json.hpp>

namespace vigil::janitor {

namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr std::array<std::pair<reset_phase, std::string_view>, 6> phase_names{{
  {reset_phase::pending, "Pending"},
  {reset_phase::tearing_down, "TearingDown"},
  {reset_phase::resetting, "Resetting"},
  {reset_phase::restoring, "Restoring"},
  {reset_phase::succeeded, "Succeeded"},
  {reset_phase::failed, "Failed"},
}};

constexpr auto label_poll = 2s;
constexpr auto pod_poll = 5s;
constexpr auto job_poll = 10s;
constexpr std::size_t max_name_length = 63;
constexpr std::string_view job_prefix = "vigil-gpu-reset-";
constexpr std::string_view script_mount = "/opt/vigil";

std::string label_value(const reset_observation& observed, const std::string& key) {
  auto it = observed.node_labels.find(key);
  return it == observed.node_labels.end() ? std::string{} : it->second;
}

void set_condition(gpu_reset_status& status, std::string type, bool value,
                   std::string reason, std::string message, wall_time now) {
  for (auto& c : status.conditions) {
    if (c.type != type)
      continue;
    if (c.status != value)
      c.last_transition = now;
    c.status = value;
    c.reason = std::move(reason);
    c.message = std::move(message);
    return;
  }
  status.conditions.push_back(
    {std::move(type), value, std::move(reason), std::move(message), now});
}

void fail(reset_step& step, std::string_view reason, std::string message, wall_time now) {
  step.status.failure_reason = std::string{reason};
  step.status.phase = reset_phase::restoring;
  set_condition(step.status, "Complete", false, std::string{reason}, std::move(message),
                now);
  step.status_changed = true;
}

std::string failure_for(const job_observation& job) {
  if (job.deadline_exceeded)
    return std::string{failure_reason::timeout};
  if (job.exit_code == reset_exit_code::reset_command_failed)
    return std::string{failure_reason::reset_command_failed};
  if (job.exit_code == reset_exit_code::health_check_failed)
    return std::string{failure_reason::health_check_failed};
  return std::string{failure_reason::job_failed};
}

// seed 001 step 1: every operand label to "false", remembering what was there.
void tear_down(reset_step& step, const reset_observation& observed,
               const gpu_reset_options& options) {
  auto& status = step.status;
  for (auto label : operand_deploy_labels) {
    std::string key{label};
    auto current = label_value(observed, key);
    if (status.saved_labels.emplace(key, current).second)
      step.status_changed = true;
    if (current != torn_down_value)
      step.label_patch[key] = std::string{torn_down_value};
  }
  if (!step.label_patch.empty()) {
    step.requeue_after = label_poll;
    return;
  }
  if (observed.operand_pods_on_node == 0) {
    status.phase = reset_phase::resetting;
    set_condition(status, "OperandsTornDown", true, "OperandsGone",
                  "GPU operator operands left the node", observed.now);
    step.status_changed = true;
    return;
  }
  if (observed.now - *status.started_at >= options.teardown_timeout) {
    fail(step, failure_reason::teardown_failed,
         std::to_string(observed.operand_pods_on_node)
           + " operand pods still on the node after the teardown timeout",
         observed.now);
    return;
  }
  step.requeue_after = pod_poll;
}

// seed 001 steps 2–4: create the Job once, then watch it to an outcome.
void run_job(reset_step& step, const gpu_reset_request& request,
             const reset_observation& observed, const gpu_reset_options& options) {
  auto& status = step.status;
  if (status.job_name.empty()) {
    status.job_name = reset_job_name(request.name);
    status.job_created_at = observed.now;
    step.create_job = build_reset_job(request, status.job_name, options).dump();
    step.status_changed = true;
    step.requeue_after = job_poll;
    return;
  }
  auto created = status.job_created_at.value_or(observed.now);
  if (observed.job && observed.job->succeeded) {
    set_condition(status, "ResetJobCompleted", true, "JobSucceeded",
                  "GPU reset and health check passed", observed.now);
    status.phase = reset_phase::restoring;
    step.status_changed = true;
    return;
  }
  if (observed.job && observed.job->failed) {
    auto reason = failure_for(*observed.job);
    set_condition(status, "ResetJobCompleted", true, "JobFailed", observed.job->message,
                  observed.now);
    fail(step, reason, observed.job->message, observed.now);
    return;
  }
  // Kubernetes enforces activeDeadlineSeconds; this also covers a Job that
  // vanished or never started. Never re-create it: that could reset twice.
  if (observed.now - created >= options.job_timeout + job_poll) {
    step.delete_job = observed.job.has_value();
    set_condition(status, "ResetJobCompleted", false, "Timeout",
                  "reset Job did not finish in time", observed.now);
    fail(step, failure_reason::timeout, "reset Job did not finish in time", observed.now);
    return;
  }
  step.requeue_after = job_poll;
}

// seed 001 step 5: put back what vigil changed, and only that.
void restore(reset_step& step, const reset_observation& observed) {
  auto& status = step.status;
  for (const auto& [key, saved] : status.saved_labels) {
    auto current = label_value(observed, key);
    if (current == saved)
      continue;
    if (current != torn_down_value) {
      step.notes.push_back("label " + key + " is \"" + current
                           + "\", changed by someone else; left as is");
      continue;
    }
    step.label_patch[key] =
      saved.empty() ? std::nullopt : std::optional<std::string>{saved};
  }
  if (!step.label_patch.empty()) {
    step.requeue_after = label_poll;
    return;
  }
  bool success = status.failure_reason.empty();
  set_condition(status, "LabelsRestored", true, "Restored",
                "GPU operator deploy labels restored", observed.now);
  set_condition(status, "Complete", success,
                success ? "Succeeded" : status.failure_reason,
                success ? "GPU reset" : "GPU reset failed", observed.now);
  status.phase = success ? reset_phase::succeeded : reset_phase::failed;
  status.completed_at = observed.now;
  step.status_changed = true;
  step.finished = true;
}

std::string fnv1a_hex(std::string_view text) {
  std::uint32_t hash = 2166136261u;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 16777619u;
  }
  char out[9];
  std::snprintf(out, sizeof out, "%08x", hash);
  return out;
}

json job_labels(const gpu_reset_request& request) {
  return {{"app.kubernetes.io/name", "vigil-gpu-reset"},
          {"app.kubernetes.io/managed-by", "vigil"},
          {"vigil.dev/gpureset", request.name.substr(0, max_name_length)}};
}

json reset_container(const gpu_reset_request& request, const gpu_reset_options& options) {
  json command = options.inline_script.empty()
                   ? json::array({"/bin/sh", std::string{script_mount} + "/gpu-reset.sh",
                                  request.gpu_uuid})
                   : json::array({"/bin/sh", "-c", options.inline_script, "gpu-reset",
                                  request.gpu_uuid});
  json mounts = json::array({{{"name", "dev-kmsg"}, {"mountPath", "/dev/kmsg"}}});
  if (options.inline_script.empty())
    mounts.push_back(
      {{"name", "script"}, {"mountPath", script_mount}, {"readOnly", true}});
  return {{"name", "gpu-reset"},
          {"image", options.image},
          {"command", std::move(command)},
          {"env",
           json::array({{{"name", "GPU_UUID"}, {"value", request.gpu_uuid}},
                        {{"name", "NVIDIA_VISIBLE_DEVICES"}, {"value", request.gpu_uuid}},
                        {{"name", "NVIDIA_DRIVER_CAPABILITIES"}, {"value", "utility"}}})},
          {"securityContext", {{"privileged", true}}},
          {"volumeMounts", std::move(mounts)}};
}

json reset_volumes(const gpu_reset_options& options) {
  json volumes =
    json::array({{{"name", "dev-kmsg"},
                  {"hostPath", {{"path", "/dev/kmsg"}, {"type", "CharDevice"}}}}});
  if (options.inline_script.empty())
    volumes.push_back(
      {{"name", "script"},
       {"configMap", {{"name", options.script_config_map}, {"defaultMode", 0555}}}});
  return volumes;
}

std::optional<std::string> time_text(const std::optional<wall_time>& t) {
  return t ? std::optional<std::string>{format_rfc3339(*t)} : std::nullopt;
}

} // namespace

std::string_view to_string(reset_phase phase) {
  for (const auto& [p, name] : phase_names)
    if (p == phase)
      return name;
  return "Pending";
}

std::optional<reset_phase> parse_reset_phase(std::string_view text) {
  if (text.empty())
    return reset_phase::pending;
  for (const auto& [p, name] : phase_names)
    if (name == text)
      return p;
  return std::nullopt;
}

reset_step reconcile_gpu_reset(const gpu_reset_request& request,
                               const gpu_reset_status& status,
                               const reset_observation& observed,
                               const gpu_reset_options& options) {
  reset_step step;
  step.status = status;
  auto& s = step.status;
  if (s.phase == reset_phase::pending) {
    s.started_at = observed.now;
    s.phase = reset_phase::tearing_down;
    step.status_changed = true;
    if (!observed.node_exists) {
      s.saved_labels.clear();
      fail(step, failure_reason::teardown_failed,
           "node " + request.node_name + " not found", observed.now);
    }
  }
  if (s.phase == reset_phase::tearing_down)
    tear_down(step, observed, options);
  if (s.phase == reset_phase::resetting && step.label_patch.empty())
    run_job(step, request, observed, options);
  if (s.phase == reset_phase::restoring && !step.requeue_after)
    restore(step, observed);
  return step;
}

gpu_reset_status job_create_failed(gpu_reset_status status, const std::string& message,
                                   wall_time now) {
  reset_step step;
  step.status = std::move(status);
  fail(step, failure_reason::job_create_failed, message, now);
  return step.status;
}

std::string job_name_for(std::string_view prefix, std::string_view cr_name) {
  std::string name = std::string{prefix} + std::string{cr_name};
  if (name.size() <= max_name_length)
    return name;
  auto hash = fnv1a_hex(cr_name);
  name.resize(max_name_length - hash.size() - 1);
  while (!name.empty() && (name.back() == '-' || name.back() == '.'))
    name.pop_back();
  return name + "-" + hash;
}

std::string reset_job_name(std::string_view cr_name) {
  return job_name_for(job_prefix, cr_name);
}

json build_reset_job(const gpu_reset_request& request, const std::string& job_name,
                     const gpu_reset_options& options) {
  json metadata = {{"name", job_name},
                   {"namespace", options.job_namespace},
                   {"labels", job_labels(request)},
                   {"annotations",
                    {{"vigil.dev/gpu-uuid", request.gpu_uuid},
                     {"vigil.dev/source-event-id", request.source_event_id}}}};
  if (!request.uid.empty())
    metadata["ownerReferences"] = json::array({{{"apiVersion", "vigil.dev/v1alpha1"},
                                                {"kind", "GPUReset"},
                                                {"name", request.name},
                                                {"uid", request.uid},
                                                {"controller", true},
                                                {"blockOwnerDeletion", false}}});
  json pod_spec = {{"nodeName", request.node_name},
                   {"restartPolicy", "Never"},
                   {"serviceAccountName", options.service_account},
                   {"automountServiceAccountToken", false},
                   {"priorityClassName", "system-node-critical"},
                   {"tolerations", json::array({{{"operator", "Exists"}}})},
                   {"containers", json::array({reset_container(request, options)})},
                   {"volumes", reset_volumes(options)}};
  if (!options.runtime_class.empty())
    pod_spec["runtimeClassName"] = options.runtime_class;
  return {{"apiVersion", "batch/v1"},
          {"kind", "Job"},
          {"metadata", std::move(metadata)},
          {"spec",
           {{"backoffLimit", 0},
            {"activeDeadlineSeconds", options.job_timeout.count()},
            {"ttlSecondsAfterFinished", options.job_ttl_after_finished.count()},
            {"template",
             {{"metadata", {{"labels", job_labels(request)}}},
              {"spec", std::move(pod_spec)}}}}}};
}

json status_json(const gpu_reset_status& status) {
  json conditions = json::array();
  for (const auto& c : status.conditions)
    conditions.push_back({{"type", c.type},
                          {"status", c.status ? "True" : "False"},
                          {"reason", c.reason},
                          {"message", c.message},
                          {"lastTransitionTime", format_rfc3339(c.last_transition)}});
  json out = {{"phase", to_string(status.phase)},
              {"conditions", std::move(conditions)},
              {"jobName", status.job_name},
              {"failureReason", status.failure_reason},
              {"savedLabels", status.saved_labels}};
  if (status.failure_reason.empty())
    out.erase("failureReason");
  const std::pair<const char*, std::optional<wall_time>> times[] = {
    {"startedAt", status.started_at},
    {"completedAt", status.completed_at},
    {"jobCreatedAt", status.job_created_at}};
  for (const auto& [key, t] : times)
    if (auto text = time_text(t))
      out[key] = *text;
  return out;
}

} // namespace vigil::janitor
