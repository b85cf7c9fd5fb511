// A GPU Node as the benchmarks' API test server holds it: the shape of one
// on a cloud H100 node as `kubectl get node -o json` shows it, so that what
// the control plane reads, decodes and keeps per Node is what a real
// cluster hands it (11.5 KB a Node, against 0.3 KB for name, three labels and
// Ready), shared by bench_kube and bench_control.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace vigil::bench {

/// The Node `name`: the labels GPU feature discovery and the cloud set, its
/// capacity, the kubelet's conditions (Ready), addresses and the images the
/// kubelet reports (the bulk of a real Node). No uid or resourceVersion: the
/// API server sets them on create.
inline nlohmann::json gpu_node(const std::string& name) {
  using nlohmann::json;
  json labels = {{"kubernetes.io/hostname", name},
                 {"kubernetes.io/os", "linux"},
                 {"kubernetes.io/arch", "amd64"},
                 {"node.kubernetes.io/instance-type", "p5.48xlarge"},
                 {"topology.kubernetes.io/zone", "us-east-1a"},
                 {"topology.kubernetes.io/region", "us-east-1"},
                 {"nvidia.com/gpu.present", "true"},
                 {"nvidia.com/gpu.count", "8"},
                 {"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
                 {"nvidia.com/gpu.memory", "81559"},
                 {"nvidia.com/cuda.driver.major", "575"},
                 {"nvidia.com/mig.capable", "true"},
                 {"nvidia.com/mig.strategy", "single"}};
  for (int i = 0; i < 40; ++i)
    labels["feature.node.kubernetes.io/cpu-cpuid.FEATURE" + std::to_string(i)] = "true";
  json conditions = json::array();
  for (const char* type :
       {"MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable", "Ready"})
    conditions.push_back({{"type", type},
                          {"status", std::string(type) == "Ready" ? "True" : "False"},
                          {"lastHeartbeatTime", "2026-12-01T18:00:00Z"},
                          {"lastTransitionTime", "2026-11-20T09:12:44Z"},
                          {"reason", std::string("Kubelet") + type},
                          {"message", "kubelet reports the condition as it is"}});
  json images = json::array();
  for (int i = 0; i < 40; ++i)
    images.push_back(
      {{"names",
        {"nvcr.io/nvidia/image-" + std::to_string(i)
           + "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
         "nvcr.io/nvidia/image-" + std::to_string(i) + ":v24.9.1"}},
       {"sizeBytes", 1234567890 + i}});
  json resources = {{"cpu", "192"},
                    {"memory", "2097152000Ki"},
                    {"ephemeral-storage", "7497272300Ki"},
                    {"hugepages-1Gi", "0"},
                    {"hugepages-2Mi", "0"},
                    {"nvidia.com/gpu", "8"},
                    {"vpc.amazonaws.com/efa", "32"},
                    {"pods", "110"}};
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata",
           {{"name", name},
            {"labels", labels},
            {"annotations",
             {{"node.alpha.kubernetes.io/ttl", "0"},
              {"volumes.kubernetes.io/controller-managed-attach-detach", "true"},
              {"nfd.node.kubernetes.io/feature-labels", "cpu-cpuid.AVX512F,..."}}}}},
          {"spec", {{"providerID", "aws:///us-east-1a/i-0123456789abcdef0"}}},
          {"status",
           {{"capacity", resources},
            {"allocatable", resources},
            {"conditions", conditions},
            {"addresses",
             {{{"type", "InternalIP"}, {"address", "10.0.12.34"}},
              {{"type", "Hostname"}, {"address", name}}}},
            {"nodeInfo",
             {{"kernelVersion", "6.8.0-1015-aws"},
              {"osImage", "Ubuntu 22.04.5 LTS"},
              {"containerRuntimeVersion", "containerd://1.7.22"},
              {"kubeletVersion", "v1.31.2"}}},
            {"images", images}}}};
}

} // namespace vigil::bench
