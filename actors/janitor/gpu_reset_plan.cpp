#include "actors/janitor/gpu_reset_plan.hpp"

#include <algorithm>
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

const reset_condition* find_condition(const gpu_reset_status& status,
                                      std::string_view type) {
  for (const auto& c : status.conditions)
    if (c.type == type)
      return &c;
  return nullptr;
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
  if (job.exit_code == reset_exit_code::gpu_in_use)
    return std::string{failure_reason::gpu_in_use};
  return std::string{failure_reason::job_failed};
}

bool all_saved(const gpu_reset_status& status) {
  for (auto label : operand_deploy_labels)
    if (status.saved_labels.count(std::string{label}) == 0)
      return false;
  return true;
}

// seed 001 step 1, first half: what the deploy labels hold now goes
// into the status before any of them changes, so a lost status write
// can never make "false" the value to restore.
void record(reset_step& step, const reset_observation& observed) {
  auto& status = step.status;
  for (auto label : operand_deploy_labels) {
    std::string key{label};
    status.saved_labels.emplace(key, label_value(observed, key));
  }
  if (status.gpu_type.empty())
    status.gpu_type = label_value(observed, std::string{gpu_product_label});
  step.status_changed = true;
  step.again = true;
}

// seed 001 step 1: every operand label to "false", once the old values are
// on the CR and the finalizer guards them; then wait for the operands to go.
void tear_down(reset_step& step, const gpu_reset_request& request,
               const reset_observation& observed, const gpu_reset_options& options) {
  auto& status = step.status;
  if (!all_saved(status)) { // a CR from before the record step; record first
    record(step, observed);
    return;
  }
  if (!request.has_finalizer) {
    step.again = true; // once the finalizer is on
    return;
  }
  for (auto label : operand_deploy_labels) {
    std::string key{label};
    if (label_value(observed, key) != torn_down_value)
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

bool job_past_deadline(const gpu_reset_status& status, const reset_observation& observed,
                       const gpu_reset_options& options) {
  auto created = status.job_created_at.value_or(observed.now);
  return observed.now - created >= options.job_timeout + job_deadline_grace;
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
  if (observed.job && (observed.job->succeeded || observed.job->failed))
    status.job_completed_at = observed.job->finished_at.value_or(observed.now);
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
  if (job_past_deadline(status, observed, options)) {
    step.delete_job = observed.job.has_value();
    status.job_completed_at = observed.now;
    set_condition(status, "ResetJobCompleted", false, "Timeout",
                  "reset Job did not finish in time", observed.now);
    fail(step, failure_reason::timeout, "reset Job did not finish in time", observed.now);
    return;
  }
  step.requeue_after = job_poll;
}

bool labels_restored(const gpu_reset_status& status) {
  const auto* restored = find_condition(status, "LabelsRestored");
  return restored != nullptr && restored->status;
}

// seed 001 step 5: put back what vigil changed, and only that; once.
void restore_labels(reset_step& step, const reset_observation& observed) {
  if (labels_restored(step.status) || !observed.node_exists)
    return;
  for (const auto& [key, saved] : step.status.saved_labels) {
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
}

// The operands the GPU operator deploys now (label "true") that do not run yet.
std::vector<std::string> operands_not_running(const reset_observation& observed) {
  std::vector<std::string> missing;
  for (std::size_t i = 0; i < operand_deploy_labels.size(); ++i) {
    std::string key{operand_deploy_labels[i]};
    if (label_value(observed, key) == deployed_value
        && observed.running_operands.count(key) == 0)
      missing.emplace_back(operand_apps[i]);
  }
  return missing;
}

void finish(reset_step& step, wall_time now) {
  auto& status = step.status;
  bool success = status.failure_reason.empty();
  set_condition(status, "Complete", success,
                success ? "Succeeded" : status.failure_reason,
                success ? "GPU reset" : "GPU reset failed", now);
  status.phase = success ? reset_phase::succeeded : reset_phase::failed;
  status.completed_at = now;
  step.status_changed = true;
  step.finished = true;
  step.remove_finalizer = true; // after the status write
}

// When the reset Job ended: its completion, or failure, or when the janitor
// gave up on it; where the janitor never saw it end, its deadline. nullopt:
// no Job was created.
std::optional<wall_time> job_ended_at(const gpu_reset_status& status,
                                      const gpu_reset_options& options) {
  if (status.job_completed_at)
    return status.job_completed_at;
  if (status.job_created_at)
    return *status.job_created_at + options.job_timeout + job_deadline_grace;
  return std::nullopt;
}

// seed 001 step 1 in reverse: the operands come back only once the reset
// Job's pod has left the node. One still stopping (its deadline passed, or
// the Job was deleted) may still be resetting, and a DCGM or device plugin
// redeployed under it would open the GPU it resets. Waited for up to
// reset_pod_exit_wait after the Job ended.
bool waits_for_reset_pod(reset_step& step, const reset_observation& observed,
                         const gpu_reset_options& options) {
  if (observed.reset_pods_on_node == 0 || !observed.node_exists)
    return false;
  const auto ended = job_ended_at(step.status, options);
  if (!ended) // no Job was created: the pods are not its
    return false;
  if (observed.now - *ended < reset_pod_exit_wait) {
    step.requeue_after = pod_poll;
    return true;
  }
  if (find_condition(step.status, "LabelsRestored") == nullptr) // said once
    step.notes.push_back("reset Job " + step.status.job_name
                         + "'s pod is still on the node "
                         + std::to_string(reset_pod_exit_wait.count())
                         + " s after the Job ended; labels restored anyway");
  return false;
}

// "kubectl label node N key=value key-": what puts the labels back by hand.
std::string
restore_command(const std::string& node_name,
                const std::map<std::string, std::optional<std::string>>& patch) {
  std::string command = "kubectl label node " + node_name + " --overwrite";
  for (const auto& [key, value] : patch)
    command += " " + key + (value ? "=" + *value : "-");
  return command;
}

// The labels could not be put back in time (every PATCH refused for the
// redeploy timeout: an admission webhook, a lost permission). The reset ends
// failed with the command that restores them by hand, so that the node's
// lock and the CR are not held for ever; the control plane hands the node to
// a person. labels_not_restored takes the place of an earlier failure reason
// (kept in the message): whatever else failed, the node needs a person for
// its labels first, and a reboot would not bring them back.
void give_up_restoring(reset_step& step, const gpu_reset_request& request,
                       wall_time now) {
  auto& status = step.status;
  auto message = "GPU operator deploy labels not restored; restore them with: "
                 + restore_command(request.node_name, step.label_patch);
  if (!status.failure_reason.empty())
    message += " (the reset had failed already: " + status.failure_reason + ")";
  step.label_patch.clear(); // the status write must not wait on the refused PATCH
  set_condition(status, "LabelsRestored", false, "Timeout", message, now);
  status.failure_reason = std::string{failure_reason::labels_not_restored};
  step.notes.push_back(std::move(message));
  finish(step, now);
}

// seed 001 step 5: the labels back, then the operands running again (as the
// teardown waited for them to go) before the reset is reported.
void restore(reset_step& step, const gpu_reset_request& request,
             const reset_observation& observed, const gpu_reset_options& options) {
  auto& status = step.status;
  if (!labels_restored(status) && waits_for_reset_pod(step, observed, options))
    return;
  const auto notes_before = step.notes.size();
  restore_labels(step, observed);
  if (!step.label_patch.empty()) {
    // The first PATCH waits for a status that says since when the labels
    // are being put back: a refused PATCH drops the step's status write, and
    // the give-up must count from a time the server holds.
    const auto* restoring = find_condition(status, "LabelsRestored");
    if (restoring == nullptr) {
      step.label_patch.clear();
      step.notes.resize(notes_before); // said by the step that patches
      set_condition(status, "LabelsRestored", false, "Restoring",
                    "putting the GPU operator deploy labels back", observed.now);
      step.status_changed = true;
      step.again = true;
      return;
    }
    if (observed.now - restoring->last_transition >= options.redeploy_timeout)
      return give_up_restoring(step, request, observed.now);
    step.requeue_after = label_poll;
    return;
  }
  if (!labels_restored(status)) {
    set_condition(status, "LabelsRestored", true, "Restored",
                  "GPU operator deploy labels restored", observed.now);
    step.status_changed = true;
  }
  auto since = find_condition(status, "LabelsRestored")->last_transition;
  auto missing =
    observed.node_exists ? operands_not_running(observed) : std::vector<std::string>{};
  if (missing.empty()) {
    set_condition(status, "OperandsRedeployed", true, "OperandsRunning",
                  "GPU operator operands run on the node again", observed.now);
  } else if (observed.now - since < options.redeploy_timeout) {
    step.requeue_after = pod_poll;
    return;
  } else {
    std::string names;
    for (const auto& m : missing)
      names += (names.empty() ? "" : ", ") + m;
    set_condition(status, "OperandsRedeployed", false, "Timeout",
                  "not running again after the redeploy timeout: " + names, observed.now);
    if (status.failure_reason.empty())
      status.failure_reason = std::string{failure_reason::redeploy_failed};
  }
  finish(step, observed.now);
}

// The CR is being deleted (seed 001 step 5): whatever its phase, the labels
// go back before the finalizer lets it go. A reset Job still running within
// its deadline is waited for: operands redeployed under a reset would hold
// the GPU. Nothing is written to the status any more.
void on_deletion(reset_step& step, const reset_observation& observed,
                 const gpu_reset_options& options) {
  const auto& status = step.status;
  const bool job_started =
    status.phase == reset_phase::resetting && !status.job_name.empty();
  if (job_started && observed.job && !observed.job->succeeded && !observed.job->failed) {
    if (!job_past_deadline(status, observed, options)) {
      step.notes.push_back("deleted while its reset Job runs: the labels are restored "
                           "once the Job has ended");
      step.requeue_after = job_poll;
      return;
    }
    step.delete_job = true;
  }
  const bool touched = status.phase == reset_phase::tearing_down
                       || status.phase == reset_phase::resetting
                       || status.phase == reset_phase::restoring;
  if (touched && !labels_restored(status) && waits_for_reset_pod(step, observed, options))
    return;
  if (touched)
    restore_labels(step, observed);
  step.remove_finalizer = true; // after the labels, in the same step
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
  if (request.deletion_requested) {
    if (request.has_finalizer)
      on_deletion(step, observed, options);
    return step;
  }
  if (s.phase == reset_phase::succeeded || s.phase == reset_phase::failed) {
    step.remove_finalizer = request.has_finalizer; // a removal that did not happen
    return step;
  }
  if (s.phase == reset_phase::pending) {
    s.started_at = observed.now;
    s.phase = reset_phase::tearing_down;
    if (!observed.node_exists) {
      fail(step, failure_reason::teardown_failed,
           "node " + request.node_name + " not found", observed.now);
      finish(step, observed.now);
      return step;
    }
    step.add_finalizer = !request.has_finalizer;
    record(step, observed);
    return step;
  }
  step.add_finalizer = !request.has_finalizer;
  if (s.phase == reset_phase::tearing_down)
    tear_down(step, request, observed, options);
  if (s.phase == reset_phase::resetting && step.label_patch.empty() && !step.again)
    run_job(step, request, observed, options);
  if (s.phase == reset_phase::restoring && !step.requeue_after && !step.again)
    restore(step, request, observed, options);
  return step;
}

std::optional<double> reset_duration_seconds(wall_time created,
                                             const gpu_reset_status& status) {
  auto end = status.job_completed_at ? status.job_completed_at : status.completed_at;
  if (!end
      || (status.phase != reset_phase::succeeded && status.phase != reset_phase::failed))
    return std::nullopt;
  auto start = created == wall_time{} ? status.started_at.value_or(*end) : created;
  return std::max(0.0, std::chrono::duration<double>(*end - start).count());
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
                   // The script's first step refuses a GPU that a process
                   // still holds (exit 5). nvidia-smi lists only the
                   // processes of its own PID namespace: without the host's,
                   // every holder outside the Job's pod is invisible and the
                   // GPU is reset under it.
                   {"hostPID", true},
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
  json out = {
    {"phase", to_string(status.phase)},   {"conditions", std::move(conditions)},
    {"jobName", status.job_name},         {"failureReason", status.failure_reason},
    {"savedLabels", status.saved_labels}, {"gpuType", status.gpu_type}};
  for (const char* key : {"failureReason", "gpuType"})
    if (out[key].get<std::string>().empty())
      out.erase(key);
  const std::pair<const char*, std::optional<wall_time>> times[] = {
    {"startedAt", status.started_at},
    {"completedAt", status.completed_at},
    {"jobCreatedAt", status.job_created_at},
    {"jobCompletedAt", status.job_completed_at}};
  for (const auto& [key, t] : times)
    if (auto text = time_text(t))
      out[key] = *text;
  return out;
}

} // namespace vigil::janitor
