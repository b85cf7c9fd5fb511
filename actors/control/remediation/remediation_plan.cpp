#include "actors/control/remediation/remediation_plan.hpp"

#include <algorithm>

#include <array>
#include <cctype>
#include <exception>
#include <string>
#include <utility>

namespace vigil::control {

namespace {

constexpr std::array<std::pair<remediation_kind, std::string_view>, 7> kind_names{{
  {remediation_kind::none, "None"},
  {remediation_kind::gpu_reset, "GPUReset"},
  {remediation_kind::reboot_node, "RebootNode"},
  {remediation_kind::terminate_node, "TerminateNode"},
  {remediation_kind::provider_hook, "ProviderHook"},
  {remediation_kind::manual, "Manual"},
  {remediation_kind::custom, "Custom"},
}};

struct gpu_model {
  std::string_view name; ///< a whole word of the product name, upper case
  gpu_architecture arch;
};

// seed 001 "Scope of Support" needs the generation of a GPU; product names
// carry the model as one word ("NVIDIA-H100-80GB-HBM3", "Tesla V100-SXM2-32GB").
constexpr std::array<gpu_model, 32> model_table{{
  {"P4", gpu_architecture::pascal},       {"P40", gpu_architecture::pascal},
  {"P100", gpu_architecture::pascal},     {"V100", gpu_architecture::volta},
  {"V100S", gpu_architecture::volta},     {"T4", gpu_architecture::turing},
  {"A2", gpu_architecture::ampere},       {"A10", gpu_architecture::ampere},
  {"A10G", gpu_architecture::ampere},     {"A16", gpu_architecture::ampere},
  {"A30", gpu_architecture::ampere},      {"A40", gpu_architecture::ampere},
  {"A100", gpu_architecture::ampere},     {"A800", gpu_architecture::ampere},
  {"A4000", gpu_architecture::ampere},    {"A5000", gpu_architecture::ampere},
  {"A6000", gpu_architecture::ampere},    {"L4", gpu_architecture::ada},
  {"L20", gpu_architecture::ada},         {"L40", gpu_architecture::ada},
  {"L40S", gpu_architecture::ada},        {"H20", gpu_architecture::hopper},
  {"H100", gpu_architecture::hopper},     {"H200", gpu_architecture::hopper},
  {"H800", gpu_architecture::hopper},     {"GH200", gpu_architecture::hopper},
  {"B100", gpu_architecture::blackwell},  {"B200", gpu_architecture::blackwell},
  {"B300", gpu_architecture::blackwell},  {"GB200", gpu_architecture::blackwell},
  {"GB300", gpu_architecture::blackwell}, {"RTX PRO 6000", gpu_architecture::blackwell},
}};

bool is_word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0;
}

std::string upper(std::string_view text) {
  std::string out(text);
  for (auto& c : out)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// `word` occurs in `text` with no letter or digit on either side.
bool contains_word(std::string_view text, std::string_view word) {
  for (auto pos = text.find(word); pos != std::string_view::npos;
       pos = text.find(word, pos + 1)) {
    auto end = pos + word.size();
    bool left_ok = pos == 0 || !is_word_char(text[pos - 1]);
    bool right_ok = end == text.size() || !is_word_char(text[end]);
    if (left_ok && right_ok)
      return true;
  }
  return false;
}

bool uuid_in_topology(const agent::gpu_metadata& topology, std::string_view uuid) {
  for (const auto& gpu : topology.gpus)
    if (gpu.uuid == uuid)
      return true;
  return false;
}

remediation_plan make_plan(remediation_kind kind, recommended_action action,
                           std::string group, std::string reason) {
  remediation_plan plan;
  plan.kind = kind;
  plan.action = action;
  plan.group = std::move(group);
  plan.reason = std::move(reason);
  return plan;
}

remediation_plan reboot_fallback(std::string why) {
  auto plan = make_plan(remediation_kind::reboot_node, recommended_action::restart_bm,
                        std::string{restart_group},
                        "COMPONENT_RESET fell back to reboot: " + std::move(why));
  plan.fell_back = true;
  return plan;
}

remediation_plan plan_reset(std::string_view gpu_uuid, const node_gpu_facts& facts,
                            const remediation_options& options) {
  if (gpu_uuid.empty())
    return reboot_fallback("event names no GPU_UUID entity");
  auto support = check_reset_support(facts, gpu_uuid, options.allow_unknown_model);
  if (!support.supported)
    return reboot_fallback(support.reason);
  auto plan = make_plan(remediation_kind::gpu_reset, recommended_action::component_reset,
                        reset_group(gpu_uuid), "COMPONENT_RESET");
  plan.gpu_uuid = std::string{gpu_uuid};
  return plan;
}

// CUSTOM (NVSentinel's customRecommendedAction): the operator's own CR when
// the config names one for it; else nobody knows what to do, and a person looks.
remediation_plan plan_custom(std::string_view custom_action, std::string_view gpu_uuid,
                             const remediation_options& options) {
  const auto label = custom_action.empty() ? std::string{"CUSTOM"}
                                           : "CUSTOM " + std::string{custom_action};
  const auto* custom = find_custom_action(options, custom_action);
  if (custom_action.empty() || custom == nullptr)
    return make_plan(remediation_kind::manual, recommended_action::custom, {},
                     label
                       + ": no remediation.custom_actions entry names it, node stays "
                         "quarantined");
  auto plan = make_plan(remediation_kind::custom, recommended_action::custom,
                        std::string{custom_group_prefix} + custom->name, label);
  plan.gpu_uuid = std::string{gpu_uuid};
  plan.custom = *custom;
  return plan;
}

} // namespace

std::string_view to_string(remediation_kind kind) {
  for (const auto& [k, name] : kind_names)
    if (k == kind)
      return name;
  return "None";
}

std::optional<remediation_kind> parse_remediation_kind(std::string_view text) {
  for (const auto& [k, name] : kind_names)
    if (name == text)
      return k;
  return std::nullopt;
}

int strength(remediation_kind kind) {
  switch (kind) {
    case remediation_kind::gpu_reset: return 1;
    case remediation_kind::reboot_node: return 2;
    case remediation_kind::terminate_node:
    case remediation_kind::provider_hook: return 3;
    case remediation_kind::none:
    case remediation_kind::manual:
    case remediation_kind::custom: break;
  }
  return 0;
}

bool is_automatic(remediation_kind kind) {
  return kind != remediation_kind::none && kind != remediation_kind::manual;
}

const custom_remediation* find_custom_action(const remediation_options& options,
                                             std::string_view name) {
  for (const auto& custom : options.custom_actions)
    if (custom.name == name)
      return &custom;
  return nullptr;
}

std::string reset_group(std::string_view gpu_uuid) {
  return std::string{reset_group_prefix} + std::string{gpu_uuid};
}

bool is_reset_group(std::string_view group) {
  return group.size() > reset_group_prefix.size()
         && group.substr(0, reset_group_prefix.size()) == reset_group_prefix;
}

std::string_view to_string(gpu_architecture arch) {
  switch (arch) {
    case gpu_architecture::pascal: return "Pascal";
    case gpu_architecture::volta: return "Volta";
    case gpu_architecture::turing: return "Turing";
    case gpu_architecture::ampere: return "Ampere";
    case gpu_architecture::ada: return "Ada";
    case gpu_architecture::hopper: return "Hopper";
    case gpu_architecture::blackwell: return "Blackwell";
    case gpu_architecture::unknown: break;
  }
  return "unknown";
}

gpu_architecture architecture_of(std::string_view product_name) {
  auto name = upper(product_name);
  for (auto& c : name)
    if (c == '-' || c == '_')
      c = ' ';
  // The longest matching word wins ("V100S" over "V100", "GH200" over "H200").
  const gpu_model* best = nullptr;
  for (const auto& model : model_table)
    if (contains_word(name, model.name)
        && (best == nullptr || model.name.size() > best->name.size()))
      best = &model;
  return best != nullptr ? best->arch : gpu_architecture::unknown;
}

node_gpu_facts gpu_facts_from_labels(const std::map<std::string, std::string>& labels,
                                     const agent_gpu_facts* agent) {
  auto label = [&](std::string_view key) {
    auto it = labels.find(std::string(key));
    return it == labels.end() ? std::string{} : it->second;
  };
  node_gpu_facts facts;
  facts.product_name = label(gpu_fact_label::product);
  const auto strategy = label(gpu_fact_label::mig_strategy);
  const auto mig_config = label(gpu_fact_label::mig_config);
  facts.mig_enabled = strategy == "single" || strategy == "mixed"
                      || (!mig_config.empty() && mig_config != "all-disabled");
  facts.vgpu_guest = label(gpu_fact_label::vgpu_present) == "true";
  int count = 0;
  try {
    count = std::stoi(label(gpu_fact_label::count));
  } catch (const std::exception&) {
    count = 0; // absent or not a number: not an 8-GPU board as far as we know
  }
  if (agent != nullptr && facts.product_name.empty())
    facts.product_name = agent->product;
  if (agent != nullptr && count == 0)
    count = std::max(agent->gpu_count, 0);
  facts.nvswitch_fabric = architecture_of(facts.product_name) == gpu_architecture::ampere
                          && facts.product_name.find("SXM") != std::string::npos
                          && count >= 8;
  // The agent saw the NVLinks themselves: an NVSwitch at their far end is a
  // fact where the product name and count were a guess. Seeing none is no
  // proof (links that are down list no far end), so it keeps the guess.
  if (agent != nullptr && agent->nvswitch_count > 0)
    facts.nvswitch_fabric = true;
  if (auto v = label(gpu_fact_label::nvswitch_fabric); v == "true" || v == "false")
    facts.nvswitch_fabric = v == "true";
  if (auto v = label(gpu_fact_label::mig_vgpu_guest); v == "true" || v == "false")
    facts.mig_vgpu_guest = v == "true";
  return facts;
}

reset_support check_reset_support(const node_gpu_facts& facts, std::string_view gpu_uuid,
                                  bool allow_unknown_model) {
  if (facts.topology != nullptr && !uuid_in_topology(*facts.topology, gpu_uuid))
    return {false, "GPU " + std::string{gpu_uuid} + " is not in the node's topology"};
  if (facts.mig_vgpu_guest)
    return {false, "MIG-backed vGPU guest"};
  if (facts.vgpu_guest)
    return {false, "vGPU guest: the physical GPU belongs to the host"};
  if (facts.mig_enabled)
    return {false, "MIG enabled: its GPU instances would have to go first"};
  auto arch = architecture_of(facts.product_name);
  auto model = facts.product_name.empty() ? std::string{"(unknown)"} : facts.product_name;
  if (arch == gpu_architecture::unknown && !allow_unknown_model)
    return {false, "GPU model " + model + " is not in the model table"};
  if (arch != gpu_architecture::unknown && arch < gpu_architecture::ampere)
    return {false, "pre-Ampere GPU " + model + " (" + std::string{to_string(arch)}
                     + ") resets NVLink peers together"};
  if (arch == gpu_architecture::ampere && facts.nvswitch_fabric)
    return {false, "Ampere NVSwitch system " + model + " needs Fabric Manager"};
  return {true, {}};
}

bool operator==(const remediation_plan& a, const remediation_plan& b) {
  return a.kind == b.kind && a.action == b.action && a.group == b.group
         && a.gpu_uuid == b.gpu_uuid && a.reason == b.reason && a.fell_back == b.fell_back
         && a.collect_bug_report == b.collect_bug_report && a.custom == b.custom;
}

std::string gpu_uuid_of(const health_event& event) {
  for (const auto& e : event.entities)
    if (e.type == "GPU_UUID")
      return e.value;
  return {};
}

remediation_plan plan_remediation(recommended_action action, std::string_view gpu_uuid,
                                  const node_gpu_facts& facts,
                                  const remediation_options& options,
                                  std::string_view custom_action) {
  auto name = std::string{to_string(action)};
  if (action == recommended_action::custom)
    return plan_custom(custom_action, gpu_uuid, options);
  switch (action) {
    case recommended_action::none:
      return make_plan(remediation_kind::none, action, {}, name);
    case recommended_action::component_reset: return plan_reset(gpu_uuid, facts, options);
    case recommended_action::restart_vm:
    case recommended_action::restart_bm:
      return make_plan(remediation_kind::reboot_node, action, std::string{restart_group},
                       name);
    case recommended_action::replace_vm:
      return make_plan(options.replace == replace_target::provider_hook
                         ? remediation_kind::provider_hook
                         : remediation_kind::terminate_node,
                       action, std::string{replace_group}, name);
    case recommended_action::contact_support:
    case recommended_action::run_fielddiag:
    case recommended_action::run_dcgmeud:
    case recommended_action::custom:
    case recommended_action::unknown: break;
  }
  return make_plan(remediation_kind::manual, action, {},
                   name + ": no automatic action, node stays quarantined");
}

remediation_plan plan_remediation(const health_event& event, const node_gpu_facts& facts,
                                  const remediation_options& options) {
  return plan_remediation(event.action, gpu_uuid_of(event), facts, options,
                          event.custom_action);
}

} // namespace vigil::control
