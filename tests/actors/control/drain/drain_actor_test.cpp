// The node's drains (seed 000 §3): partial for a GPU reset, full otherwise,
// disruption budgets, per-namespace modes, cancel on recovery, held by a
// tripped breaker, dry-run.
#define CAF_SUITE control_drain
#include <caf/test/dsl.hpp>

#include "tests/actors/control/control_fixture.hpp"

using namespace caf;
using namespace vigil;
using namespace vigil::test;
using nlohmann::json;

CAF_TEST_FIXTURE_SCOPE(control_drain_tests, control_fixture)

CAF_TEST(a_partial_drain_evicts_only_the_pod_on_the_bad_gpu) {
  add_pod("train", pod_object("job-a", "node-1", {"GPU-a"}));
  add_pod("train", pod_object("job-b", "node-1", {"GPU-b"}));
  add_pod("train", pod_object("web", "node-1"));
  add_pod("monitoring", pod_object("exporter", "node-1", {"GPU-a"}, {}, "DaemonSet"));
  add_pod("train", pod_object("job-c", "node-2", {"GPU-c"}));
  start();
  post({reset_needed("node-1", "GPU-a")});
  CAF_CHECK(cordoned("node-1"));
  CAF_CHECK(terminating("train", "job-a"));
  CAF_CHECK(!terminating("train", "job-b"));
  CAF_CHECK(!terminating("train", "web"));
  CAF_CHECK(!terminating("monitoring", "exporter"));
  CAF_CHECK(!terminating("train", "job-c"));
  CAF_CHECK_EQUAL(drain_rows("started"), 1u);
  CAF_CHECK_EQUAL(drain_rows("succeeded"), 0u); // job-a is still in its grace period
  kubelet_finishes();
  advance(std::chrono::seconds{5});
  CAF_CHECK_EQUAL(drain_rows("succeeded"), 1u);
  auto summary = node_summary("node-1");
  CAF_CHECK_EQUAL(summary["drainedKey"], "partial:GPU-a");
  CAF_CHECK_EQUAL(summary["evictions"], 1);
  CAF_CHECK_EQUAL(summary["draining"], "");
  // A new control plane over the same journal knows the drain completed.
  restart();
  CAF_CHECK(cordoned("node-1"));
  CAF_CHECK_EQUAL(drain_rows("started"), 1u);
  auto rebuilt = node_summary("node-1");
  CAF_CHECK_EQUAL(rebuilt["drainedKey"], "partial:GPU-a");
}

namespace {

// A pod as a real cluster has it: the GPUs it requests, no devices annotation.
json unannotated_pod(const std::string& name, std::vector<std::string> gpus) {
  auto pod = pod_object(name, "node-1", std::move(gpus));
  pod["metadata"].erase("annotations");
  return pod;
}

// A pod that holds its GPU through a ResourceClaim named <name>-gpu.
json claiming_pod(const std::string& name) {
  auto pod = unannotated_pod(name, {});
  pod["spec"]["resourceClaims"] =
    json::array({{{"name", "gpu"}, {"resourceClaimName", name + "-gpu"}}});
  return pod;
}

} // namespace

// seed 000 §3.1 in production: the node's agent reports the kubelet's
// PodResources allocations; with them the drain for a GPU reset is partial.
CAF_TEST(the_agents_gpu_allocations_make_the_drain_partial) {
  add_pod("train", unannotated_pod("job-a", {"GPU-a"}));
  add_pod("train", unannotated_pod("job-b", {"GPU-b"}));
  start();
  gpu_allocations report;
  report.node = "node-1";
  report.observed = from_unix(1'700'000'000, 0);
  report.allocations = {{"train", "job-a", "main", "nvidia.com/gpu", {"GPU-a"}, {}},
                        {"train", "job-b", "main", "nvidia.com/gpu", {"GPU-b"}, {}}};
  self->send(fleet, allocations_atom::value, report);
  sched.run();
  post({reset_needed("node-1", "GPU-a")});
  CAF_CHECK(terminating("train", "job-a"));
  CAF_CHECK(!terminating("train", "job-b"));
  auto started = drain_started_row();
  CAF_CHECK_EQUAL(started["scope"], "partial");
  CAF_CHECK_EQUAL(started["evict"][0]["gpuSource"], "kubelet");
  // Job attribution: the pod that held the failing GPU at the fault.
  CAF_CHECK_EQUAL(journal_rows(gpu_holders_row), 1u);
}

// Without them (the agent could not ask the kubelet), the drain is full and
// its journal row says why.
CAF_TEST(without_the_kubelets_allocations_the_drain_is_full_and_says_why) {
  add_pod("train", unannotated_pod("job-a", {"GPU-a"}));
  add_pod("train", unannotated_pod("job-b", {"GPU-b"}));
  start();
  gpu_allocations down;
  down.node = "node-1";
  down.observed = from_unix(1'700'000'000, 0);
  down.available = false;
  down.error = "kubelet.sock: List: UNAVAILABLE: failed to connect";
  self->send(fleet, allocations_atom::value, down);
  sched.run();
  post({reset_needed("node-1", "GPU-a")});
  CAF_CHECK(terminating("train", "job-a"));
  CAF_CHECK(terminating("train", "job-b"));
  auto started = drain_started_row();
  CAF_CHECK_EQUAL(started["scope"], "full");
  auto why = started["why"].get<std::string>();
  CAF_CHECK(why.find("List: UNAVAILABLE: failed to connect") != std::string::npos);
}

// On a cluster with Dynamic Resource Allocation the control plane finds the
// holders itself: the pod's ResourceClaim names a device of the node's
// ResourceSlice, whose uuid attribute is the failing GPU.
CAF_TEST(dra_claims_make_the_drain_partial_without_the_agent) {
  for (const auto* name : {"job-a", "job-b"})
    add_pod("train", claiming_pod(name));
  const auto* slices = store->find_type("resource.k8s.io", "v1", "resourceslices");
  const auto* claims = store->find_type("resource.k8s.io", "v1", "resourceclaims");
  CAF_REQUIRE(slices != nullptr && claims != nullptr);
  json devices = json::array();
  for (const auto& [name, uuid] : {std::pair{"gpu-0", "GPU-a"}, {"gpu-1", "GPU-b"}})
    devices.push_back({{"name", name}, {"attributes", {{"uuid", {{"string", uuid}}}}}});
  CAF_REQUIRE(store
                ->create(*slices, "",
                         {{"metadata", {{"name", "node-1-gpu.nvidia.com"}}},
                          {"spec",
                           {{"driver", "gpu.nvidia.com"},
                            {"nodeName", "node-1"},
                            {"pool", {{"name", "node-1"}}},
                            {"devices", devices}}}})
                .ok());
  for (const auto& [pod, device] : {std::pair{"job-a", "gpu-0"}, {"job-b", "gpu-1"}}) {
    json result = {{"request", "gpu"},
                   {"driver", "gpu.nvidia.com"},
                   {"pool", "node-1"},
                   {"device", device}};
    json claim = {
      {"metadata", {{"name", std::string(pod) + "-gpu"}}},
      {"spec", json::object()},
      {"status",
       {{"allocation", {{"devices", {{"results", {result}}}}}},
        {"reservedFor", {{{"resource", "pods"}, {"name", pod}, {"uid", "u"}}}}}}};
    CAF_REQUIRE(store->create(*claims, "train", claim).ok());
  }
  start();
  post({reset_needed("node-1", "GPU-a")});
  CAF_CHECK(terminating("train", "job-a"));
  CAF_CHECK(!terminating("train", "job-b"));
  auto started = drain_started_row();
  CAF_CHECK_EQUAL(started["scope"], "partial");
  CAF_CHECK_EQUAL(started["evict"][0]["gpuSource"], "dra");
  // Only the namespace of the pods that claim resources was read.
  CAF_CHECK_EQUAL(requests_to("/resourceclaims"), 1u);
  CAF_CHECK_EQUAL(requests_to("/apis/resource.k8s.io/v1/namespaces/train/resourceclaims"),
                  1u);
}

// A pod that claims resources but whose claims do not say which devices it
// holds (none allocated here, nor any ResourceSlice) may hold the failing GPU:
// the drain is full. It was taken for a pod without GPUs and kept, and the
// GPU reset under it.
CAF_TEST(dra_claims_that_name_no_device_make_the_drain_full) {
  for (const auto* name : {"job-a", "job-b"})
    add_pod("train", claiming_pod(name));
  start();
  post({reset_needed("node-1", "GPU-a")});
  CAF_CHECK(terminating("train", "job-a"));
  CAF_CHECK(terminating("train", "job-b"));
  auto started = drain_started_row();
  CAF_CHECK_EQUAL(started["scope"], "full");
  const auto why = started["why"].get<std::string>();
  CAF_CHECK(why.find("GPU mapping of pod train/job-a unknown") != std::string::npos);
}

// A drain reads ResourceClaims only where the node's pods claim resources:
// none here (device-plugin GPUs), so no claim or slice is read. Listing
// every claim of the cluster for each drain made a mass event's drains cost
// what the cluster holds (issue 22).
CAF_TEST(a_node_whose_pods_claim_nothing_reads_no_resource_claims) {
  add_pod("train", unannotated_pod("job-a", {"GPU-a"}));
  add_pod("train", pod_object("web", "node-1"));
  start();
  post({reboot_needed("node-1", "GPU-a")});
  CAF_CHECK(terminating("train", "job-a"));
  CAF_CHECK_EQUAL(drain_rows("started"), 1u);
  CAF_CHECK_EQUAL(requests_to("/resourceclaims"), 0u);
  CAF_CHECK_EQUAL(requests_to("/resourceslices"), 0u);
}

// Each drain run is journaled, though a second one of the node looks the
// same as the first (same key, nothing to evict): a restart then knows the
// node's current quarantine was drained.
CAF_TEST(a_second_drain_like_the_first_is_journaled_too) {
  start();
  auto fault = [&](int n) {
    auto e = reboot_needed("node-1", "GPU-a");
    e.id += "-" + std::to_string(n);
    return e;
  };
  auto recovery = [&](int n) {
    auto e = xid("node-1", "GPU-a", true);
    e.id += "-" + std::to_string(n);
    return e;
  };
  post({fault(1)});
  CAF_CHECK_EQUAL(drain_rows("succeeded"), 1u);
  post({recovery(1)});
  CAF_CHECK(!cordoned("node-1"));
  advance(std::chrono::hours{1});
  post({fault(2)});
  CAF_CHECK(cordoned("node-1"));
  CAF_CHECK_EQUAL(drain_rows("started"), 2u);
  CAF_CHECK_EQUAL(drain_rows("succeeded"), 2u);
  restart();
  auto rebuilt = node_summary("node-1"); // a named copy: the check keeps references
  CAF_CHECK_EQUAL(rebuilt["drainedKey"], "full");
}

CAF_TEST(a_full_drain_waits_for_the_disruption_budget_and_skips_daemonsets) {
  add_pod("train", pod_object("w0", "node-1", {"GPU-a"}, {{"app", "train"}}));
  add_pod("train", pod_object("w1", "node-2", {"GPU-a"}, {{"app", "train"}}));
  add_pod("serve", pod_object("api", "node-1"));
  add_pod("monitoring", pod_object("exporter", "node-1", {}, {}, "DaemonSet"));
  add_pod("kube-system", pod_object("dns", "node-1"));
  add_budget("train", "train", 2);
  start();
  post({reboot_needed("node-1", "GPU-a")});
  CAF_CHECK(terminating("serve", "api"));
  CAF_CHECK(!terminating("train", "w0")); // 429: the budget allows no disruption
  CAF_CHECK(!terminating("monitoring", "exporter"));
  CAF_CHECK(!terminating("kube-system", "dns"));
  // The owner scales up elsewhere: the budget now allows one disruption.
  add_pod("train", pod_object("w2", "node-3", {"GPU-a"}, {{"app", "train"}}));
  advance(std::chrono::seconds{5}); // the eviction's retry comes due
  CAF_CHECK(terminating("train", "w0"));
  kubelet_finishes();
  advance(std::chrono::seconds{5});
  CAF_CHECK_EQUAL(drain_rows("succeeded"), 1u);
  auto summary = node_summary("node-1");
  CAF_CHECK_EQUAL(summary["drainedKey"], "full");
  CAF_CHECK_EQUAL(summary["evictions"], 2);
  // A later partial drain in the same quarantine is skipped (seed 000 §3.1).
  post({reset_needed("node-1", "GPU-b")});
  CAF_CHECK_EQUAL(drain_rows("started"), 1u);
}

CAF_TEST(namespaces_drain_by_their_modes) {
  auto drain = std::make_shared<drain_settings>();
  drain->config.namespaces = {
    {"batch", control::drain_mode::allow_completion, {}},
    {"serve", control::drain_mode::delete_after_timeout, std::chrono::minutes{2}}};
  settings->drain = drain;
  add_pod("batch", pod_object("etl", "node-1"));
  add_pod("serve", pod_object("api", "node-1"));
  add_pod("train", pod_object("job", "node-1", {"GPU-a"}));
  start();
  post({reboot_needed("node-1", "GPU-a")});
  CAF_CHECK(terminating("train", "job"));  // Immediate: evicted now
  CAF_CHECK(!terminating("batch", "etl")); // AllowCompletion: never evicted
  CAF_CHECK(!terminating("serve", "api")); // DeleteAfterTimeout: not yet
  kubelet_finishes();
  advance(std::chrono::minutes{1});
  CAF_CHECK(!terminating("serve", "api"));
  advance(std::chrono::minutes{1}); // the namespace's timeout: deleted
  CAF_CHECK(terminating("serve", "api"));
  kubelet_finishes();
  // The batch pod finishes on its own; the drain sees it and is done.
  CAF_REQUIRE(store
                ->patch(*pods(), "batch", "etl",
                        json{{"status", {{"phase", "Succeeded"}}}},
                        kube::patch_type::merge, true)
                .ok());
  CAF_CHECK_EQUAL(drain_rows("succeeded"), 0u);
  advance(std::chrono::seconds{5});
  CAF_CHECK_EQUAL(drain_rows("succeeded"), 1u);
  auto rows = journal_db->read({});
  CAF_REQUIRE(rows.has_value());
  for (const auto& r : *rows)
    if (r.kind == control::drain_row && json::parse(r.body)["phase"] == "succeeded") {
      auto body = json::parse(r.body);
      CAF_CHECK_EQUAL(body["evictions"], 1);
      CAF_CHECK_EQUAL(body["deletions"], 1);
    }
  CAF_CHECK_EQUAL(settings->counters->pod_deletions.load(), 1u); // /metrics
}

CAF_TEST(a_recovery_cancels_a_drain) {
  add_pod("train", pod_object("w0", "node-1", {"GPU-a"}, {{"app", "train"}}));
  add_pod("train", pod_object("w1", "node-2", {"GPU-a"}, {{"app", "train"}}));
  add_budget("train", "train", 2);
  start();
  post({reboot_needed("node-1", "GPU-a")});
  {
    auto summary = node_summary("node-1"); // a named copy: the check keeps references
    CAF_CHECK_EQUAL(summary["draining"], "full");
  }
  post({xid("node-1", "GPU-a", true)});
  CAF_CHECK(!cordoned("node-1"));
  CAF_CHECK_EQUAL(drain_rows("cancelled"), 1u);
  {
    auto summary = node_summary("node-1"); // a named copy: the check keeps references
    CAF_CHECK_EQUAL(summary["draining"], "");
  }
  // No eviction is asked after the cancel.
  auto posts = requests("POST");
  add_pod("train", pod_object("w2", "node-3", {"GPU-a"}, {{"app", "train"}}));
  advance(std::chrono::minutes{5});
  CAF_CHECK_EQUAL(requests("POST"), posts);
  CAF_CHECK(!terminating("train", "w0"));
}

CAF_TEST(a_tripped_breaker_holds_new_drains) {
  control::breaker_config config;
  config.max_cordoned_nodes = 1;
  add_pod("train", pod_object("w0", "node-1", {"GPU-b"}));
  start(config);
  post({reset_needed("node-1", "GPU-a")}); // cordoned; nothing holds GPU-a
  CAF_CHECK_EQUAL(drain_rows("succeeded"), 1u);
  post({xid("node-2", "GPU-a")}); // trips the breaker
  CAF_CHECK(!cordoned("node-2"));
  post({reboot_needed("node-1", "GPU-b")}); // wants a full drain now
  {
    auto summary = node_summary("node-1"); // a named copy: the check keeps references
    CAF_CHECK_EQUAL(summary["drainsHeld"], 1);
  }
  CAF_CHECK(!terminating("train", "w0"));
  advance(std::chrono::seconds{60}); // held again: said once
  CAF_CHECK_EQUAL(events_posted("DrainHeldByBreaker", "node-1"), 1u);
  CAF_CHECK_EQUAL(ask(breaker, reset_atom::value), "reset");
  advance(std::chrono::seconds{60}); // the node actor asks again
  CAF_CHECK(terminating("train", "w0"));
}

CAF_TEST(dry_run_journals_the_drain_plan_and_evicts_nothing) {
  settings->dry_run = true;
  add_pod("train", pod_object("job-a", "node-1", {"GPU-a"}));
  start();
  post({reset_needed("node-1", "GPU-a")});
  CAF_CHECK_EQUAL(drain_rows("started"), 1u);
  CAF_CHECK_EQUAL(drain_rows("dry_run"), 1u);
  CAF_CHECK(!terminating("train", "job-a"));
}

CAF_TEST_FIXTURE_SCOPE_END()
