// The allocation_monitor under CAF's test coordinator, against a real gRPC
// PodResources server (fake_kubelet) and a loopback HTTP control plane: it
// reports at start, not again while nothing changes, at once when the
// allocations change or a GPU fault asks, every refresh interval, and says
// when the kubelet cannot be asked.
#define CAF_SUITE allocation_monitor
#include <caf/test/dsl.hpp>

#include <nlohmann/json.hpp>

#include "actors/agent/podresources/allocation_monitor.hpp"
#include "runtime/actor_clock.hpp"
#include "tests/support/fake_kubelet.hpp"
#include "tests/support/fresh_directory.hpp"
#include "tests/support/loopback_http_server.hpp"

using namespace caf;
using namespace vigil;

namespace {

const char* gpu_a = "GPU-aaaaaaaa-1111-2222-3333-444444444444";
const char* gpu_b = "GPU-bbbbbbbb-1111-2222-3333-444444444444";

v1::ListPodResourcesResponse one_pod(const char* gpu) {
  v1::ListPodResourcesResponse list;
  vigil::test::add_container_devices(list, "team-a", "train-0", "main", "nvidia.com/gpu",
                                     {gpu});
  return list;
}

struct fixture : test_coordinator_fixture<> {
  std::string socket = vigil::test::fresh_directory() + "/kubelet.sock";
  vigil::test::fake_kubelet_service kubelet_service;
  std::shared_ptr<caf_clock> wall =
    std::make_shared<caf_clock>(sys.clock(), from_unix(1700000000, 0));

  actor spawn_monitor(const std::string& url) {
    allocation_monitor_config config;
    config.node = "gpu-node-1";
    config.poll_interval = std::chrono::seconds{10};
    config.refresh_interval = std::chrono::seconds{60};
    agent::http_poster_options post;
    post.url = url;
    auto monitor = sys.spawn(
      allocation_monitor, config, std::make_shared<agent::pod_resources_client>(socket),
      agent::gpu_metadata{}, std::make_shared<agent::http_event_poster>(post), wall);
    sched.run();
    return monitor;
  }

  void poll_after(std::chrono::seconds wait) {
    advance_time(wait);
    sched.run();
  }
};

nlohmann::json body_of(const vigil::test::captured_request& request) {
  CAF_CHECK(request.head.rfind("POST /v1/allocations HTTP/1.1\r\n", 0) == 0);
  return nlohmann::json::parse(request.body);
}

} // namespace

CAF_TEST_FIXTURE_SCOPE(allocation_monitor_tests, fixture)

CAF_TEST(reports_at_start_on_change_on_a_fault_and_every_refresh) {
  kubelet_service.set_list(one_pod(gpu_a));
  vigil::test::fake_kubelet kubelet(socket, kubelet_service);
  const auto ok = vigil::test::response(202, "Accepted", "accepted\n");
  vigil::test::loopback_server control({ok, ok, ok, ok});
  auto monitor = spawn_monitor(control.url()); // 1: at start
  poll_after(std::chrono::seconds{10});        // unchanged: nothing
  kubelet_service.set_list(one_pod(gpu_b));
  poll_after(std::chrono::seconds{10}); // 2: changed
  self->send(monitor, report_now_atom::value);
  sched.run(); // 3: a GPU fault asks
  for (int i = 0; i < 5; ++i)
    poll_after(std::chrono::seconds{10}); // unchanged, within the minute: nothing
  poll_after(std::chrono::seconds{10});   // 4: a minute since the last accepted one
  control.join();
  CAF_REQUIRE_EQUAL(control.requests().size(), 4u);
  auto first = body_of(control.requests()[0]);
  CAF_CHECK_EQUAL(first["nodeName"], "gpu-node-1");
  CAF_CHECK_EQUAL(first["available"], true);
  CAF_CHECK_EQUAL(first["allocations"][0]["pod"], "train-0");
  CAF_CHECK_EQUAL(first["allocations"][0]["gpuUuids"][0], gpu_a);
  auto second = body_of(control.requests()[1]);
  CAF_CHECK_EQUAL(second["allocations"][0]["gpuUuids"][0], gpu_b);
  CAF_CHECK_EQUAL(kubelet_service.list_calls(), 10);
  anon_send_exit(monitor, exit_reason::kill);
  sched.run();
}

CAF_TEST(an_unavailable_kubelet_is_reported_with_the_reason) {
  const auto ok = vigil::test::response(202, "Accepted", "accepted\n");
  vigil::test::loopback_server control({ok});
  auto monitor = spawn_monitor(control.url()); // no kubelet on the socket
  control.join();
  CAF_REQUIRE_EQUAL(control.requests().size(), 1u);
  auto report = body_of(control.requests()[0]);
  CAF_CHECK_EQUAL(report["available"], false);
  auto error = report["error"].get<std::string>();
  CAF_CHECK(error.find(socket) != std::string::npos);
  CAF_CHECK(error.find("List: UNAVAILABLE") != std::string::npos);
  anon_send_exit(monitor, exit_reason::kill);
  sched.run();
}

CAF_TEST_FIXTURE_SCOPE_END()
