// What the janitor reads from and writes to the API server: GPUReset and
// RebootNode CRs with their status, the Node's labels and boot ID, the
// operand pods on a node, the reset Job's state, and the reboot Job. Pure
// code; the janitor actor sends the requests through the gateway.
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
/// one UUID, seed 000 §1.1).
expected<gpu_reset_object> read_gpu_reset(const nlohmann::json& cr);

/// status.phase of a RebootNode.
enum class reboot_phase { pending, rebooting, succeeded, failed };
std::string_view to_string(reboot_phase phase);

/// Where the nvidia-bug-report.sh output of a failed reset went (status.bugReport).
struct bug_report_status {
  std::string job;     ///< the Job that ran it; "" when none was started
  std::string path;    ///< "<node>:<file>": on the node's disk, which the reboot keeps
  std::string outcome; ///< "" while it runs; "collected", or why not
};

struct reboot_status {
  reboot_phase phase = reboot_phase::pending;
  /// When the reboot itself was asked for (after any bug report): the reboot
  /// timeout counts from here.
  std::optional<wall_time> started_at;
  std::optional<wall_time> completed_at;
  std::string job_name;
  std::string boot_id_before;
  std::string boot_id_after;
  std::string failure_reason; ///< "job_create_failed", "timeout", "node_not_found"
  std::string message;
  bug_report_status bug_report;
};

struct reboot_object {
  std::string name;
  std::string uid;
  std::string node_name;
  std::string reason;
  /// spec.collectBugReport: a GPU reset failed before this reboot; its
  /// evidence is collected first, before the reboot wipes it.
  bool collect_bug_report = false;
  reboot_status status;
  wall_time created{};
};

expected<reboot_object> read_reboot_node(const nlohmann::json& cr);

/// The RebootNode's status object, with one condition "Complete" once terminal.
nlohmann::json reboot_status_json(const reboot_status& status);

/// Config `janitor.bug_report.*`: nvidia-bug-report.sh run on the node before
/// a reboot that follows a failed reset, its output kept on the node's disk.
struct bug_report_options {
  bool enabled = true;
  std::string host_directory = "/var/log/vigil/bug-reports"; ///< on the node
  std::chrono::seconds timeout{600}; ///< then the reboot goes on without it
};

/// Config `janitor.reboot.*`.
struct reboot_options {
  std::string job_namespace = "vigil-system";
  std::string image = "busybox:1.36"; ///< needs nsenter (and chroot, for the bug report)
  std::string service_account = "vigil-reboot";
  std::chrono::seconds timeout{1800}; ///< new boot ID and Ready within, 30 min
  bug_report_options bug_report;
};

/// "vigil-reboot-<cr>", shortened with a hash suffix to 63 characters.
std::string reboot_job_name(std::string_view cr_name);

/// A privileged Job on the node (hostPID, nodeName) that enters the host's
/// namespaces and runs `systemctl reboot`.
nlohmann::json build_reboot_job(const reboot_object& cr, const std::string& job_name,
                                const reboot_options& options);

/// "vigil-bugreport-<cr>", shortened with a hash suffix to 63 characters.
std::string bug_report_job_name(std::string_view cr_name);

/// A privileged Job on the node that runs the host's nvidia-bug-report.sh
/// (chroot into the host's root) writing `file` under the configured host
/// directory; bounded by the bug report's timeout.
nlohmann::json build_bug_report_job(const reboot_object& cr, const std::string& job_name,
                                    const std::string& file,
                                    const reboot_options& options);

/// One step of the RebootNode controller: Pending → Rebooting (boot ID
/// recorded) → for a reboot after a failed reset, the bug report Job, waited
/// for until it ends or times out (its failure never stops the reboot) → the
/// reboot Job (once the baseline is stored) → Succeeded (boot ID changed,
/// Ready) or Failed.
struct reboot_step {
  reboot_status status;
  bool status_changed = false;
  std::optional<std::string> create_job; ///< the Job JSON to POST
  bool finished = false;
};

/// `node`: nullopt when the Node does not exist. `bug_report`: the bug report
/// Job as last read, while status.bugReport names one still running (nullopt:
/// not read, or gone).
reboot_step reconcile_reboot(const reboot_object& cr,
                             const std::optional<node_boot_observation>& node,
                             wall_time now, const reboot_options& options,
                             const std::optional<job_observation>& bug_report = {});

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

/// The pods of Job `job_name` in `job_namespace` among a PodList (by the
/// Job controller's `batch.kubernetes.io/job-name` label, or the older
/// `job-name`) that have not ended: phase neither Succeeded nor Failed,
/// those being deleted included.
std::size_t count_job_pods(const nlohmann::json& pod_list, std::string_view job_namespace,
                           std::string_view job_name);

/// A Job's JSON as the reset plan sees it.
job_observation read_job(const nlohmann::json& job);

/// The exit code of the first terminated container among a Job's pods
/// (labelSelector job-name=<job>): gpu-reset.sh's verdict.
std::optional<int> terminated_exit_code(const nlohmann::json& pod_list);

/// Merge patch of node labels: a value sets, nullopt removes.
std::string
label_patch_body(const std::map<std::string, std::optional<std::string>>& patch);

} // namespace vigil::janitor
