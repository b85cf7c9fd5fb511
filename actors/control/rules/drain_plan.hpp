// Drain planning as pure code: which pods of a node to evict for an action
// (full drain, or a partial drain for COMPONENT_RESET per seed 000 §3.1), and
// the drain's progress as a state machine driven by results and a clock.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actors/control/rules/quarantine_rules.hpp"
#include "messages/expected.hpp"
#include "messages/health_event.hpp"
#include "messages/wall_time.hpp"

namespace vigil::control {

enum class drain_mode {
  immediate,           ///< evict now (Eviction API, PDBs respected, 429 retried)
  allow_completion,    ///< never evict; wait for the pod to finish on its own
  delete_after_timeout ///< wait up to the namespace's timeout, then delete
};

std::string_view to_string(drain_mode mode);

/// Mode of the namespaces matching `namespace_pattern` (ECMAScript regex,
/// whole-name match).
struct namespace_drain_mode {
  std::string namespace_pattern;
  drain_mode mode = drain_mode::immediate;
  std::chrono::minutes timeout{0}; ///< delete_after_timeout only
};

struct drain_config {
  /// First matching entry decides; a namespace matching none gets default_mode.
  std::vector<namespace_drain_mode> namespaces;
  drain_mode default_mode = drain_mode::immediate;
  /// Pods in these namespaces are never drained (whole-name regex).
  std::string system_namespaces =
    "kube-system|kube-public|kube-node-lease|vigil|gpu-operator|network-operator";
  /// vigil's own namespaces (exact names): where `vigil control` runs
  /// (control.lease_namespace) and where the janitor runs its Jobs
  /// (janitor.job_namespace). Their pods are never drained.
  std::vector<std::string> vigil_namespaces{"vigil", "vigil-system"};
  /// Wait after an eviction answered 429 (PDB) or failed; doubles per retry of
  /// the same pod up to eviction_retry_max. Defaults 5 s and 2 min.
  std::chrono::seconds eviction_retry{5};
  std::chrono::seconds eviction_retry_max{120};
};

/// Names the first bad field (an invalid regex), or ok.
status validate(const drain_config& config);

/// A pod of the node, as the gateway reports it (JSON-free).
struct pod_info {
  std::string ns;
  std::string name;
  std::string owner_kind; ///< "DaemonSet", "ReplicaSet", "Job", … ; "" when none
  bool mirror = false;    ///< mirror/static pod (kubernetes.io/config.mirror)
  bool finished = false;  ///< phase Succeeded or Failed
  bool requests_gpu = false;
  /// The GPUs the pod holds: from the node agent's PodResources report, else
  /// from the pod-devices annotation; nullopt when neither says.
  std::optional<std::vector<std::string>> gpu_uuids;
  std::string gpu_source; ///< "kubelet", "annotation", "no GPU request", or ""
  bool pdb_protected = false;
  std::map<std::string, std::string> labels; ///< metadata.labels
  /// spec.resourceClaims is not empty: the pod may hold devices through
  /// Dynamic Resource Allocation, and its namespace's ResourceClaims say which.
  bool claims_resources = false;
};

/// The label vigil puts on its own Jobs and their pod templates (the janitor's
/// GPU reset and reboot Jobs), and its value.
inline constexpr std::string_view vigil_job_label = "app.kubernetes.io/managed-by";
inline constexpr std::string_view vigil_job_label_value = "vigil";

/// Whether `pod` is vigil's own, which no drain may evict or delete: a pod in
/// one of config.vigil_namespaces, or a pod owned by a Job and carrying vigil's
/// Job label, wherever it runs. seed 000 §4.3 case 3: a full drain for a
/// RebootNode may start while a GPUReset's Job still runs on the node.
bool is_vigils_own_pod(const pod_info& pod, const drain_config& config);

enum class drain_scope { none, partial, full };
std::string_view to_string(drain_scope scope);

/// The drain this node completed earlier in the current quarantine.
enum class drain_history { none, partial_done, full_done };

struct drain_request {
  recommended_action action = recommended_action::none;
  std::vector<std::string> gpu_uuids; ///< GPU_UUID entities of the event
  std::optional<stage_override> overrides;
  drain_history history = drain_history::none;
  /// Why the kubelet's GPU allocations could not be used, for the journal
  /// when a partial drain falls back to full; "" when they could.
  std::string gpu_mapping_note;
};

/// The drain a quarantined node's active records ask for (seed 000 §3.1), or
/// nullopt when none does: a record whose action is NONE needs no drain.
/// COMPONENT_RESET records alone give a partial drain of their GPUs (GPU_UUID
/// subjects and the GPU_UUIDs they were reported with); any other action a
/// full drain. drainOverrides: force when any record forces, skip only when
/// every record skips.
std::optional<drain_request> desired_drain(const std::vector<active_record>& records);

/// Names what a request drains: "full", or "partial:GPU-a,GPU-b" (sorted).
/// Two requests with the same key drain the same pods.
std::string drain_key(const drain_request& request);

struct pod_ref {
  std::string ns;
  std::string name;

  friend bool operator==(const pod_ref& a, const pod_ref& b) {
    return a.ns == b.ns && a.name == b.name;
  }
  friend bool operator<(const pod_ref& a, const pod_ref& b) {
    return a.ns != b.ns ? a.ns < b.ns : a.name < b.name;
  }
};

struct pod_eviction {
  pod_ref pod;
  drain_mode mode = drain_mode::immediate;
  std::chrono::minutes timeout{0};
  bool pdb_protected = false;
  std::string owner_kind;                       ///< for the journal's attribution
  std::optional<std::vector<std::string>> gpus; ///< the GPUs it held, when known
  std::string gpu_source;                       ///< where `gpus` came from
};

struct skipped_pod {
  pod_ref pod;
  std::string reason;
};

struct drain_plan {
  drain_scope scope = drain_scope::none;
  std::string why; ///< why this scope, for the journal
  std::vector<pod_eviction> evict;
  std::vector<skipped_pod> skipped;
};

/// Decides the drain for `request` over the node's `pods`. `config` must have
/// passed validate().
drain_plan plan_drain(const std::vector<pod_info>& pods, const drain_request& request,
                      const drain_config& config);

/// What the drain asks the gateway to do now.
struct drain_step {
  enum class kind { evict, delete_pod };
  kind what = kind::evict;
  pod_ref pod;

  friend bool operator==(const drain_step& a, const drain_step& b) {
    return a.what == b.what && a.pod == b.pod;
  }
};

/// The answer to a drain_step.
enum class step_result {
  accepted,          ///< eviction/deletion accepted; the pod is terminating
  too_many_requests, ///< 429: a PDB forbids it now
  not_found,         ///< the pod is already gone
  failed,            ///< any other error; retried like a 429
};

enum class pod_drain_state {
  pending,             ///< immediate: eviction not yet asked
  in_request,          ///< a step was handed out; waiting for its result
  retry_wait,          ///< 429 or failure; asked again at retry_at
  terminating,         ///< accepted; waiting for the pod to be gone
  awaiting_completion, ///< allow_completion / delete_after_timeout before deadline
  done,
};

std::string_view to_string(pod_drain_state state);

enum class drain_status { in_progress, succeeded, cancelled };
std::string_view to_string(drain_status status);

/// Progress of one drain. The owner calls due() on every trigger (start,
/// result, pod watch, timer at next_wakeup()) and sends the steps it returns.
class drain_progress {
public:
  drain_progress(drain_plan plan, wall_time started, drain_config config);

  /// The steps to send now; each pod has at most one step outstanding.
  std::vector<drain_step> due(wall_time now);
  void on_result(const pod_ref& pod, step_result result, wall_time now);
  /// The pod was deleted or finished (pod watch).
  void on_pod_gone(const pod_ref& pod);
  /// seed 000 §3.2: an uncordon (every event recovered) cancels the drain.
  void cancel(std::string why);

  drain_status status() const;
  const drain_plan& plan() const { return plan_; }
  std::string cancel_reason() const { return cancel_reason_; }
  std::optional<pod_drain_state> state_of(const pod_ref& pod) const;
  /// The earliest retry or deadline still ahead; nullopt when none.
  std::optional<wall_time> next_wakeup() const;

private:
  struct pod_progress {
    pod_eviction target;
    pod_drain_state state = pod_drain_state::pending;
    wall_time not_before{}; ///< retry time or delete deadline
    std::chrono::seconds backoff{0};
  };

  std::optional<drain_step> step_for(pod_progress& p, wall_time now) const;

  drain_plan plan_;
  drain_config config_;
  std::map<pod_ref, pod_progress> pods_;
  bool cancelled_ = false;
  std::string cancel_reason_;
};

} // namespace vigil::control
