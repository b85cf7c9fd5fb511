// What the janitor reads from and writes to the API server (issue #8 item 4):
// GPUReset and RebootNode CRs with their status, the Node's labels and boot
// ID, the operand pods on a node, the reset Job's state, and the reboot Job.
// Pure code; the janitor actor sends the requests through the gateway.
#pragma once

#include <chrono>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "actors/janitor/gpu_reset_plan.hpp"
#include "actors/janitor/reboot_node_check.hpp"
#include "messages/expected.hpp"
#include "messages/wall_time.hpp"

namespace vigil::janitor {

/// The string at `path` ({"metadata", "name"}); "" when anything on the way
/// is missing or of another type. Never throws on odd input.
std::string text_at(const nlohmann::json& doc, std::initializer_list<const char*> path);

/// One GPUReset as listed: what reconcile_gpu_reset needs.
struct gpu_reset_object {
  gpu_reset_request request;
  gpu_reset_status status;
  wall_time created{};                 ///< metadata.creationTimestamp (oldest runs first)
  std::string resource_version;        ///< the finalizer patch's precondition
  std::vector<std::string> finalizers; ///< metadata.finalizers, all of them
};

/// Reads a GPUReset; fails naming the field (spec.gpuUUIDs must hold exactly
/// one UUID, issue #8 item 1).
expected<gpu_reset_object> read_gpu_reset(const nlohmann::json& cr);

/// status.phase of a RebootNode.
enum class reboot_phase { pending, rebooting, succeeded, failed };
std::string_view to_string(reboot_phase phase);

struct reboot_status {
  reboot_phase phase = reboot_phase::pending;
  std::optional<wall_time> started_at;
  std::optional<wall_time> completed_at;
  std::string job_name;
  std::string boot_id_before;
  std::string boot_id_after;
  std::string failure_reason; ///< "job_create_failed", "timeout", "node_not_found"
  std::string message;
};

struct reboot_object {
  std::string name;
  std::string uid;
  std::string node_name;
  std::string reason;
  reboot_status status;
  wall_time created{};
};

expected<reboot_object> read_reboot_node(const nlohmann::json& cr);

/// The RebootNode's status object, with one condition "Complete" once terminal.
nlohmann::json reboot_status_json(const reboot_status& status);

/// Config `janitor.reboot.*`.
struct reboot_options {
  std::string job_namespace = "vigil-system";
  std::string image = "busybox:1.36"; ///< needs nsenter
  std::string service_account = "vigil-reboot";
  std::chrono::seconds timeout{1800}; ///< new boot ID and Ready within, 30 min
};

/// "vigil-reboot-<cr>", shortened with a hash suffix to 63 characters.
std::string reboot_job_name(std::string_view cr_name);

/// A privileged Job on the node (hostPID, nodeName) that enters the host's
/// namespaces and runs `systemctl reboot`.
nlohmann::json build_reboot_job(const reboot_object& cr, const std::string& job_name,
                                const reboot_options& options);

/// One step of the RebootNode controller: Pending → Rebooting (boot ID
/// recorded) → the Job created (next step, once the baseline is stored) →
/// Succeeded (boot ID changed, Ready) or Failed.
struct reboot_step {
  reboot_status status;
  bool status_changed = false;
  std::optional<std::string> create_job; ///< the Job JSON to POST
  bool finished = false;
};

/// `node`: nullopt when the Node does not exist.
reboot_step reconcile_reboot(const reboot_object& cr,
                             const std::optional<node_boot_observation>& node,
                             wall_time now, const reboot_options& options);

/// The boot ID and Ready condition of a Node's JSON.
node_boot_observation read_boot(const nlohmann::json& node);

/// The labels of a Node's JSON.
std::map<std::string, std::string> read_labels(const nlohmann::json& node);

/// Merge patch of metadata.finalizers: the CR's finalizers with (`present`)
/// or without restore_finalizer, the others kept, and metadata.resourceVersion
/// so that a concurrent change of the list is a 409 rather than lost.
std::string finalizer_patch_body(const gpu_reset_object& cr, bool present);

/// The deploy labels of the operands with a pod running among a PodList:
/// phase Running, no deletionTimestamp, and no Ready condition other than
/// "True" (a pod the kubelet has not reported on yet counts by its phase).
std::set<std::string> running_operands(const nlohmann::json& pod_list);

/// The GPU operator's operand pods among a PodList (by their `app` label:
/// nvidia-device-plugin-daemonset, nvidia-dcgm, nvidia-dcgm-exporter,
/// gpu-feature-discovery) that are not yet terminated.
std::size_t count_operand_pods(const nlohmann::json& pod_list);

/// A Job's JSON as the reset plan sees it.
job_observation read_job(const nlohmann::json& job);

/// The exit code of the first terminated container among a Job's pods
/// (labelSelector job-name=<job>): gpu-reset.sh's verdict.
std::optional<int> terminated_exit_code(const nlohmann::json& pod_list);

/// Merge patch of node labels: a value sets, nullopt removes.
std::string
label_patch_body(const std::map<std::string, std::optional<std::string>>& patch);

} // namespace vigil::janitor
