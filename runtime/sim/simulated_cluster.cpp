#include "runtime/sim/simulated_cluster.hpp"

#include <array>
#include <cstdio>

#include "actors/control/drain/drain_resource.hpp"
#include <algorithm>

namespace vigil::demo {

namespace {

using kube::json;

// The PCI buses of the eight GPUs of an HGX H100 baseboard.
constexpr std::array<int, 8> gpu_buses{0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb};
// And of the eight ConnectX-7 compute NICs beside them (one per PCIe switch).
constexpr std::array<int, 8> nic_buses{0x1a, 0x2c, 0x3c, 0x5f, 0x9c, 0xad, 0xbc, 0xdd};

std::string pci(int bus) {
  char text[32];
  std::snprintf(text, sizeof text, "0000:%02x:00.0", bus & 0xff);
  return text;
}

// The operands the janitor tears down (seed 001 step 1), by deploy label.
const std::array<std::pair<const char*, const char*>, 4> operands{{
  {"nvidia.com/gpu.deploy.device-plugin", "nvidia-device-plugin-daemonset"},
  {"nvidia.com/gpu.deploy.dcgm", "nvidia-dcgm"},
  {"nvidia.com/gpu.deploy.dcgm-exporter", "nvidia-dcgm-exporter"},
  {"nvidia.com/gpu.deploy.gpu-feature-discovery", "gpu-feature-discovery"},
}};

json node_object(const cluster_spec& spec, int node) {
  json labels = {{"nvidia.com/gpu.present", "true"},
                 {"nvidia.com/gpu.product", spec.product},
                 {"nvidia.com/gpu.count", std::to_string(spec.gpus_per_node)},
                 {"topology.kubernetes.io/rack",
                  "rack-" + std::to_string((node - 1) % std::max(spec.racks, 1) + 1)},
                 {"kubernetes.io/hostname", node_name(node)}};
  for (const auto& [label, app] : operands)
    labels[label] = "true";
  const auto gpus = std::to_string(spec.gpus_per_node);
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", node_name(node)}, {"labels", labels}}},
          {"spec", json::object()},
          {"status",
           {{"capacity", {{"nvidia.com/gpu", gpus}}},
            {"allocatable", {{"nvidia.com/gpu", gpus}}},
            {"conditions",
             {{{"type", "Ready"}, {"status", "True"}, {"reason", "KubeletReady"}}}},
            {"nodeInfo", {{"bootID", boot_id(node, 1)}}}}}};
}

json owner(const std::string& kind, const std::string& name) {
  return json::array({{{"apiVersion", kind == "Job" ? "batch/v1" : "apps/v1"},
                       {"kind", kind},
                       {"name", name},
                       {"uid", kind + "-" + name},
                       {"controller", true}}});
}

json workload_object(const std::string& name, const std::string& node,
                     const std::vector<std::string>& gpus, const std::string& app,
                     const std::string& owner_kind) {
  json devices = {
    {"devices", {{{"resourceName", "nvidia.com/gpu"}, {"deviceIds", gpus}}}}};
  return {
    {"apiVersion", "v1"},
    {"kind", "Pod"},
    {"metadata",
     {{"name", name},
      {"labels", {{"app", app}, {"vigil-demo/workload", "true"}}},
      {"annotations", {{control::gpu_devices_annotation, devices.dump()}}},
      {"ownerReferences", owner(owner_kind, app)}}},
    {"spec",
     {{"nodeName", node},
      {"terminationGracePeriodSeconds", 30},
      {"containers",
       {{{"name", "main"},
         {"image", "trainer:demo"},
         {"resources",
          {{"limits", {{"nvidia.com/gpu", std::to_string(gpus.size())}}}}}}}}}},
    {"status",
     {{"phase", "Running"}, {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

} // namespace

std::string node_name(int node) {
  char text[32];
  std::snprintf(text, sizeof text, "gpu-node-%02d", node);
  return text;
}

int node_number(const std::string& name) {
  const std::string prefix = "gpu-node-";
  if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size()
      || name.size() > prefix.size() + 6)
    return 0;
  int n = 0;
  for (char c : name.substr(prefix.size())) {
    if (c < '0' || c > '9')
      return 0;
    n = n * 10 + (c - '0');
  }
  return node_name(n) == name ? n : 0;
}

std::string gpu_uuid(int node, int gpu) {
  char text[64];
  std::snprintf(text, sizeof text, "GPU-%04x%04x-5a1e-4d3c-9b2a-%012x", node & 0xffff,
                gpu & 0xffff, node * 16 + gpu);
  return text;
}

std::string gpu_pci_address(int gpu) {
  return pci(gpu_buses[static_cast<std::size_t>(gpu) % gpu_buses.size()]
             + 0x100 * (gpu / static_cast<int>(gpu_buses.size())));
}

std::string nic_name(int nic) {
  return "mlx5_" + std::to_string(nic);
}

std::string boot_id(int node, int boots) {
  char text[64];
  std::snprintf(text, sizeof text, "b0070000-0000-4000-8000-%06x%06x", node, boots);
  return text;
}

agent::gpu_metadata node_metadata(const cluster_spec& spec, int node) {
  agent::gpu_metadata m;
  m.node_name = node_name(node);
  for (int g = 0; g < spec.gpus_per_node; ++g) {
    agent::gpu_info info;
    info.gpu_id = g;
    info.pci_address = gpu_pci_address(g);
    info.numa_node = g < spec.gpus_per_node / 2 ? 0 : 1;
    info.uuid = gpu_uuid(node, g);
    info.cpu_affinity = info.numa_node == 0 ? "0-55,112-167" : "56-111,168-223";
    m.gpus.push_back(info);
  }
  for (int n = 0; n < spec.nics_per_node; ++n) {
    std::vector<std::string> levels;
    for (int g = 0; g < spec.gpus_per_node; ++g)
      levels.push_back(g == n ? "PXB" : "SYS");
    m.nic_topology[nic_name(n)] = levels;
  }
  return m;
}

void add_compute_nics(fake_sysfs& host, const cluster_spec& spec) {
  for (int n = 0; n < spec.nics_per_node; ++n) {
    fake_nic nic;
    nic.name = nic_name(n);
    nic.pci = pci(nic_buses[static_cast<std::size_t>(n) % nic_buses.size()]);
    nic.numa_node = n < spec.nics_per_node / 2 ? 0 : 1;
    nic.sriov_totalvfs = 8; // a physical function
    fake_port port;
    port.counters["link_downed"] = 0;
    nic.ports = {port};
    host.add_nic(nic);
  }
}

void set_port_state(fake_sysfs& host, int nic, bool up, std::uint64_t link_downed) {
  host.set_state(nic_name(nic), 1, up ? "4: ACTIVE" : "1: DOWN",
                 up ? "5: LinkUp" : "3: Disabled");
  host.set_counter(nic_name(nic), 1, "link_downed", link_downed);
}

bool runs_training(int node) {
  return node % 2 == 0;
}

std::string workload_namespace(int node) {
  return runs_training(node) ? training_namespace : inference_namespace;
}

std::string workload_pod(const cluster_spec&, int node, int gpu) {
  if (runs_training(node))
    return "train-" + node_name(node);
  return "infer-" + node_name(node) + "-gpu" + std::to_string(gpu);
}

std::vector<std::pair<std::string, std::string>> operand_pods(int node) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [label, app] : operands)
    out.emplace_back(app, std::string(app) + "-" + node_name(node));
  return out;
}

std::string operand_of_deploy_label(const std::string& label) {
  for (const auto& [l, app] : operands)
    if (label == l)
      return app;
  return "";
}

json operand_pod(const std::string& app, const std::string& pod_name,
                 const std::string& node) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", pod_name},
            {"labels", {{"app", app}}},
            {"ownerReferences", owner("DaemonSet", app)}}},
          {"spec",
           {{"nodeName", node},
            {"terminationGracePeriodSeconds", 0},
            {"containers", {{{"name", app}, {"image", "nvcr.io/nvidia/" + app}}}}}},
          {"status", {{"phase", "Running"}}}};
}

void populate(kube::object_store& store, const cluster_spec& spec) {
  store.create_system_namespaces();
  for (auto [plural, kind] :
       {std::pair<const char*, const char*>{"gpuresets", "GPUReset"},
        {"rebootnodes", "RebootNode"},
        {"terminatenodes", "TerminateNode"}})
    store.register_type({"vigil.dev", "v1alpha1", plural, kind, false, true, {}, true});
  const auto* namespaces = store.find_type("", "v1", "namespaces");
  for (const char* ns :
       {janitor_namespace, operator_namespace, training_namespace, inference_namespace})
    store.create(*namespaces, "", {{"metadata", {{"name", ns}}}});
  const auto* nodes = store.find_type("", "v1", "nodes");
  const auto* pods = store.find_type("", "v1", "pods");
  const auto* budgets = store.find_type("policy", "v1", "poddisruptionbudgets");
  for (int n = 1; n <= spec.nodes; ++n) {
    const auto name = node_name(n);
    store.create(*nodes, "", node_object(spec, n));
    for (const auto& [app, pod] : operand_pods(n))
      store.create(*pods, operator_namespace, operand_pod(app, pod, name));
    if (runs_training(n)) {
      std::vector<std::string> all;
      for (int g = 0; g < spec.gpus_per_node; ++g)
        all.push_back(gpu_uuid(n, g));
      store.create(*pods, training_namespace,
                   workload_object(workload_pod(spec, n, 0), name, all,
                                   "llm-pretrain-" + name, "Job"));
      continue;
    }
    const auto app = "infer-" + name;
    for (int g = 0; g < spec.gpus_per_node; ++g)
      store.create(*pods, inference_namespace,
                   workload_object(workload_pod(spec, n, g), name, {gpu_uuid(n, g)}, app,
                                   "ReplicaSet"));
    store.create(
      *budgets, inference_namespace,
      {{"apiVersion", "policy/v1"},
       {"kind", "PodDisruptionBudget"},
       {"metadata", {{"name", app}}},
       {"spec",
        {{"maxUnavailable", 1}, {"selector", {{"matchLabels", {{"app", app}}}}}}}});
  }
}

std::string xid_line(int gpu, int code) {
  // "NVRM: Xid (PCI:0000:18:00): 48, pid=…" — the driver drops the function.
  auto address = gpu_pci_address(gpu);
  address = address.substr(0, address.rfind('.'));
  return "NVRM: Xid (PCI:" + address + "): " + std::to_string(code)
         + ", pid=4242, name=python3, Ch 00000008\n";
}

std::string gpu_reset_line(const std::string& uuid) {
  return "GPU reset occurred: " + uuid + "\n";
}

} // namespace vigil::demo
