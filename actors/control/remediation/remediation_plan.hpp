// From a RecommendedAction to what vigil does about it: the equivalence group,
// the custom resource kind, the reboot fallback where a GPU cannot be reset,
// and the operator's own remediations for CUSTOM events.
#pragma once

#include <array>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actors/agent/topology/gpu_metadata.hpp"
#include "messages/agent_gpu_facts.hpp"
#include "messages/health_event.hpp"

namespace vigil::control {

/// What the node actor creates (or does not) for one remediation.
enum class remediation_kind {
  none,           ///< nothing to do (RecommendedAction NONE)
  gpu_reset,      ///< a GPUReset CR
  reboot_node,    ///< a RebootNode CR
  terminate_node, ///< a TerminateNode CR
  provider_hook,  ///< REPLACE_VM handed to a configured provider hook
  manual,         ///< no automatic action: stays quarantined, condition + Event
  custom,         ///< CUSTOM: a CR of the kind remediation.custom_actions names
};

/// The CR kind ("GPUReset", "RebootNode", "TerminateNode"), "ProviderHook",
/// "Custom", "Manual" or "None".
std::string_view to_string(remediation_kind kind);
std::optional<remediation_kind> parse_remediation_kind(std::string_view text);

/// How much of the node an action disturbs: a stronger action makes a weaker
/// one redundant (a reboot resets every GPU). none/manual rank 0, and so does
/// custom: vigil does not know what an operator's remediation touches.
int strength(remediation_kind kind);

/// vigil carries it out itself, through a CR or the provider hook: every kind
/// but none and manual. Only these go through the remediation queue.
bool is_automatic(remediation_kind kind);

// seed 000 §4.1: equivalence groups name actions with the same effect.
inline constexpr std::string_view restart_group = "restart";
inline constexpr std::string_view replace_group = "replace";
inline constexpr std::string_view reset_group_prefix = "reset-";
inline constexpr std::string_view custom_group_prefix = "custom-";

/// "reset-GPU-455d8f70-…": one group per GPU, so one GPU is never reset twice
/// at once while different GPUs are distinct groups.
std::string reset_group(std::string_view gpu_uuid);
bool is_reset_group(std::string_view group);

/// GPU architecture generations, oldest first; only the order matters.
enum class gpu_architecture {
  unknown,
  pascal,
  volta,
  turing,
  ampere,
  ada,
  hopper,
  blackwell
};

std::string_view to_string(gpu_architecture arch);

/// The architecture of a product name as nvidia-smi or the
/// nvidia.com/gpu.product label spell it ("NVIDIA H100 80GB HBM3",
/// "NVIDIA-A100-SXM4-80GB", "Tesla V100-SXM2-32GB"). unknown when no row of
/// the model table matches.
gpu_architecture architecture_of(std::string_view product_name);

/// What the node actor knows about the node's GPUs when it plans a reset.
struct node_gpu_facts {
  std::string product_name;     ///< nvidia.com/gpu.product or nvidia-smi name; "" unknown
  bool nvswitch_fabric = false; ///< GPUs joined by NVSwitch (HGX/DGX baseboards)
  bool mig_vgpu_guest = false;  ///< the node is a vGPU guest with MIG-backed vGPUs
  /// The node's gpu_metadata.json when known: a UUID it does not list is not reset.
  const agent::gpu_metadata* topology = nullptr;
  bool vgpu_guest = false;  ///< a vGPU guest: the physical GPU is the host's
  bool mig_enabled = false; ///< MIG instances carve the GPUs
};

/// The Node labels gpu_facts_from_labels reads, and only those.
namespace gpu_fact_label {
inline constexpr std::string_view product = "nvidia.com/gpu.product";
inline constexpr std::string_view count = "nvidia.com/gpu.count";
inline constexpr std::string_view mig_strategy = "nvidia.com/mig.strategy";
inline constexpr std::string_view mig_config = "nvidia.com/mig.config";
inline constexpr std::string_view vgpu_present = "nvidia.com/vgpu.present";
inline constexpr std::string_view nvswitch_fabric = "vigil.dev/nvswitch-fabric";
inline constexpr std::string_view mig_vgpu_guest = "vigil.dev/mig-vgpu-guest";
inline constexpr std::array<std::string_view, 7> all{
  product,      count,           mig_strategy,  mig_config,
  vgpu_present, nvswitch_fabric, mig_vgpu_guest};
} // namespace gpu_fact_label

/// What the Node's labels tell about its GPUs (seed 001 "Scope of Support"),
/// from facts a cluster with the GPU operator has: GPU feature discovery's
/// nvidia.com/gpu.product and nvidia.com/gpu.count, nvidia.com/vgpu.present,
/// the MIG manager's nvidia.com/mig.strategy and nvidia.com/mig.config; an
/// 8-GPU Ampere SXM board is taken as NVSwitch-based (HGX A100). When the
/// node's agent reported its GPUs (`agent`, from its heartbeat), an NVSwitch
/// it found at the far end of the NVLinks makes the node NVSwitch-based, and
/// its product name and GPU count fill in for missing labels. The explicit
/// vigil.dev/nvswitch-fabric and vigil.dev/mig-vgpu-guest labels ("true" or
/// "false") override both.
node_gpu_facts gpu_facts_from_labels(const std::map<std::string, std::string>& labels,
                                     const agent_gpu_facts* agent = nullptr);

/// Whether nvidia-smi can reset one GPU of this node on its own; `reason` says
/// why not. seed 001 "Scope of Support".
struct reset_support {
  bool supported = false;
  std::string reason;
};

reset_support check_reset_support(const node_gpu_facts& facts, std::string_view gpu_uuid,
                                  bool allow_unknown_model);

/// REPLACE_VM's target: vigil's TerminateNode CR, or a provider's own hook.
enum class replace_target { terminate_node, provider_hook };

/// An operator's own remediation for events with RecommendedAction CUSTOM
/// (NVSentinel's customRecommendedAction names it): vigil creates a CR of
/// this kind, as it does a RebootNode, and the operator's controller carries
/// it out. Config remediation.custom_actions[].
struct custom_remediation {
  std::string name;    ///< the customRecommendedAction it answers ("RESEAT_CABLE")
  std::string group;   ///< the CR's API group ("repair.example.com")
  std::string version; ///< its version ("v1")
  std::string kind;    ///< its kind ("CableReseat")
  std::string plural;  ///< its collection ("cablereseats")

  friend bool operator==(const custom_remediation& a, const custom_remediation& b) {
    return a.name == b.name && a.group == b.group && a.version == b.version
           && a.kind == b.kind && a.plural == b.plural;
  }
};

struct remediation_options {
  replace_target replace = replace_target::terminate_node;
  /// A product name that matches no model-table row is reset anyway (true) or
  /// rebooted (false, the default: seed 001 supports Ampere and newer only).
  bool allow_unknown_model = false;
  /// CUSTOM events whose customRecommendedAction names none of these are
  /// handed to a person.
  std::vector<custom_remediation> custom_actions;
};

/// The entry of `options` for customRecommendedAction `name`, or nullptr.
const custom_remediation* find_custom_action(const remediation_options& options,
                                             std::string_view name);

/// One remediation the node actor should run (or knows it cannot).
struct remediation_plan {
  remediation_kind kind = remediation_kind::none;
  /// The action this plan carries out: the requested one, or RESTART_BM for a
  /// reset that fell back to a reboot. Escalation counts attempts by it.
  recommended_action action = recommended_action::none;
  std::string group;    ///< equivalence group; "" for none and manual
  std::string gpu_uuid; ///< the GPU for gpu_reset; "" otherwise
  std::string reason;   ///< journaled: why this plan ("COMPONENT_RESET", fallback cause)
  bool fell_back = false; ///< a reset was asked for and a reboot planned instead
  /// A reboot that follows a failed GPU reset: the janitor keeps the driver's
  /// bug report before the reboot wipes the evidence (spec.collectBugReport).
  bool collect_bug_report = false;
  /// For custom: the operator's remediation whose CR carries it out.
  std::optional<custom_remediation> custom;

  friend bool operator==(const remediation_plan& a, const remediation_plan& b);
};

/// The first GPU_UUID entity of the event, or "".
std::string gpu_uuid_of(const health_event& event);

/// seed 000 §4.1: COMPONENT_RESET → reset-<UUID> (GPUReset), falling back to
/// restart (RebootNode) when the configuration cannot reset one GPU or the UUID
/// is missing; RESTART_VM, RESTART_BM → restart; REPLACE_VM → replace
/// (TerminateNode or provider hook); CONTACT_SUPPORT, RUN_FIELDDIAG and the
/// rest → manual; NONE → none. CUSTOM → custom-<name> (the CR kind that
/// options.custom_actions names for `custom_action`), manual when none does.
remediation_plan plan_remediation(recommended_action action, std::string_view gpu_uuid,
                                  const node_gpu_facts& facts,
                                  const remediation_options& options = {},
                                  std::string_view custom_action = {});

/// The same for an unhealthy event: its action, its GPU_UUID entity and its
/// customRecommendedAction.
remediation_plan plan_remediation(const health_event& event, const node_gpu_facts& facts,
                                  const remediation_options& options = {});

} // namespace vigil::control
