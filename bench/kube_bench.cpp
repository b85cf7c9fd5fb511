// Requests per second through the gateway against the API test server, rate
// limiter off: a driver actor keeps WINDOW GETs of one node in flight until
// TOTAL have been answered. Then what decoding one Node change costs, the
// work each watch's decoder does beside the gateway: a MODIFIED line of a
// GPU Node as a real cluster has it (GPU feature discovery's labels, its
// capacity, conditions and cached images, about 14 KB), decoded 20,000 times.
#include <chrono>
#include <cstdio>
#include <string>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/gateway/kube_gateway.hpp"
#include "runtime/sim/kube/kube_test_server.hpp"

namespace {

using namespace vigil;
using bench_clock = std::chrono::steady_clock;
using tick_atom = caf::atom_constant<caf::atom("tick")>;

struct driver_state {
  std::uint64_t sent = 0;
  std::uint64_t answered = 0;
  std::uint64_t failed = 0;
};

caf::behavior driver(caf::stateful_actor<driver_state>* self, kube_gateway_handle gateway,
                     std::uint64_t total, std::uint64_t window, caf::actor reporter) {
  auto send_one = [=] {
    auto request = kube::make_request("GET", "/api/v1/nodes/gpu-node-1");
    ++self->state.sent;
    self->request(gateway, caf::infinite, std::move(request))
      .then([=](const kube::kube_result& r) {
        auto& st = self->state;
        st.failed += r.ok() ? 0 : 1;
        if (++st.answered == total) {
          self->send(reporter, st.failed);
          self->quit();
        } else if (st.sent < total) {
          self->send(self, tick_atom::value);
        }
      });
  };
  for (std::uint64_t i = 0; i < window && i < total; ++i)
    send_one();
  return {[=](tick_atom) { send_one(); }};
}

// A GPU Node as kubectl get -o json shows one on a cloud H100 node: the
// labels GPU feature discovery and the cloud set, its capacity, conditions,
// addresses and the images the kubelet reports (the bulk of a real Node).
nlohmann::json realistic_gpu_node() {
  using nlohmann::json;
  json labels = {{"kubernetes.io/hostname", "gpu-node-1"},
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
       {"MemoryPressure", "DiskPressure", "PIDPressure", "Ready", "GpuDriverReady"})
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
           {{"name", "gpu-node-1"},
            {"uid", "9f5c1d0e-51c4-4a7b-9d51-5b1b5c3a8e11"},
            {"resourceVersion", "123456789"},
            {"creationTimestamp", "2026-11-20T09:10:02Z"},
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
              {{"type", "Hostname"}, {"address", "gpu-node-1"}}}},
            {"nodeInfo",
             {{"kernelVersion", "6.8.0-1015-aws"},
              {"osImage", "Ubuntu 22.04.5 LTS"},
              {"containerRuntimeVersion", "containerd://1.7.22"},
              {"kubeletVersion", "v1.31.2"}}},
            {"images", images}}}};
}

} // namespace

int main(int argc, char** argv) {
  const std::uint64_t total = argc > 1 ? std::stoull(argv[1]) : 20000;
  const std::uint64_t window = argc > 2 ? std::stoull(argv[2]) : 64;
  auto server = kube::kube_test_server::start({});
  if (!server) {
    std::fprintf(stderr, "%s\n", server.error().to_string().c_str());
    return 1;
  }
  (*server)->with_store([](kube::object_store& store) {
    nlohmann::json node = {
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata", {{"name", "gpu-node-1"}}},
      {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
    store.create(*store.find_type("", "v1", "nodes"), "", node);
  });
  kube::kube_client_options options;
  options.qps = 0; // limiter off
  auto client =
    kube::make_kube_client_curl(kube::kube_connection{(*server)->url()}, options);
  if (!client) {
    std::fprintf(stderr, "%s\n", client.error().to_string().c_str());
    return 1;
  }
  // What each watch's decoder does per Node change, timed before the
  // gateway and its client's thread run.
  const std::string line =
    nlohmann::json{{"type", "MODIFIED"}, {"object", realistic_gpu_node()}}.dump();
  const int decodes = 20000;
  std::size_t versions = 0; // read, so the decoding is not optimised away
  const auto t1 = bench_clock::now();
  for (int i = 0; i < decodes; ++i)
    versions += decode_for_gateway(line).resource_version.empty() ? 0 : 1;
  const double decode_s = std::chrono::duration<double>(bench_clock::now() - t1).count();
  std::printf("a GPU Node's MODIFIED line (%zu bytes) decoded %zu times: %.1f us each\n",
              line.size(), versions, decode_s * 1e6 / decodes);

  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", size_t{2});
  caf::actor_system sys{cfg};
  auto gateway =
    sys.spawn(kube_gateway, std::shared_ptr<kube::kube_client>(std::move(*client)),
              std::make_shared<kube_gateway_stats>());
  caf::scoped_actor self{sys};
  const auto t0 = bench_clock::now();
  sys.spawn(driver, gateway, total, window, caf::actor_cast<caf::actor>(self));
  self->receive([&](std::uint64_t failed) {
    const double s = std::chrono::duration<double>(bench_clock::now() - t0).count();
    std::printf("%llu GETs, %llu in flight, %llu failed: %.2f s, %.0f requests/s\n",
                static_cast<unsigned long long>(total),
                static_cast<unsigned long long>(window),
                static_cast<unsigned long long>(failed), s, total / s);
  });
  caf::anon_send_exit(gateway, caf::exit_reason::user_shutdown);
  return 0;
}
