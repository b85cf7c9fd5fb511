#include "actors/control/remediation/validation_job.hpp"

#include <nlohmann/json.hpp>

namespace vigil::control {

using nlohmann::json;

std::vector<std::string> default_validation_command() {
  // nvidia-smi -L lists one line per GPU the driver sees; dcgmi takes GPU
  // indices, so the UUIDs are mapped through nvidia-smi's index column.
  return {"/bin/sh", "-c",
          R"(set -u
present=$(nvidia-smi -L | grep -c '^GPU ') || { echo "nvidia-smi failed"; exit 2; }
if [ -n "${VIGIL_EXPECTED_GPUS:-}" ] && [ "$present" -lt "$VIGIL_EXPECTED_GPUS" ]; then
  echo "only $present of $VIGIL_EXPECTED_GPUS GPUs present"; exit 3
fi
ids=""
for uuid in $(echo "${VIGIL_GPU_UUIDS:-}" | tr ',' ' '); do
  id=$(nvidia-smi --query-gpu=index,uuid --format=csv,noheader | awk -F', ' -v u="$uuid" '$2 == u {print $1}')
  [ -n "$id" ] || { echo "GPU $uuid is missing"; exit 3; }
  ids="${ids:+$ids,}$id"
done
dcgmi discovery -l >/dev/null 2>&1 || nv-hostengine >/dev/null 2>&1
exec dcgmi diag -r 2 ${ids:+-i "$ids"})"};
}

json build_validation_job(const remediation_command::run_validation& run,
                          const std::string& node, const validation_job_options& options,
                          std::chrono::seconds timeout) {
  const auto& spec =
    run.request.plan.kind == remediation_kind::gpu_reset ? options.reset : options.reboot;
  std::string gpus;
  for (const auto& uuid : run.gpus)
    gpus += (gpus.empty() ? "" : ",") + uuid;
  const json labels = {{"app.kubernetes.io/managed-by", "vigil"},
                       {"vigil.dev/validation", run.request.plan.group}};
  json container = {
    {"name", "validate"},
    {"image", spec.image},
    {"command", spec.command.empty() ? default_validation_command() : spec.command},
    {"env", json::array(
              {{{"name", "VIGIL_GPU_UUIDS"}, {"value", gpus}},
               {{"name", "VIGIL_EXPECTED_GPUS"},
                {"value", run.expected_gpus ? std::to_string(*run.expected_gpus) : ""}},
               {{"name", "NVIDIA_VISIBLE_DEVICES"}, {"value", "all"}}})},
    {"securityContext", {{"privileged", true}}}};
  json pod_spec = {{"nodeName", node},
                   {"restartPolicy", "Never"},
                   {"serviceAccountName", options.service_account},
                   {"automountServiceAccountToken", false},
                   {"priorityClassName", "system-node-critical"},
                   {"tolerations", json::array({{{"operator", "Exists"}}})},
                   {"containers", json::array({std::move(container)})}};
  if (!options.runtime_class.empty())
    pod_spec["runtimeClassName"] = options.runtime_class;
  return {
    {"apiVersion", "batch/v1"},
    {"kind", "Job"},
    {"metadata",
     {{"name", run.job},
      {"namespace", options.job_namespace},
      {"labels", labels},
      {"annotations",
       {{"vigil.dev/node", node}, {"vigil.dev/source-event-id", run.request.event_id}}}}},
    {"spec",
     {{"backoffLimit", 0},
      {"activeDeadlineSeconds", timeout.count()},
      {"ttlSecondsAfterFinished", 24 * 3600},
      {"template",
       {{"metadata", {{"labels", labels}}}, {"spec", std::move(pod_spec)}}}}}};
}

expected<validation_progress> read_validation_job(const json& job) {
  if (!job.is_object() || !job.contains("metadata"))
    return failure{"validation Job", "not a Job object"};
  validation_progress out;
  const auto status = job.find("status");
  if (status == job.end() || !status->is_object())
    return out;
  auto count = [&](const char* key) {
    auto it = status->find(key);
    return it != status->end() && it->is_number_integer() ? it->get<long>() : 0L;
  };
  if (count("succeeded") > 0) {
    out.done = out.passed = true;
    return out;
  }
  if (auto c = status->find("conditions"); c != status->end() && c->is_array())
    for (const auto& condition : *c) {
      if (!condition.is_object() || condition.value("status", "") != "True")
        continue;
      const auto type = condition.value("type", "");
      if (type == "Complete") {
        out.done = out.passed = true;
        return out;
      }
      if (type == "Failed") {
        out.done = true;
        out.message = condition.value("reason", "Failed");
        if (auto m = condition.value("message", ""); !m.empty())
          out.message += ": " + m;
        return out;
      }
    }
  if (count("failed") > 0) {
    out.done = true;
    out.message = "its pod failed";
  }
  return out;
}

} // namespace vigil::control
