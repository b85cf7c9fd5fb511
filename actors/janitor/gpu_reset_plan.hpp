// The GPUReset controller's decisions as a state machine over observed facts
// (seed 001 "Reset Workflow"): tear down the GPU operator's operands, run the
// privileged reset Job, record the outcome, restore the labels whatever it was
// and wait for the operands to run again. The labels are only ever changed
// once their old values are on the CR and the CR holds the janitor's
// finalizer, so neither a lost write nor a deleted CR leaves them off.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "messages/wall_time.hpp"

namespace vigil::janitor {

/// seed 001 step 1: the GPU operator removes an operand from a node whose
/// deploy label is "false" and redeploys it when the label is restored.
inline constexpr std::array<std::string_view, 4> operand_deploy_labels{
  "nvidia.com/gpu.deploy.device-plugin",
  "nvidia.com/gpu.deploy.dcgm",
  "nvidia.com/gpu.deploy.dcgm-exporter",
  "nvidia.com/gpu.deploy.gpu-feature-discovery",
};

/// The `app` label of each operand's pods, in the order of operand_deploy_labels.
inline constexpr std::array<std::string_view, 4> operand_apps{
  "nvidia-device-plugin-daemonset",
  "nvidia-dcgm",
  "nvidia-dcgm-exporter",
  "gpu-feature-discovery",
};

/// The value vigil writes; a label holding anything else at restore time was
/// changed by someone else and is left alone.
inline constexpr std::string_view torn_down_value = "false";

/// The GPU operator deploys an operand where its deploy label holds this.
inline constexpr std::string_view deployed_value = "true";

/// On every GPUReset the janitor works on, before it changes any label: a
/// deletion then waits until the saved labels are back (seed 001 step 5).
/// Removed once the labels are restored (Succeeded, Failed, or deleted).
inline constexpr std::string_view restore_finalizer = "vigil.dev/restore-operand-labels";

/// GPU feature discovery's product label: the gpu_type of the metrics.
inline constexpr std::string_view gpu_product_label = "nvidia.com/gpu.product";

/// status.phase of the GPUReset CR.
enum class reset_phase { pending, tearing_down, resetting, restoring, succeeded, failed };

std::string_view to_string(reset_phase phase); ///< "TearingDown", …
std::optional<reset_phase> parse_reset_phase(std::string_view text);

/// The GPUReset CR's metadata and spec, as the controller read them.
struct gpu_reset_request {
  std::string name; ///< metadata.name
  std::string uid;  ///< metadata.uid, for the Job's ownerReference; may be empty
  std::string node_name;
  std::string gpu_uuid; ///< spec.gpuUUIDs[0]
  std::string reason;
  std::string source_event_id;
  bool has_finalizer = false;      ///< metadata.finalizers holds restore_finalizer
  bool deletion_requested = false; ///< metadata.deletionTimestamp is set
};

/// One entry of status.conditions.
struct reset_condition {
  std::string type; ///< OperandsTornDown, ResetJobCompleted, LabelsRestored, Complete
  bool status = false;
  std::string reason;
  std::string message;
  wall_time last_transition{};
};

/// status of the GPUReset CR: everything the plan needs to resume after a restart.
struct gpu_reset_status {
  reset_phase phase = reset_phase::pending;
  std::vector<reset_condition> conditions;
  std::optional<wall_time> started_at;
  std::optional<wall_time> completed_at;
  std::string job_name;
  std::optional<wall_time> job_created_at;
  /// The Job's completion (or failure, or when the janitor gave up on it).
  std::optional<wall_time> job_completed_at;
  std::string failure_reason; ///< set: the outcome is a failure (also while restoring)
  /// Deploy labels before the teardown; "" where the label was absent.
  /// Written, and read back, before any of them is changed.
  std::map<std::string, std::string> saved_labels;
  std::string gpu_type; ///< the node's gpu_product_label at the start ("" if none)
};

/// The reset Job as the controller last saw it.
struct job_observation {
  bool active = false;
  bool succeeded = false;
  bool failed = false;
  bool deadline_exceeded = false; ///< condition Failed, reason DeadlineExceeded
  std::optional<int> exit_code;   ///< of the reset container, once terminated
  std::string message;
  /// status.completionTime, or the Failed condition's lastTransitionTime.
  std::optional<wall_time> finished_at;
};

/// What the controller re-read before each reconcile (level-based).
struct reset_observation {
  wall_time now{};
  bool node_exists = true;
  std::map<std::string, std::string> node_labels;
  std::size_t operand_pods_on_node = 0; ///< pods of the four operands still on the node
  /// Deploy labels of the operands with a pod running on the node (phase
  /// Running, not being deleted, not reported unready).
  std::set<std::string> running_operands;
  std::optional<job_observation> job; ///< nullopt: no Job named status.jobName
  /// Pods of the reset Job (status.jobName) still on the node: not ended,
  /// those being deleted included (the Job's deadline or a deletion stops
  /// them within their grace period).
  std::size_t reset_pods_on_node = 0;
};

/// Config `janitor.gpu_reset.*`.
struct gpu_reset_options {
  std::string job_namespace = "vigil-system";
  std::string image = "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04"; ///< has nvidia-smi
  std::string service_account =
    "vigil-gpu-reset"; ///< dedicated, minimal (seed 001 Security)
  std::string script_config_map = "vigil-gpu-reset-script"; ///< holds gpu-reset.sh
  std::string inline_script; ///< non-empty: run with sh -c instead of the ConfigMap
  std::string runtime_class; ///< "nvidia" where it is not the default; "" leaves it out
  std::chrono::seconds teardown_timeout{300}; ///< operands must leave within, 5 min
  std::chrono::seconds job_timeout{1500};     ///< Job activeDeadlineSeconds, 25 min
  /// After the labels are restored, the operands must run again within, 5 min.
  std::chrono::seconds redeploy_timeout{300};
  std::chrono::seconds job_ttl_after_finished{3600}; ///< then Kubernetes deletes it
};

/// seed 001 "Metrics": gpu_reset_failure_reasons_total{reason}.
namespace failure_reason {
inline constexpr std::string_view teardown_failed = "teardown_failed";
inline constexpr std::string_view job_create_failed = "job_create_failed";
inline constexpr std::string_view reset_command_failed = "reset_command_failed";
inline constexpr std::string_view health_check_failed = "health_check_failed";
/// A process the device plugin does not know of still holds the GPU (seed
/// 000 §3.1): nothing was reset.
inline constexpr std::string_view gpu_in_use = "gpu_in_use";
inline constexpr std::string_view job_failed = "job_failed";
inline constexpr std::string_view timeout = "timeout";
/// The labels are back but the operands did not run again in time: the GPU
/// is not usable through Kubernetes, whatever the reset did.
inline constexpr std::string_view redeploy_failed = "redeploy_failed";
/// The deploy labels could not be put back (every PATCH refused for the
/// redeploy timeout from the first attempt): the operands stay off the node
/// until a person does it. Takes the place of an earlier failure reason.
inline constexpr std::string_view labels_not_restored = "labels_not_restored";
} // namespace failure_reason

/// How long a reset Job's pod that is still on the node is waited for after
/// the Job ended (or its deadline passed) before the labels go back anyway:
/// its termination grace period (30 s by default) and the garbage
/// collector's delay, with room to spare. A pod still there by then is on a
/// node whose kubelet no longer acts, where no operand can start either.
inline constexpr std::chrono::seconds reset_pod_exit_wait{120};

/// How long past its activeDeadlineSeconds a reset Job is given to be
/// reported failed by Kubernetes before the janitor gives up on it itself.
inline constexpr std::chrono::seconds job_deadline_grace{10};

/// The longest a GPUReset can run by the plan's own timeouts: the teardown,
/// the Job to its deadline, its pod leaving the node, the labels back
/// (within the redeploy timeout) and the operands running again (within it
/// again). The control plane's CR timeout must outlast it.
constexpr std::chrono::seconds longest_gpu_reset(std::chrono::seconds teardown,
                                                 std::chrono::seconds job,
                                                 std::chrono::seconds redeploy) {
  return teardown + job + job_deadline_grace + reset_pod_exit_wait + 2 * redeploy;
}

/// gpu-reset.sh's exit codes (runtime/install/assets/gpu-reset.sh).
namespace reset_exit_code {
inline constexpr int usage = 64;
inline constexpr int reset_command_failed = 2;
inline constexpr int health_check_failed = 3;
inline constexpr int gpu_in_use = 5;
} // namespace reset_exit_code

/// What the controller should do now, in this order, each only once the one
/// before it succeeded: add the finalizer, delete the Job, patch labels,
/// create the Job, write the status, remove the finalizer; then, when
/// `again`, take the CR a step further at once from the server's answer.
struct reset_step {
  bool add_finalizer = false; ///< restore_finalizer onto the CR
  /// Merge-patch of node labels: a value sets, nullopt removes.
  std::map<std::string, std::optional<std::string>> label_patch;
  std::optional<std::string> create_job; ///< the Job JSON to POST
  bool delete_job = false;               ///< propagationPolicy Background
  gpu_reset_status status;               ///< the CR status to write when status_changed
  bool status_changed = false;
  /// The labels are back: the CR may go (restore_finalizer off it, if there).
  bool remove_finalizer = false;
  /// The next step needs only what this one wrote (the saved labels, the
  /// finalizer) to be confirmed by the server.
  bool again = false;
  std::optional<std::chrono::seconds> requeue_after;
  bool finished = false;          ///< reached Succeeded or Failed in this step (metrics)
  std::vector<std::string> notes; ///< log lines, e.g. labels left alone
};

/// One reconcile: from the CR (its status and metadata as the server last
/// returned them) and the observed facts to the next actions. Pure; call it
/// again after acting, with fresh observations. A CR whose deletion was
/// requested gets its labels restored (once a running reset Job has ended)
/// and then loses the finalizer; its status is no longer written.
reset_step reconcile_gpu_reset(const gpu_reset_request& request,
                               const gpu_reset_status& status,
                               const reset_observation& observed,
                               const gpu_reset_options& options = {});

/// seed 001 "Metrics", gpu_reset_duration_seconds: from the CR's creation to
/// the reset Job's completion (to the failure where no Job ran); nullopt
/// before the reset ended. `created` = metadata.creationTimestamp (startedAt
/// where it is unknown).
std::optional<double> reset_duration_seconds(wall_time created,
                                             const gpu_reset_status& status);

/// The caller could not create the Job (API error after retries): fails the
/// reset and moves on to restoring the labels.
gpu_reset_status job_create_failed(gpu_reset_status status, const std::string& message,
                                   wall_time now);

/// "vigil-gpu-reset-<cr>", shortened with a hash suffix to 63 characters.
std::string reset_job_name(std::string_view cr_name);

/// `prefix` + `cr_name` as a Job name: cut to 63 characters with a hash of
/// `cr_name` as suffix when longer, so distinct CRs keep distinct Jobs.
std::string job_name_for(std::string_view prefix, std::string_view cr_name);

/// seed 001 step 2: the privileged batch/v1 Job pinned to the node by
/// nodeName, tolerating every taint (the node is quarantined), with the GPU
/// UUID, the dedicated ServiceAccount, /dev/kmsg for the result line and
/// activeDeadlineSeconds = job_timeout.
nlohmann::json build_reset_job(const gpu_reset_request& request,
                               const std::string& job_name,
                               const gpu_reset_options& options);

/// The CR's status object (camelCase, RFC 3339 times) for the status subresource.
nlohmann::json status_json(const gpu_reset_status& status);

} // namespace vigil::janitor
