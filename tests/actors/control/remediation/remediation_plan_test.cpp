#include "actors/control/remediation/remediation_plan.hpp"

#include <map>

#include <gtest/gtest.h>

namespace vigil::control {
namespace {

constexpr std::string_view uuid = "GPU-455d8f70-2051-db6c-0430-ffc457bff834";

node_gpu_facts h100() {
  node_gpu_facts facts;
  facts.product_name = "NVIDIA-H100-80GB-HBM3";
  facts.nvswitch_fabric = true;
  return facts;
}

TEST(remediation_plan, component_reset_maps_to_a_per_gpu_reset_group) {
  auto plan = plan_remediation(recommended_action::component_reset, uuid, h100());
  EXPECT_EQ(plan.kind, remediation_kind::gpu_reset);
  EXPECT_EQ(plan.group, "reset-GPU-455d8f70-2051-db6c-0430-ffc457bff834");
  EXPECT_EQ(plan.gpu_uuid, uuid);
  EXPECT_EQ(plan.action, recommended_action::component_reset);
  EXPECT_FALSE(plan.fell_back);
  EXPECT_TRUE(is_reset_group(plan.group));
  EXPECT_FALSE(is_reset_group("restart"));
  EXPECT_FALSE(is_reset_group("reset-"));
}

TEST(remediation_plan, restarts_share_the_restart_group) {
  for (auto action : {recommended_action::restart_vm, recommended_action::restart_bm}) {
    auto plan = plan_remediation(action, uuid, h100());
    EXPECT_EQ(plan.kind, remediation_kind::reboot_node);
    EXPECT_EQ(plan.group, "restart");
    EXPECT_EQ(plan.gpu_uuid, "");
  }
}

TEST(remediation_plan, replace_vm_goes_to_terminate_node_or_the_provider_hook) {
  auto plan = plan_remediation(recommended_action::replace_vm, "", {});
  EXPECT_EQ(plan.kind, remediation_kind::terminate_node);
  EXPECT_EQ(plan.group, "replace");
  remediation_options options;
  options.replace = replace_target::provider_hook;
  EXPECT_EQ(plan_remediation(recommended_action::replace_vm, "", {}, options).kind,
            remediation_kind::provider_hook);
}

TEST(remediation_plan, support_and_fielddiag_are_manual) {
  for (auto action : {recommended_action::contact_support,
                      recommended_action::run_fielddiag, recommended_action::custom}) {
    auto plan = plan_remediation(action, uuid, h100());
    EXPECT_EQ(plan.kind, remediation_kind::manual) << to_string(action);
    EXPECT_EQ(plan.group, "");
    EXPECT_NE(plan.reason.find("stays quarantined"), std::string::npos);
  }
  EXPECT_EQ(plan_remediation(recommended_action::none, uuid, h100()).kind,
            remediation_kind::none);
}

// issue 19: CUSTOM carries customRecommendedAction to the CR kind the config
// names for it; a name the config does not list goes to a person.
TEST(remediation_plan, custom_actions_plan_the_configured_cr_or_a_person) {
  remediation_options options;
  options.custom_actions = {
    {"RESEAT_CABLE", "repair.example.com", "v1", "CableReseat", "cablereseats"},
    {"REFLASH_NIC", "repair.example.com", "v1", "NicReflash", "nicreflashes"}};
  health_event event;
  event.action = recommended_action::custom;
  event.custom_action = "REFLASH_NIC";
  event.entities = {{"GPU_UUID", std::string{uuid}}};
  auto plan = plan_remediation(event, h100(), options);
  EXPECT_EQ(plan.kind, remediation_kind::custom);
  EXPECT_EQ(plan.action, recommended_action::custom);
  EXPECT_EQ(plan.group, "custom-REFLASH_NIC");
  EXPECT_EQ(plan.gpu_uuid, uuid);
  ASSERT_TRUE(plan.custom.has_value());
  EXPECT_EQ(plan.custom->kind, "NicReflash");
  EXPECT_TRUE(is_automatic(plan.kind));
  EXPECT_EQ(strength(plan.kind), 0); // vigil cannot rank what it does not know
  for (const char* name : {"", "reseat_cable", "RESEAT CABLE", "UNKNOWN"}) {
    auto unknown =
      plan_remediation(recommended_action::custom, uuid, h100(), options, name);
    EXPECT_EQ(unknown.kind, remediation_kind::manual) << name;
    EXPECT_FALSE(unknown.custom.has_value()) << name;
    EXPECT_NE(unknown.reason.find("no remediation.custom_actions entry"),
              std::string::npos)
      << unknown.reason;
  }
}

TEST(remediation_plan, unsupported_configurations_fall_back_to_reboot) {
  auto v100 = h100();
  v100.product_name = "Tesla V100-SXM2-32GB";
  auto plan = plan_remediation(recommended_action::component_reset, uuid, v100);
  EXPECT_EQ(plan.kind, remediation_kind::reboot_node);
  EXPECT_EQ(plan.group, "restart");
  EXPECT_EQ(plan.action, recommended_action::restart_bm);
  EXPECT_TRUE(plan.fell_back);
  EXPECT_NE(plan.reason.find("pre-Ampere"), std::string::npos) << plan.reason;

  auto a100 = h100();
  a100.product_name = "NVIDIA A100-SXM4-80GB";
  plan = plan_remediation(recommended_action::component_reset, uuid, a100);
  EXPECT_TRUE(plan.fell_back);
  EXPECT_NE(plan.reason.find("Fabric Manager"), std::string::npos) << plan.reason;
  a100.nvswitch_fabric = false;
  EXPECT_EQ(plan_remediation(recommended_action::component_reset, uuid, a100).kind,
            remediation_kind::gpu_reset);

  auto guest = h100();
  guest.mig_vgpu_guest = true;
  plan = plan_remediation(recommended_action::component_reset, uuid, guest);
  EXPECT_TRUE(plan.fell_back);
  EXPECT_NE(plan.reason.find("MIG"), std::string::npos);

  plan = plan_remediation(recommended_action::component_reset, "", h100());
  EXPECT_TRUE(plan.fell_back);
  EXPECT_NE(plan.reason.find("GPU_UUID"), std::string::npos);
}

TEST(remediation_plan, unknown_models_reboot_unless_allowed) {
  node_gpu_facts facts;
  facts.product_name = "Mystery Accelerator 9000";
  auto plan = plan_remediation(recommended_action::component_reset, uuid, facts);
  EXPECT_TRUE(plan.fell_back);
  EXPECT_NE(plan.reason.find("model table"), std::string::npos);
  remediation_options options;
  options.allow_unknown_model = true;
  EXPECT_EQ(
    plan_remediation(recommended_action::component_reset, uuid, facts, options).kind,
    remediation_kind::gpu_reset);
}

TEST(remediation_plan, a_uuid_missing_from_the_topology_is_not_reset) {
  agent::gpu_metadata topology;
  topology.gpus.push_back(agent::gpu_info{});
  topology.gpus.back().uuid = "GPU-00000000-0000-0000-0000-000000000000";
  auto facts = h100();
  facts.topology = &topology;
  auto plan = plan_remediation(recommended_action::component_reset, uuid, facts);
  EXPECT_TRUE(plan.fell_back);
  topology.gpus.back().uuid = std::string{uuid};
  EXPECT_FALSE(
    plan_remediation(recommended_action::component_reset, uuid, facts).fell_back);
}

TEST(remediation_plan, model_table_matches_whole_words) {
  EXPECT_EQ(architecture_of("NVIDIA A10"), gpu_architecture::ampere);
  EXPECT_EQ(architecture_of("NVIDIA A100-SXM4-40GB"), gpu_architecture::ampere);
  EXPECT_EQ(architecture_of("NVIDIA-L40S"), gpu_architecture::ada);
  EXPECT_EQ(architecture_of("NVIDIA L4"), gpu_architecture::ada);
  EXPECT_EQ(architecture_of("NVIDIA GH200 480GB"), gpu_architecture::hopper);
  EXPECT_EQ(architecture_of("NVIDIA H200"), gpu_architecture::hopper);
  EXPECT_EQ(architecture_of("NVIDIA B200"), gpu_architecture::blackwell);
  EXPECT_EQ(architecture_of("Tesla T4"), gpu_architecture::turing);
  EXPECT_EQ(architecture_of("Tesla V100S-PCIE-32GB"), gpu_architecture::volta);
  EXPECT_EQ(architecture_of("nvidia-h100-80gb-hbm3"), gpu_architecture::hopper);
  EXPECT_EQ(architecture_of("NVIDIA RTX A6000"), gpu_architecture::ampere);
  EXPECT_EQ(architecture_of("XH1000"), gpu_architecture::unknown);
  EXPECT_EQ(architecture_of(""), gpu_architecture::unknown);
}

TEST(remediation_plan, uses_the_events_gpu_uuid_entity) {
  health_event event;
  event.action = recommended_action::component_reset;
  event.entities = {{"PCI", "0000:0f:00.0"}, {"GPU_UUID", std::string{uuid}}};
  EXPECT_EQ(gpu_uuid_of(event), uuid);
  EXPECT_EQ(plan_remediation(event, h100()).group, reset_group(uuid));
}

TEST(remediation_plan, kind_names_round_trip) {
  for (auto kind : {remediation_kind::none, remediation_kind::gpu_reset,
                    remediation_kind::reboot_node, remediation_kind::terminate_node,
                    remediation_kind::provider_hook, remediation_kind::manual,
                    remediation_kind::custom})
    EXPECT_EQ(parse_remediation_kind(to_string(kind)), kind);
  EXPECT_EQ(to_string(remediation_kind::gpu_reset), "GPUReset");
  EXPECT_FALSE(parse_remediation_kind("gpureset").has_value());
}

// seed 001 "Scope of Support" from the labels a GPU-operator cluster has.
TEST(remediation_plan, reset_support_comes_from_the_nodes_labels) {
  using labels = std::map<std::string, std::string>;
  auto supported = [](const labels& l) {
    return check_reset_support(gpu_facts_from_labels(l), uuid, false).supported;
  };
  EXPECT_TRUE(supported({{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
                         {"nvidia.com/gpu.count", "8"}}));
  // HGX A100: an 8-GPU Ampere SXM board has NVSwitches (Fabric Manager).
  EXPECT_FALSE(supported({{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"},
                          {"nvidia.com/gpu.count", "8"}}));
  EXPECT_TRUE(supported({{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"},
                         {"nvidia.com/gpu.count", "4"}}));
  EXPECT_TRUE(supported({{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"},
                         {"nvidia.com/gpu.count", "8"},
                         {"vigil.dev/nvswitch-fabric", "false"}}));
  // MIG and vGPU: a full drain and a reboot instead.
  EXPECT_FALSE(supported({{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
                          {"nvidia.com/mig.strategy", "single"}}));
  EXPECT_FALSE(supported({{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
                          {"nvidia.com/mig.config", "all-1g.10gb"}}));
  EXPECT_TRUE(supported({{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
                         {"nvidia.com/mig.config", "all-disabled"}}));
  EXPECT_FALSE(supported({{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
                          {"nvidia.com/vgpu.present", "true"}}));
  auto plan = plan_remediation(
    recommended_action::component_reset, uuid,
    gpu_facts_from_labels({{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
                           {"nvidia.com/mig.strategy", "mixed"}}));
  EXPECT_EQ(plan.kind, remediation_kind::reboot_node);
  EXPECT_TRUE(plan.fell_back);
}

// seed 001 "Scope of Support" from what the node's agent read off the GPUs.
TEST(remediation_plan, reset_support_from_the_agents_nvlinks_and_names) {
  using labels = std::map<std::string, std::string>;
  auto supported = [](const labels& l, const agent_gpu_facts& agent) {
    return check_reset_support(gpu_facts_from_labels(l, &agent), uuid, false).supported;
  };
  const agent_gpu_facts hgx_a100{"NVIDIA A100-SXM4-80GB", 8, 6, "575.57.08"};
  // No GPU feature discovery: the agent's name and switches decide.
  EXPECT_FALSE(supported({}, hgx_a100));
  EXPECT_TRUE(supported({}, {"NVIDIA H100 80GB HBM3", 8, 4, "580.95.05"}));
  EXPECT_TRUE(supported({}, {"NVIDIA H200", 1, 0, "580.159.04"})); // the device machine
  // A 4-GPU A100 board the label guess calls switchless, whose NVLinks in
  // fact end at NVSwitches.
  const labels a100_4{{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"},
                      {"nvidia.com/gpu.count", "4"}};
  EXPECT_FALSE(supported(a100_4, {"NVIDIA A100-SXM4-80GB", 4, 2, ""}));
  EXPECT_TRUE(supported(a100_4, {"NVIDIA A100-SXM4-80GB", 4, 0, ""}));
  // Seeing no switch is no proof (links down list no far end): the 8-GPU
  // guess stands; so does an unknown count.
  const labels a100_8{{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"},
                      {"nvidia.com/gpu.count", "8"}};
  EXPECT_FALSE(supported(a100_8, {"NVIDIA A100-SXM4-80GB", 8, 0, ""}));
  EXPECT_FALSE(supported({}, {"NVIDIA A100-SXM4-80GB", 8, -1, ""}));
  // The operator's explicit label has the last word.
  EXPECT_TRUE(supported({{"vigil.dev/nvswitch-fabric", "false"}}, hgx_a100));
  // The label's product name wins over the agent's.
  EXPECT_FALSE(supported({{"nvidia.com/gpu.product", "Tesla-V100-SXM2-32GB"}},
                         {"NVIDIA H100 80GB HBM3", 8, 0, ""}));
}

} // namespace
} // namespace vigil::control
