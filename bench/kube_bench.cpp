// Requests per second through the gateway against the API test server, rate
// limiter off: a driver actor keeps WINDOW GETs of one node in flight until
// TOTAL have been answered. Before that, what decoding one Node change
// costs, the work each watch's decoder does beside the gateway: a MODIFIED
// line of a GPU Node as a real cluster has it (bench/gpu_node.hpp), decoded
// 20,000 times.
#include <chrono>
#include <cstdio>
#include <string>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/gateway/kube_gateway.hpp"
#include "bench/gpu_node.hpp"
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
  auto changed = bench::gpu_node("gpu-node-1");
  changed["metadata"]["resourceVersion"] = "123456789";
  const std::string line =
    nlohmann::json{{"type", "MODIFIED"}, {"object", changed}}.dump();
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
