// The agent's side of seed 000 §3.1's GPU-to-pod mapping: the kubelet's
// PodResources API read over a real gRPC unix socket (the same generated
// code, a fake_kubelet serving it), and its answer turned into
// gpu_allocations: device-plugin UUIDs, index ids through gpu_metadata, MIG
// and malformed ids kept as unresolved, other resources skipped; a socket that
// is not there (a clear error naming it, and a retry that works once the
// kubelet is up), and a kubelet without Get.
#include <gtest/gtest.h>

#include "actors/agent/podresources/gpu_allocation_reader.hpp"
#include "actors/agent/podresources/pod_resources_client.hpp"
#include "tests/support/fake_kubelet.hpp"
#include "tests/support/fresh_directory.hpp"

namespace vigil::agent {
namespace {

const char* gpu_a = "GPU-aaaaaaaa-1111-2222-3333-444444444444";
const char* gpu_b = "GPU-bbbbbbbb-1111-2222-3333-444444444444";
const char* gpu_c = "GPU-cccccccc-1111-2222-3333-444444444444";

gpu_metadata three_gpus() {
  gpu_metadata m;
  m.node_name = "gpu-node-1";
  int id = 0;
  for (const char* uuid : {gpu_a, gpu_b, gpu_c}) {
    gpu_info g;
    g.gpu_id = id++;
    g.uuid = uuid;
    m.gpus.push_back(g);
  }
  return m;
}

v1::ListPodResourcesResponse device_plugin_list() {
  v1::ListPodResourcesResponse list;
  test::add_container_devices(list, "team-a", "train-0", "main", "nvidia.com/gpu",
                              {gpu_a, gpu_b});
  test::add_container_devices(list, "team-a", "train-0", "main", "rdma/hca_shared",
                              {"hca0"});
  test::add_container_devices(list, "team-b", "infer-0", "server", "nvidia.com/gpu",
                              {"2"}); // deviceIDStrategy=index
  test::add_container_devices(list, "team-c", "mig-0", "main", "nvidia.com/mig-1g.10gb",
                              {"MIG-0f6e1f2a-aaaa-bbbb-cccc-0123456789ab"});
  test::add_container_devices(list, "team-d", "odd-0", "main", "nvidia.com/gpu",
                              {"not a device id", ""});
  return list;
}

TEST(gpu_allocation_reader, device_plugin_answers_become_gpu_allocations) {
  allocation_read_notes notes;
  auto report =
    gpu_allocations_from(device_plugin_list(), "gpu-node-1", from_unix(1'700'000'000, 0),
                         three_gpus(), gpu_resource_names{}, notes);
  EXPECT_EQ(report.node, "gpu-node-1");
  EXPECT_TRUE(report.available);
  ASSERT_EQ(report.allocations.size(), 4u);
  const auto& train = report.allocations[0];
  EXPECT_EQ(train.ns, "team-a");
  EXPECT_EQ(train.pod, "train-0");
  EXPECT_EQ(train.container, "main");
  EXPECT_EQ(train.resource, "nvidia.com/gpu");
  EXPECT_EQ(train.gpu_uuids, (std::vector<std::string>{gpu_a, gpu_b}));
  EXPECT_EQ(report.allocations[1].gpu_uuids, std::vector<std::string>{gpu_c});
  EXPECT_TRUE(report.allocations[2].gpu_uuids.empty());
  EXPECT_EQ(report.allocations[2].unresolved.size(), 1u);
  EXPECT_EQ(report.allocations[3].unresolved,
            (std::vector<std::string>{"not a device id", ""}));
  EXPECT_EQ(notes.other_resources, 1u);
  EXPECT_EQ(notes.unresolved.size(), 3u);

  EXPECT_EQ(gpus_held_by(report, "team-a", "train-0"),
            (std::vector<std::string>{gpu_a, gpu_b}));
  EXPECT_EQ(gpus_held_by(report, "team-c", "mig-0"), std::nullopt); // unresolved
  EXPECT_EQ(gpus_held_by(report, "team-z", "absent"), std::nullopt);
  auto holders = gpu_holders(report, {gpu_b, gpu_c});
  ASSERT_EQ(holders.size(), 2u);
  EXPECT_EQ(holders[0].ns, "team-a");
  EXPECT_EQ(holders[0].pod, "train-0");
  EXPECT_EQ(holders[0].gpus, (std::vector<std::string>{gpu_a, gpu_b})); // all it holds
  EXPECT_EQ(holders[1].pod, "infer-0");
  EXPECT_TRUE(gpu_holders(report, {"GPU-none"}).empty());
}

TEST(gpu_allocation_reader, device_ids_resolve_only_to_known_gpus) {
  const auto m = three_gpus();
  EXPECT_EQ(gpu_uuid_of_device_id(gpu_a, m), gpu_a);
  EXPECT_EQ(gpu_uuid_of_device_id("1", m), gpu_b);
  EXPECT_EQ(gpu_uuid_of_device_id("7", m), "");
  EXPECT_EQ(gpu_uuid_of_device_id("99999999999", m), "");
  EXPECT_EQ(gpu_uuid_of_device_id("GPU-", m), "");
  EXPECT_EQ(gpu_uuid_of_device_id("GPU-zz", m), "");
  EXPECT_EQ(gpu_uuid_of_device_id("MIG-0f6e1f2a-aaaa-bbbb-cccc-0123456789ab", m), "");
  EXPECT_EQ(gpu_uuid_of_device_id(std::string(300, 'G'), m), "");
}

TEST(gpu_allocation_reader, resource_names_match_exactly_or_by_prefix) {
  gpu_resource_names names;
  EXPECT_TRUE(names.matches("nvidia.com/gpu"));
  EXPECT_TRUE(names.matches("nvidia.com/mig-3g.40gb"));
  EXPECT_FALSE(names.matches("nvidia.com/gpu.shared"));
  EXPECT_FALSE(names.matches("amd.com/gpu"));
  auto parsed = parse_gpu_resource_names(" amd.com/gpu , nvidia.com/* ");
  ASSERT_TRUE(parsed.has_value());
  EXPECT_TRUE(parsed->matches("amd.com/gpu"));
  EXPECT_TRUE(parsed->matches("nvidia.com/gpu.shared"));
  auto bad = parse_gpu_resource_names("nvidia.com/gpu,,x");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().where, "--gpu-resources");
}

TEST(gpu_allocations_wire, round_trips_and_names_bad_fields) {
  gpu_allocations report;
  report.node = "gpu-node-1";
  report.observed = from_unix(1'700'000'000, 0);
  report.allocations.push_back(
    {"team-a", "train-0", "main", "nvidia.com/gpu", {gpu_a}, {}});
  report.allocations.push_back(
    {"team-c", "mig-0", "main", "nvidia.com/mig-1g.10gb", {}, {"MIG-1"}});
  auto back = decode_gpu_allocations(encode_gpu_allocations(report));
  ASSERT_TRUE(back.has_value()) << back.error().to_string();
  EXPECT_EQ(back->node, "gpu-node-1");
  EXPECT_EQ(back->observed, report.observed);
  ASSERT_EQ(back->allocations.size(), 2u);
  EXPECT_EQ(back->allocations[0].gpu_uuids, std::vector<std::string>{gpu_a});
  EXPECT_EQ(back->allocations[1].unresolved, std::vector<std::string>{"MIG-1"});

  gpu_allocations down;
  down.node = "gpu-node-2";
  down.available = false;
  down.error = "kubelet.sock: List: UNAVAILABLE";
  auto unavailable = decode_gpu_allocations(encode_gpu_allocations(down));
  ASSERT_TRUE(unavailable.has_value());
  EXPECT_FALSE(unavailable->available);
  EXPECT_EQ(unavailable->error, down.error);

  const std::pair<const char*, const char*> bad[] = {
    {"", "body"},
    {"[]", "body"},
    {R"({"observedAt":"2026-11-25T10:00:00Z"})", "nodeName"},
    {R"({"nodeName":"n"})", "observedAt"},
    {R"({"nodeName":"n","observedAt":"yesterday"})", "observedAt"},
    {R"({"nodeName":"n","observedAt":"2026-11-25T10:00:00Z","available":"yes"})",
     "available"},
    {R"({"nodeName":"n","observedAt":"2026-11-25T10:00:00Z","allocations":{}})",
     "allocations"},
    {R"({"nodeName":"n","observedAt":"2026-11-25T10:00:00Z","allocations":[{"pod":"p"}]})",
     "allocations[0].namespace"},
    {R"({"nodeName":"n","observedAt":"2026-11-25T10:00:00Z","allocations":[{"namespace":"a","pod":"p","gpuUuids":[1]}]})",
     "allocations[0].gpuUuids"},
  };
  for (const auto& [body, where] : bad) {
    auto decoded = decode_gpu_allocations(body);
    ASSERT_FALSE(decoded.has_value()) << body;
    EXPECT_EQ(decoded.error().where, where) << body;
  }
}

TEST(pod_resources_client, lists_allocations_from_a_real_grpc_kubelet) {
  const auto socket = test::fresh_directory() + "/kubelet.sock";
  test::fake_kubelet_service_with_get service;
  service.set_list(device_plugin_list());
  v1::AllocatableResourcesResponse allocatable;
  auto* devices = allocatable.add_devices();
  devices->set_resource_name("nvidia.com/gpu");
  for (const char* id : {gpu_a, gpu_b, gpu_c})
    devices->add_device_ids(id);
  service.set_allocatable(allocatable);
  test::fake_kubelet kubelet(socket, service);
  ASSERT_TRUE(kubelet.running());

  pod_resources_client client(socket);
  auto list = client.list();
  ASSERT_TRUE(list.has_value()) << list.error().to_string();
  EXPECT_EQ(list->pod_resources_size(), 4);
  auto gpus = client.allocatable();
  ASSERT_TRUE(gpus.has_value()) << gpus.error().to_string();
  EXPECT_EQ(allocatable_gpus(*gpus, three_gpus(), gpu_resource_names{}),
            (std::vector<std::string>{gpu_a, gpu_b, gpu_c}));
  auto one = client.get("team-a", "train-0");
  ASSERT_TRUE(one.has_value()) << one.error().to_string();
  EXPECT_EQ(one->pod_resources().name(), "train-0");
  EXPECT_TRUE(client.get_supported());
}

TEST(pod_resources_client, a_kubelet_without_get_says_unimplemented) {
  const auto socket = test::fresh_directory() + "/kubelet.sock";
  test::fake_kubelet_service service; // before 1.27: no Get
  test::fake_kubelet kubelet(socket, service);
  pod_resources_client client(socket);
  EXPECT_TRUE(client.list().has_value());
  auto one = client.get("team-a", "train-0");
  ASSERT_FALSE(one.has_value());
  EXPECT_NE(one.error().to_string().find("Get: UNIMPLEMENTED"), std::string::npos)
    << one.error().to_string();
  EXPECT_FALSE(client.get_supported());
}

TEST(pod_resources_client, a_missing_socket_is_a_clear_error_and_a_retry_works) {
  const auto socket = test::fresh_directory() + "/kubelet.sock";
  pod_resources_client client(socket, std::chrono::milliseconds{2000});
  auto absent = client.list();
  ASSERT_FALSE(absent.has_value());
  EXPECT_EQ(absent.error().where, socket);
  EXPECT_NE(absent.error().what.find("List: UNAVAILABLE"), std::string::npos)
    << absent.error().to_string();

  test::fake_kubelet_service service;
  service.set_list(device_plugin_list());
  test::fake_kubelet kubelet(socket, service); // the kubelet comes up
  auto listed = client.list();                 // the next poll, on a fresh channel
  ASSERT_TRUE(listed.has_value()) << listed.error().to_string();
  EXPECT_EQ(listed->pod_resources_size(), 4);
}

} // namespace
} // namespace vigil::agent
