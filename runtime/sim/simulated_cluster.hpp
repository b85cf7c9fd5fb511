// The simulated GPU cluster of `vigil demo`: what a fresh HGX H100 cluster
// looks like to the API server — nodes of 8 GPUs and 8 compute NICs, the GPU
// operator's operand pods, and workload pods holding GPUs (whole-node
// training jobs and single-GPU inference pods under a PDB) — and what its
// hosts say: kernel-log lines and InfiniBand port states. Plain functions
// over the object store; the simulator actor drives them.
#pragma once

#include <string>
#include <vector>

#include "actors/agent/topology/gpu_metadata.hpp"
#include "runtime/sim/kube/kube_object_store.hpp"
#include "runtime/sim/sysfs_tree.hpp"

namespace vigil::demo {

struct cluster_spec {
  int nodes = 16;
  int gpus_per_node = 8;
  int nics_per_node = 8;
  int racks = 4; ///< nodes are spread over racks (the breaker's pool label)
  std::string product = "NVIDIA-H100-80GB-HBM3";
};

/// Namespaces of the workloads; the summary counts evictions there only.
inline constexpr const char* training_namespace = "training";
inline constexpr const char* inference_namespace = "inference";
inline constexpr const char* operator_namespace = "gpu-operator";
inline constexpr const char* janitor_namespace = "vigil-system";

/// "gpu-node-01" … (1-based, two digits at least).
std::string node_name(int node);
/// The inverse: "gpu-node-07" → 7; 0 for a name node_name does not make.
int node_number(const std::string& name);
/// A node's GPU `gpu` (0-based), as nvidia-smi names it: "GPU-0003-0002-…".
std::string gpu_uuid(int node, int gpu);
/// The PCI address of GPU `gpu` on an HGX H100 baseboard ("0000:18:00.0").
std::string gpu_pci_address(int gpu);
/// "mlx5_0" … : compute NIC `nic`, paired with GPU `nic`.
std::string nic_name(int nic);
/// The node's kernel boot ID after `boots` boots.
std::string boot_id(int node, int boots);

/// gpu_metadata.json as the topology collector would write it on the node:
/// the GPUs and, per compute NIC, PXB to its paired GPU and SYS to the rest.
agent::gpu_metadata node_metadata(const cluster_spec& spec, int node);

/// The node's eight ConnectX-7 compute NICs (one InfiniBand port each, all
/// ACTIVE, link_downed 0) written into the host's sysfs tree.
void add_compute_nics(fake_sysfs& host, const cluster_spec& spec);
/// Port 1 of NIC `nic` goes down or comes back; its link_downed counter.
void set_port_state(fake_sysfs& host, int nic, bool up, std::uint64_t link_downed);

/// Pods of a node: which workload pod holds GPU `gpu`.
std::string workload_pod(const cluster_spec& spec, int node, int gpu);
std::string workload_namespace(int node);
/// Even nodes run one 8-GPU training pod; odd nodes 8 one-GPU inference pods.
bool runs_training(int node);

/// The vigil.dev CRD types, namespaces, nodes (Ready, boot ID, GPU labels,
/// operand deploy labels "true", rack), operand pods, workload pods with their
/// allocated GPU UUIDs in vigil.dev/gpu-devices, and one PDB (maxUnavailable 1)
/// per inference node.
void populate(kube::object_store& store, const cluster_spec& spec);

/// The GPU operator's operand pods of `node` (app label → pod name).
std::vector<std::pair<std::string, std::string>> operand_pods(int node);
/// The operand a deploy label controls: "nvidia.com/gpu.deploy.dcgm" → "nvidia-dcgm".
std::string operand_of_deploy_label(const std::string& label);
kube::json operand_pod(const std::string& app, const std::string& pod_name,
                       const std::string& node);

/// Kernel-log lines, as the NVIDIA driver prints them.
std::string xid_line(int gpu, int code);
std::string gpu_reset_line(const std::string& uuid);

} // namespace vigil::demo
