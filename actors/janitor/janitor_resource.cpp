#include "actors/janitor/janitor_resource.hpp"

#include "messages/json_path.hpp"

#include <algorithm>
#include <array>

#include <nlohmann/json.hpp>

namespace vigil::janitor {

namespace {

using json = nlohmann::json;

const json* at(const json& doc, std::initializer_list<const char*> path) {
  return json_at(doc, path);
}

} // namespace

std::string text_at(const json& doc, std::initializer_list<const char*> path) {
  return json_text(doc, path);
}

namespace {

std::optional<wall_time> time_at(const json& doc,
                                 std::initializer_list<const char*> path) {
  auto text = text_at(doc, path);
  if (text.empty())
    return std::nullopt;
  auto t = parse_rfc3339(text);
  return t ? std::optional<wall_time>{*t} : std::nullopt;
}

// metadata.name, metadata.uid, metadata.creationTimestamp and spec.nodeName:
// what every maintenance CR has.
failure* check_common(const json& cr, failure& out) {
  if (!cr.is_object()) {
    out = {"", "not a JSON object"};
    return &out;
  }
  if (text_at(cr, {"metadata", "name"}).empty()) {
    out = {"metadata.name", "missing"};
    return &out;
  }
  if (text_at(cr, {"spec", "nodeName"}).empty()) {
    out = {"spec.nodeName", "missing"};
    return &out;
  }
  return nullptr;
}

} // namespace

expected<gpu_reset_object> read_gpu_reset(const json& cr) {
  failure problem;
  if (check_common(cr, problem))
    return problem;
  gpu_reset_object out;
  auto& r = out.request;
  r.name = text_at(cr, {"metadata", "name"});
  r.uid = text_at(cr, {"metadata", "uid"});
  r.node_name = text_at(cr, {"spec", "nodeName"});
  r.reason = text_at(cr, {"spec", "reason"});
  r.source_event_id = text_at(cr, {"spec", "sourceEventId"});
  out.resource_version = text_at(cr, {"metadata", "resourceVersion"});
  if (const json* finalizers = at(cr, {"metadata", "finalizers"});
      finalizers && finalizers->is_array())
    for (const auto& f : *finalizers)
      if (f.is_string())
        out.finalizers.push_back(f.get<std::string>());
  r.has_finalizer =
    std::find(out.finalizers.begin(), out.finalizers.end(), restore_finalizer)
    != out.finalizers.end();
  r.deletion_requested = !text_at(cr, {"metadata", "deletionTimestamp"}).empty();
  const json* uuids = at(cr, {"spec", "gpuUUIDs"});
  if (!uuids || !uuids->is_array() || uuids->size() != 1 || !(*uuids)[0].is_string())
    return failure{"spec.gpuUUIDs", "must hold exactly one GPU UUID"};
  r.gpu_uuid = (*uuids)[0].get<std::string>();
  out.created = time_at(cr, {"metadata", "creationTimestamp"}).value_or(wall_time{});
  auto& s = out.status;
  if (auto phase = parse_reset_phase(text_at(cr, {"status", "phase"})))
    s.phase = *phase;
  s.started_at = time_at(cr, {"status", "startedAt"});
  s.completed_at = time_at(cr, {"status", "completedAt"});
  s.job_created_at = time_at(cr, {"status", "jobCreatedAt"});
  s.job_completed_at = time_at(cr, {"status", "jobCompletedAt"});
  s.gpu_type = text_at(cr, {"status", "gpuType"});
  s.job_name = text_at(cr, {"status", "jobName"});
  s.failure_reason = text_at(cr, {"status", "failureReason"});
  if (const json* saved = at(cr, {"status", "savedLabels"}); saved && saved->is_object())
    for (const auto& [key, value] : saved->items())
      if (value.is_string())
        s.saved_labels[key] = value.get<std::string>();
  if (const json* conditions = at(cr, {"status", "conditions"});
      conditions && conditions->is_array())
    for (const auto& c : *conditions) {
      reset_condition condition;
      condition.type = text_at(c, {"type"});
      condition.status = text_at(c, {"status"}) == "True";
      condition.reason = text_at(c, {"reason"});
      condition.message = text_at(c, {"message"});
      condition.last_transition =
        time_at(c, {"lastTransitionTime"}).value_or(wall_time{});
      if (!condition.type.empty())
        s.conditions.push_back(std::move(condition));
    }
  // Defensive: a resumed step needs startedAt (the teardown timeout counts from it).
  if (s.phase != reset_phase::pending && !s.started_at)
    s.started_at = out.created;
  return out;
}

std::string_view to_string(reboot_phase phase) {
  switch (phase) {
    case reboot_phase::pending: return "Pending";
    case reboot_phase::rebooting: return "Rebooting";
    case reboot_phase::succeeded: return "Succeeded";
    case reboot_phase::failed: return "Failed";
  }
  return "Pending";
}

expected<reboot_object> read_reboot_node(const json& cr) {
  failure problem;
  if (check_common(cr, problem))
    return problem;
  reboot_object out;
  out.name = text_at(cr, {"metadata", "name"});
  out.uid = text_at(cr, {"metadata", "uid"});
  out.node_name = text_at(cr, {"spec", "nodeName"});
  out.reason = text_at(cr, {"spec", "reason"});
  if (const json* collect = at(cr, {"spec", "collectBugReport"});
      collect != nullptr && collect->is_boolean())
    out.collect_bug_report = collect->get<bool>();
  out.created = time_at(cr, {"metadata", "creationTimestamp"}).value_or(wall_time{});
  auto& s = out.status;
  auto phase = text_at(cr, {"status", "phase"});
  for (auto p : {reboot_phase::rebooting, reboot_phase::succeeded, reboot_phase::failed})
    if (phase == to_string(p))
      s.phase = p;
  s.started_at = time_at(cr, {"status", "startedAt"});
  s.completed_at = time_at(cr, {"status", "completedAt"});
  s.job_name = text_at(cr, {"status", "jobName"});
  s.boot_id_before = text_at(cr, {"status", "bootIdBefore"});
  s.boot_id_after = text_at(cr, {"status", "bootIdAfter"});
  s.failure_reason = text_at(cr, {"status", "failureReason"});
  s.bug_report.job = text_at(cr, {"status", "bugReport", "job"});
  s.bug_report.path = text_at(cr, {"status", "bugReport", "path"});
  s.bug_report.outcome = text_at(cr, {"status", "bugReport", "outcome"});
  if (s.phase != reboot_phase::pending && !s.started_at)
    s.started_at = out.created;
  return out;
}

json reboot_status_json(const reboot_status& s) {
  json out = {{"phase", to_string(s.phase)}};
  const std::pair<const char*, const std::string*> texts[] = {
    {"jobName", &s.job_name},
    {"bootIdBefore", &s.boot_id_before},
    {"bootIdAfter", &s.boot_id_after},
    {"failureReason", &s.failure_reason}};
  for (const auto& [key, value] : texts)
    if (!value->empty())
      out[key] = *value;
  if (s.started_at)
    out["startedAt"] = format_rfc3339(*s.started_at);
  if (s.completed_at)
    out["completedAt"] = format_rfc3339(*s.completed_at);
  if (!s.bug_report.job.empty()) {
    out["bugReport"] = {{"job", s.bug_report.job}, {"path", s.bug_report.path}};
    if (!s.bug_report.outcome.empty())
      out["bugReport"]["outcome"] = s.bug_report.outcome;
  }
  if (s.phase == reboot_phase::succeeded || s.phase == reboot_phase::failed) {
    bool ok = s.phase == reboot_phase::succeeded;
    out["conditions"] = json::array(
      {{{"type", "Complete"},
        {"status", ok ? "True" : "False"},
        {"reason", ok ? std::string{"Succeeded"} : s.failure_reason},
        {"message", s.message},
        {"lastTransitionTime", format_rfc3339(s.completed_at.value_or(wall_time{}))}}});
  }
  return out;
}

std::string reboot_job_name(std::string_view cr_name) {
  return job_name_for("vigil-reboot-", cr_name);
}

namespace {

// A RebootNode's privileged Job on its node (hostPID, nodeName, every taint
// tolerated, no retries), owned by the CR and labelled as vigil's own (the
// drain never evicts it): the reboot itself, or the bug report before it.
json reboot_node_job(const reboot_object& cr, const std::string& job_name,
                     const char* label, json container, json volumes,
                     std::chrono::seconds deadline, std::chrono::seconds keep,
                     const reboot_options& options) {
  json labels = {{"app.kubernetes.io/managed-by", "vigil"}, {label, cr.name}};
  json metadata = {
    {"name", job_name}, {"namespace", options.job_namespace}, {"labels", labels}};
  if (!cr.uid.empty())
    metadata["ownerReferences"] = json::array({{{"apiVersion", "vigil.dev/v1alpha1"},
                                                {"kind", "RebootNode"},
                                                {"name", cr.name},
                                                {"uid", cr.uid},
                                                {"controller", true},
                                                {"blockOwnerDeletion", false}}});
  json pod_spec = {{"nodeName", cr.node_name},
                   {"hostPID", true},
                   {"restartPolicy", "Never"},
                   {"serviceAccountName", options.service_account},
                   {"automountServiceAccountToken", false},
                   {"priorityClassName", "system-node-critical"},
                   {"tolerations", json::array({{{"operator", "Exists"}}})},
                   {"containers", json::array({std::move(container)})}};
  if (!volumes.empty())
    pod_spec["volumes"] = std::move(volumes);
  return {{"apiVersion", "batch/v1"},
          {"kind", "Job"},
          {"metadata", metadata},
          {"spec",
           {{"backoffLimit", 0},
            {"activeDeadlineSeconds", deadline.count()},
            {"ttlSecondsAfterFinished", keep.count()},
            {"template", {{"metadata", {{"labels", labels}}}, {"spec", pod_spec}}}}}};
}

} // namespace

json build_reboot_job(const reboot_object& cr, const std::string& job_name,
                      const reboot_options& options) {
  json container = {
    {"name", "reboot"},
    {"image", options.image},
    {"command", json::array({"nsenter", "--target", "1", "--mount", "--uts", "--ipc",
                             "--net", "--pid", "--", "systemctl", "reboot"})},
    {"securityContext", {{"privileged", true}}}};
  return reboot_node_job(cr, job_name, "vigil.dev/reboot-node", std::move(container),
                         json::array(), options.timeout, std::chrono::hours{1}, options);
}

std::string bug_report_job_name(std::string_view cr_name) {
  return job_name_for("vigil-bugreport-", cr_name);
}

json build_bug_report_job(const reboot_object& cr, const std::string& job_name,
                          const std::string& file, const reboot_options& options) {
  // The driver's own script, from the host (the image needs only chroot):
  // it writes <file>.gz; the directory is on the node's disk, which the
  // reboot keeps.
  const auto& dir = options.bug_report.host_directory;
  json container = {
    {"name", "bug-report"},
    {"image", options.image},
    {"command",
     json::array({"chroot", "/host", "/bin/sh", "-c",
                  "mkdir -p '" + dir + "' && nvidia-bug-report.sh --output-file '" + dir
                    + "/" + file + "'"})},
    {"securityContext", {{"privileged", true}}},
    {"volumeMounts", json::array({{{"name", "host"}, {"mountPath", "/host"}}})}};
  json volumes = json::array({{{"name", "host"}, {"hostPath", {{"path", "/"}}}}});
  return reboot_node_job(cr, job_name, "vigil.dev/bug-report", std::move(container),
                         std::move(volumes), options.bug_report.timeout,
                         std::chrono::hours{24}, options);
}

namespace {

// The bug report before the reboot: started once, then waited for until its
// Job ends or its time is up. Returns true while the reboot must wait.
bool bug_report_pending(const reboot_object& cr, wall_time now,
                        const reboot_options& options,
                        const std::optional<job_observation>& job, reboot_step& step) {
  auto& b = step.status.bug_report;
  if (!cr.collect_bug_report || !options.bug_report.enabled || !b.outcome.empty())
    return false;
  if (b.job.empty()) {
    b.job = bug_report_job_name(cr.name);
    const auto file = "nvidia-bug-report-" + cr.name + ".log";
    b.path = cr.node_name + ":" + options.bug_report.host_directory + "/" + file + ".gz";
    step.create_job = build_bug_report_job(cr, b.job, file, options).dump();
    step.status_changed = true;
    return true;
  }
  const auto since = step.status.started_at.value_or(now);
  if (job && job->succeeded)
    b.outcome = "collected";
  else if (job && job->failed)
    b.outcome =
      "failed: " + (job->message.empty() ? std::string{"the Job failed"} : job->message);
  else if (now - since >= options.bug_report.timeout)
    b.outcome = "timed out";
  else
    return true;
  // The reboot's own time starts now.
  step.status.started_at = now;
  step.status_changed = true;
  return true; // the reboot Job follows once this outcome is stored
}

} // namespace

reboot_step reconcile_reboot(const reboot_object& cr,
                             const std::optional<node_boot_observation>& node,
                             wall_time now, const reboot_options& options,
                             const std::optional<job_observation>& bug_report) {
  reboot_step step;
  step.status = cr.status;
  auto& s = step.status;
  auto finish = [&](reboot_phase phase, std::string reason, std::string message) {
    s.phase = phase;
    s.failure_reason = std::move(reason);
    s.message = std::move(message);
    s.completed_at = now;
    step.status_changed = true;
    step.finished = true;
  };
  if (s.phase == reboot_phase::succeeded || s.phase == reboot_phase::failed)
    return step;
  if (!node) {
    finish(reboot_phase::failed, "node_not_found", "node " + cr.node_name + " not found");
    return step;
  }
  if (s.phase == reboot_phase::pending) {
    // The baseline: a boot ID that differs from this one proves the reboot.
    // It is written before the Job exists, so a lost status write can never
    // make the new boot's ID the baseline.
    s.phase = reboot_phase::rebooting;
    s.started_at = now;
    s.boot_id_before = node->boot_id;
    step.status_changed = true;
    return step;
  }
  if (s.job_name.empty() && bug_report_pending(cr, now, options, bug_report, step))
    return step;
  if (s.job_name.empty()) {
    s.job_name = reboot_job_name(cr.name);
    step.create_job = build_reboot_job(cr, s.job_name, options).dump();
    step.status_changed = true;
    return step;
  }
  switch (evaluate_reboot(s.boot_id_before, *node, s.started_at.value_or(now), now,
                          options.timeout)) {
    case reboot_progress::succeeded:
      s.boot_id_after = node->boot_id;
      finish(reboot_phase::succeeded, "", "boot ID changed and the node is Ready");
      break;
    case reboot_progress::timed_out:
      finish(reboot_phase::failed, "timeout",
             "no new boot ID with the node Ready in time");
      break;
    case reboot_progress::waiting: break;
  }
  return step;
}

node_boot_observation read_boot(const json& node) {
  node_boot_observation out;
  out.boot_id = text_at(node, {"status", "nodeInfo", "bootID"});
  if (const json* conditions = at(node, {"status", "conditions"});
      conditions && conditions->is_array())
    for (const auto& c : *conditions)
      if (text_at(c, {"type"}) == "Ready")
        out.ready = text_at(c, {"status"}) == "True";
  return out;
}

std::map<std::string, std::string> read_labels(const json& node) {
  std::map<std::string, std::string> out;
  if (const json* labels = at(node, {"metadata", "labels"});
      labels && labels->is_object())
    for (const auto& [key, value] : labels->items())
      if (value.is_string())
        out[key] = value.get<std::string>();
  return out;
}

std::string finalizer_patch_body(const gpu_reset_object& cr, bool present) {
  json finalizers = json::array();
  for (const auto& f : cr.finalizers)
    if (f != restore_finalizer)
      finalizers.push_back(f);
  if (present)
    finalizers.push_back(std::string{restore_finalizer});
  json metadata = {{"finalizers", std::move(finalizers)}};
  if (!cr.resource_version.empty())
    metadata["resourceVersion"] = cr.resource_version;
  return json{{"metadata", std::move(metadata)}}.dump();
}

std::set<std::string> running_operands(const json& pod_list) {
  std::set<std::string> out;
  const json* items = at(pod_list, {"items"});
  if (!items || !items->is_array())
    return out;
  for (const auto& pod : *items) {
    if (text_at(pod, {"status", "phase"}) != "Running"
        || !text_at(pod, {"metadata", "deletionTimestamp"}).empty())
      continue;
    bool unready = false;
    if (const json* conditions = at(pod, {"status", "conditions"});
        conditions && conditions->is_array())
      for (const auto& c : *conditions)
        unready =
          unready
          || (text_at(c, {"type"}) == "Ready" && text_at(c, {"status"}) != "True");
    if (unready)
      continue;
    auto app = text_at(pod, {"metadata", "labels", "app"});
    for (std::size_t i = 0; i < operand_apps.size(); ++i)
      if (app == operand_apps[i])
        out.emplace(operand_deploy_labels[i]);
  }
  return out;
}

std::size_t count_operand_pods(const json& pod_list) {
  std::size_t n = 0;
  const json* items = at(pod_list, {"items"});
  if (!items || !items->is_array())
    return 0;
  for (const auto& pod : *items) {
    auto app = text_at(pod, {"metadata", "labels", "app"});
    auto phase = text_at(pod, {"status", "phase"});
    if (phase == "Succeeded" || phase == "Failed")
      continue;
    for (auto operand : operand_apps)
      if (app == operand)
        ++n;
  }
  return n;
}

std::size_t count_job_pods(const json& pod_list, std::string_view job_namespace,
                           std::string_view job_name) {
  const json* items = at(pod_list, {"items"});
  if (job_name.empty() || !items || !items->is_array())
    return 0;
  std::size_t n = 0;
  for (const auto& pod : *items) {
    auto phase = text_at(pod, {"status", "phase"});
    if (phase == "Succeeded" || phase == "Failed"
        || text_at(pod, {"metadata", "namespace"}) != job_namespace)
      continue;
    if (text_at(pod, {"metadata", "labels", "batch.kubernetes.io/job-name"}) == job_name
        || text_at(pod, {"metadata", "labels", "job-name"}) == job_name)
      ++n;
  }
  return n;
}

job_observation read_job(const json& job) {
  job_observation out;
  const json* status = at(job, {"status"});
  if (!status || !status->is_object())
    return out;
  auto count = [&](const char* key) {
    auto it = status->find(key);
    return it != status->end() && it->is_number_integer() ? it->get<long>() : 0L;
  };
  out.active = count("active") > 0;
  if (const json* conditions = at(job, {"status", "conditions"});
      conditions && conditions->is_array())
    for (const auto& c : *conditions) {
      if (text_at(c, {"status"}) != "True")
        continue;
      auto type = text_at(c, {"type"});
      if (type == "Complete")
        out.succeeded = true;
      if (type == "Failed") {
        out.failed = true;
        out.deadline_exceeded = text_at(c, {"reason"}) == "DeadlineExceeded";
        out.message = text_at(c, {"message"});
        out.finished_at = time_at(c, {"lastTransitionTime"});
      }
    }
  out.succeeded = out.succeeded || (count("succeeded") > 0 && !out.failed);
  if (out.succeeded && !out.failed)
    out.finished_at = time_at(job, {"status", "completionTime"});
  out.failed = out.failed || count("failed") > 0;
  if (out.message.empty() && out.failed)
    out.message = "reset Job failed";
  return out;
}

std::optional<int> terminated_exit_code(const json& pod_list) {
  const json* items = at(pod_list, {"items"});
  if (!items || !items->is_array())
    return std::nullopt;
  for (const auto& pod : *items) {
    const json* statuses = at(pod, {"status", "containerStatuses"});
    if (!statuses || !statuses->is_array())
      continue;
    for (const auto& c : *statuses)
      if (const json* code = at(c, {"state", "terminated", "exitCode"});
          code && code->is_number_integer())
        return code->get<int>();
  }
  return std::nullopt;
}

std::string
label_patch_body(const std::map<std::string, std::optional<std::string>>& patch) {
  json labels = json::object();
  for (const auto& [key, value] : patch)
    labels[key] = value ? json(*value) : json(nullptr);
  return json{{"metadata", {{"labels", labels}}}}.dump();
}

} // namespace vigil::janitor
