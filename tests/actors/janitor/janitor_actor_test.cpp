// The janitor's controllers, the GPUReset one (seed 001, Reset Workflow) and the
// RebootNode one, the test playing the GPU operator, the Job controller and the
// kubelet; the cluster and the API server stand-in are the control actor tests'
// fixture (tests/actors/control/control_fixture.hpp).
#define CAF_SUITE janitor
#include <caf/test/dsl.hpp>

#include "actors/janitor/janitor_actor.hpp"
#include "actors/janitor/janitor_metrics.hpp"
#include "runtime/control_plane.hpp"
#include "runtime/sim/kube/kube_client_in_process.hpp"
#include "runtime/sim/simulated_cluster.hpp"
#include "tests/actors/control/control_fixture.hpp"

using namespace caf;
using namespace vigil;
using namespace vigil::test;
using nlohmann::json;

namespace {

// The API server failing the first `verb` request to `path` with `error`
// (a status write lost to the client's timeout, a 503 from a busy server):
// every other request goes through to `gateway`.
struct lossy_gateway_state {
  std::string verb;
  std::string lose; ///< the path of the request to fail, once
  kube::kube_error error;
  bool lost = false;
  static inline const char* name = "lossy_gateway";
};

using lossy_gateway_actor =
  stateful_actor<lossy_gateway_state, kube_gateway_handle::base>;

kube::kube_error timed_out() {
  kube::kube_error timeout;
  timeout.reason = "Transport";
  timeout.message = "timed out";
  return timeout;
}

kube::kube_error http_error(long status, std::string reason) {
  kube::kube_error e;
  e.status = status;
  e.reason = std::move(reason);
  e.message = "from the test";
  return e;
}

kube_gateway_handle::behavior_type lossy_gateway(lossy_gateway_actor* self,
                                                 kube_gateway_handle gateway,
                                                 std::string lose, std::string verb,
                                                 kube::kube_error error) {
  self->state.verb = std::move(verb);
  self->state.lose = std::move(lose);
  self->state.error = std::move(error);
  return {
    [=](kube::kube_request& request) -> result<kube::kube_result> {
      auto& st = self->state;
      if (!st.lost && request.verb == st.verb && request.path == st.lose) {
        st.lost = true;
        return kube::kube_result{st.error};
      }
      return self->delegate(gateway, std::move(request));
    },
    [=](watch_atom atom, kube_watch_spec& spec) -> delegated<std::uint64_t> {
      return self->delegate(gateway, atom, std::move(spec));
    },
    [=](unwatch_atom atom, std::uint64_t id) { self->send(gateway, atom, id); },
  };
}

// The API server never answering one path (a request stuck until the
// client's timeout, much longer than the test): everything else goes through.
struct stalling_gateway_state {
  std::string stall; ///< the path of the requests left unanswered
  std::vector<response_promise> held;
  static inline const char* name = "stalling_gateway";
};

using stalling_gateway_actor =
  stateful_actor<stalling_gateway_state, kube_gateway_handle::base>;

kube_gateway_handle::behavior_type stalling_gateway(stalling_gateway_actor* self,
                                                    kube_gateway_handle gateway,
                                                    std::string stall) {
  self->state.stall = std::move(stall);
  return {
    [=](kube::kube_request& request) -> result<kube::kube_result> {
      auto rp = self->make_response_promise();
      if (request.path == self->state.stall) {
        self->state.held.push_back(rp);
        return rp;
      }
      self->request(gateway, infinite, std::move(request))
        .then([rp](kube::kube_result& r) mutable { rp.deliver(std::move(r)); });
      return rp;
    },
    [=](watch_atom atom, kube_watch_spec& spec) -> delegated<std::uint64_t> {
      return self->delegate(gateway, atom, std::move(spec));
    },
    [=](unwatch_atom atom, std::uint64_t id) { self->send(gateway, atom, id); },
  };
}

// Notes each request's verb and path before passing it on.
class recording_client final : public kube::kube_client {
public:
  explicit recording_client(std::shared_ptr<kube::kube_client> next)
    : next_(std::move(next)) {}
  void send(kube::kube_request request, response_handler done) override {
    sent.push_back(request.verb + " " + request.path);
    next_->send(std::move(request), std::move(done));
  }
  std::uint64_t watch(kube::kube_request request, line_handler on_line,
                      end_handler on_end) override {
    return next_->watch(std::move(request), std::move(on_line), std::move(on_end));
  }
  void stop_watch(std::uint64_t id) override { next_->stop_watch(id); }
  std::size_t count(const std::string& line) const {
    return static_cast<std::size_t>(std::count(sent.begin(), sent.end(), line));
  }
  std::vector<std::string> sent;

private:
  std::shared_ptr<kube::kube_client> next_;
};

} // namespace

// `vigil control` hands the in-process janitor a client of its own
// (janitor.kube_api_qps): its requests never wait in the node actors' limiter.
CAF_TEST_FIXTURE_SCOPE(janitor_plane_tests, test_coordinator_fixture<>)

CAF_TEST(the_in_process_janitor_lists_its_crs_through_a_client_of_its_own) {
  kube::in_process_api api;
  api.with_store([](kube::object_store& s) { demo::populate(s, demo::cluster_spec{}); });
  auto main_client = std::make_shared<recording_client>(api.client());
  auto janitor_client = std::make_shared<recording_client>(api.client());
  auto journal =
    make_sqlite_journal_store(vigil::test::fresh_directory() + "/journal.db");
  CAF_REQUIRE(journal->open().has_value());
  vigil_config config;
  config.control.leader_election = false;
  config.janitor.in_process = true;
  control_plane_options options;
  options.own_threads = false;
  options.memory_keeper = false;
  options.janitor_client = janitor_client;
  auto plane = spawn_control_plane(
    sys, config, std::shared_ptr<journal_store>(std::move(journal)), main_client,
    std::make_shared<caf_clock>(sys.clock(), from_unix(1'800'000'000, 0)), options);
  CAF_REQUIRE(plane.has_value());
  sched.run();
  const std::string list_resets = "GET /apis/vigil.dev/v1alpha1/gpuresets";
  CAF_CHECK_EQUAL(janitor_client->count(list_resets), 1u);
  CAF_CHECK_EQUAL(main_client->count(list_resets), 0u);
  CAF_CHECK(!main_client->sent.empty()); // the fleet's Node LIST
  for (const auto& [name, actor] : plane->named)
    anon_send_exit(actor, exit_reason::user_shutdown);
  sched.run();
}

CAF_TEST_FIXTURE_SCOPE_END()

CAF_TEST_FIXTURE_SCOPE(janitor_tests, control_fixture)

CAF_TEST(the_janitor_resets_a_gpu_and_restores_only_its_own_labels) {
  jobs_only = true;
  auto metrics = std::make_shared<janitor_metrics>();
  janitor_settings js;
  js.metrics = metrics;
  auto n = node("node-1");
  for (auto label : janitor::operand_deploy_labels)
    n["metadata"]["labels"][std::string{label}] = "true";
  CAF_REQUIRE(store->update(*nodes(), "", "node-1", n, false).ok());
  json operand = pod_object("dcgm-xyz", "node-1", {}, {{"app", "nvidia-dcgm"}});
  add_pod("gpu-operator", operand);
  add_gpu_reset("reset-1", "node-1", "GPU-a");
  auto janitor = sys.spawn(janitor_controllers, js, gateway, time);
  run();
  auto labels = node("node-1")["metadata"]["labels"];
  CAF_CHECK_EQUAL(labels.value("nvidia.com/gpu.deploy.dcgm", ""), "false");
  auto status = [&] { return crs("gpuresets")[0]["status"]; };
  CAF_CHECK_EQUAL(status().value("phase", std::string{}), "TearingDown");
  // The GPU operator removes its operand.
  store->remove(*pods(), "gpu-operator", "dcgm-xyz", {});
  kubelet_finishes();
  advance(js.poll);
  CAF_CHECK_EQUAL(status().value("phase", std::string{}), "Resetting");
  auto job_name = status()["jobName"].get<std::string>();
  auto job =
    store->get(*store->find_type("batch", "v1", "jobs"), "vigil-system", job_name);
  CAF_REQUIRE(job.ok());
  auto pod_spec = (*job.value)["spec"]["template"]["spec"];
  CAF_CHECK_EQUAL(pod_spec.value("nodeName", ""), "node-1");
  // Someone else sets one of the labels while the reset runs.
  CAF_REQUIRE(
    store
      ->patch(*nodes(), "", "node-1",
              json{{"metadata",
                    {{"labels", {{"nvidia.com/gpu.deploy.dcgm-exporter", "pinned"}}}}}},
              kube::patch_type::merge, false)
      .ok());
  // The Job completes.
  job_status(job_name, {{"succeeded", 1},
                        {"conditions", {{{"type", "Complete"}, {"status", "True"}}}}});
  advance(js.poll);
  labels = node("node-1")["metadata"]["labels"];
  CAF_CHECK_EQUAL(labels.value("nvidia.com/gpu.deploy.dcgm", ""), "true");
  CAF_CHECK_EQUAL(labels.value("nvidia.com/gpu.deploy.device-plugin", ""), "true");
  CAF_CHECK_EQUAL(labels.value("nvidia.com/gpu.deploy.dcgm-exporter", ""), "pinned");
  // seed 001 step 5: not done before the operands run again.
  advance(js.poll);
  CAF_CHECK_EQUAL(status().value("phase", std::string{}), "Restoring");
  // The GPU operator redeploys what the labels ask for (not the exporter:
  // its label is someone else's now); one by one.
  add_pod("gpu-operator", pod_object("dcgm-abc", "node-1", {}, {{"app", "nvidia-dcgm"}}));
  add_pod("gpu-operator", pod_object("device-plugin-abc", "node-1", {},
                                     {{"app", "nvidia-device-plugin-daemonset"}}));
  advance(js.poll);
  CAF_CHECK_EQUAL(status().value("phase", std::string{}), "Restoring");
  add_pod("gpu-operator",
          pod_object("gfd-abc", "node-1", {}, {{"app", "gpu-feature-discovery"}}));
  advance(js.poll);
  CAF_CHECK_EQUAL(status().value("phase", std::string{}), "Succeeded");
  CAF_CHECK(!crs("gpuresets")[0]["metadata"].contains("finalizers")
            || crs("gpuresets")[0]["metadata"]["finalizers"].empty());
  // seed 001 "Metrics", with its labels and status values.
  auto text = render_janitor_metrics(*metrics);
  const std::string gpu =
    "gpu_id=\"GPU-a\",gpu_type=\"NVIDIA-H100-80GB-HBM3\",node=\"node-1\"";
  CAF_CHECK(text.find("gpu_reset_requests_total{" + gpu + "} 1\n") != std::string::npos);
  CAF_CHECK(
    text.find("gpu_reset_requests_completed_total{" + gpu + ",status=\"success\"} 1\n")
    != std::string::npos);
  CAF_CHECK(text.find("gpu_reset_duration_seconds_count{gpu_type="
                      "\"NVIDIA-H100-80GB-HBM3\",node=\"node-1\",status=\"success\"} 1\n")
            != std::string::npos);
  anon_send_exit(janitor, exit_reason::user_shutdown);
  run();
}

CAF_TEST(the_janitor_restores_labels_after_a_failed_reset) {
  jobs_only = true;
  janitor_settings js;
  auto metrics = js.metrics;
  add_gpu_reset("reset-2", "node-2", "GPU-b");
  auto janitor = sys.spawn(janitor_controllers, js, gateway, time);
  run();
  advance(js.poll); // no operands: straight to the Job
  auto status = [&] { return crs("gpuresets")[0]["status"]; };
  CAF_REQUIRE_EQUAL(status().value("phase", std::string{}), "Resetting");
  auto job_name = status()["jobName"].get<std::string>();
  job_status(
    job_name,
    {{"failed", 1},
     {"conditions",
      {{{"type", "Failed"}, {"status", "True"}, {"reason", "BackoffLimitExceeded"}}}}});
  advance(js.poll);
  advance(js.poll);
  CAF_CHECK_EQUAL(status().value("phase", std::string{}), "Failed");
  CAF_CHECK_EQUAL(status().value("failureReason", std::string{}), "job_failed");
  auto labels = node("node-2")["metadata"]["labels"];
  for (auto label : janitor::operand_deploy_labels)
    CAF_CHECK(!labels.contains(std::string{label})); // absent before, absent again
  auto text = render_janitor_metrics(*metrics);
  CAF_CHECK(text.find("gpu_reset_requests_completed_total{gpu_id=\"GPU-b\",gpu_type="
                      "\"NVIDIA-H100-80GB-HBM3\",node=\"node-2\",status=\"failure\"} 1\n")
            != std::string::npos);
  CAF_CHECK(
    text.find("gpu_reset_failure_reasons_total{gpu_type="
              "\"NVIDIA-H100-80GB-HBM3\",node=\"node-2\",reason=\"job_failed\"} 1\n")
    != std::string::npos);
  anon_send_exit(janitor, exit_reason::user_shutdown);
  run();
}

CAF_TEST(the_janitor_calls_a_reboot_done_when_the_boot_id_changed_and_the_node_is_ready) {
  jobs_only = true;
  janitor_settings js;
  boot("node-3", "boot-1", "True");
  add_reboot_node("reboot-3", "node-3");
  auto janitor = sys.spawn(janitor_controllers, js, gateway, time);
  run();
  auto status = [&] { return crs("rebootnodes")[0]["status"]; };
  CAF_CHECK_EQUAL(status().value("phase", std::string{}), "Rebooting");
  CAF_CHECK_EQUAL(status().value("bootIdBefore", std::string{}), "boot-1");
  boot("node-3", "boot-2", "False"); // back, not Ready yet
  advance(js.poll);
  CAF_CHECK_EQUAL(status().value("phase", std::string{}), "Rebooting");
  boot("node-3", "boot-2", "True");
  advance(js.poll);
  CAF_CHECK_EQUAL(status().value("phase", std::string{}), "Succeeded");
  CAF_CHECK_EQUAL(status().value("bootIdAfter", std::string{}), "boot-2");
  CAF_CHECK(render_janitor_metrics(*js.metrics)
              .find("reboot_node_requests_completed_total{node=\"node-3\",status="
                    "\"success\"} 1\n")
            != std::string::npos);
  anon_send_exit(janitor, exit_reason::user_shutdown);
  run();
}

// seed 001 step 5 (the labels restored whatever the outcome): deleting a
// GPUReset mid-reset brings the operands back; the janitor's finalizer holds the
// CR until the labels are restored.
CAF_TEST(a_gpureset_deleted_mid_reset_gets_its_labels_restored_before_it_goes) {
  jobs_only = true;
  janitor_settings js;
  auto n = node("node-1");
  for (auto label : janitor::operand_deploy_labels)
    n["metadata"]["labels"][std::string{label}] = "true";
  CAF_REQUIRE(store->update(*nodes(), "", "node-1", n, false).ok());
  add_pod("gpu-operator", pod_object("dcgm-xyz", "node-1", {}, {{"app", "nvidia-dcgm"}}));
  add_gpu_reset("reset-4", "node-1", "GPU-a");
  auto janitor = sys.spawn(janitor_controllers, js, gateway, time);
  run();
  auto cr = crs("gpuresets")[0];
  CAF_CHECK_EQUAL(cr["metadata"]["finalizers"],
                  json::array({"vigil.dev/restore-operand-labels"}));
  CAF_CHECK_EQUAL(cr["status"].value("phase", std::string{}), "TearingDown");
  CAF_CHECK_EQUAL(cr["status"]["savedLabels"].value("nvidia.com/gpu.deploy.dcgm", ""),
                  "true");
  CAF_CHECK_EQUAL(
    node("node-1")["metadata"]["labels"].value("nvidia.com/gpu.deploy.dcgm", ""),
    "false");
  // Someone deletes the CR: the API server only marks it.
  const auto* resets = store->find_type("vigil.dev", "v1alpha1", "gpuresets");
  CAF_REQUIRE(store->remove(*resets, "", "reset-4", {}).ok());
  CAF_CHECK(crs("gpuresets")[0]["metadata"].contains("deletionTimestamp"));
  advance(js.poll);
  CAF_CHECK(crs("gpuresets").empty());
  auto labels = node("node-1")["metadata"]["labels"];
  for (auto label : janitor::operand_deploy_labels)
    CAF_CHECK_EQUAL(labels.value(std::string{label}, ""), "true");
  anon_send_exit(janitor, exit_reason::user_shutdown);
  run();
}

// seed 001 step 5: a status write that is lost leaves the labels untouched;
// the saved values are never the "false" vigil writes.
CAF_TEST(a_lost_status_write_never_loses_the_labels_to_restore) {
  jobs_only = true;
  janitor_settings js;
  auto n = node("node-1");
  for (auto label : janitor::operand_deploy_labels)
    n["metadata"]["labels"][std::string{label}] = "true";
  CAF_REQUIRE(store->update(*nodes(), "", "node-1", n, false).ok());
  add_gpu_reset("reset-5", "node-1", "GPU-a");
  // The first status write of the GPUReset is lost.
  auto lossy = sys.spawn(lossy_gateway, gateway,
                         std::string{"/apis/vigil.dev/v1alpha1/gpuresets/reset-5/status"},
                         std::string{"PATCH"}, timed_out());
  auto janitor = sys.spawn(janitor_controllers, js, lossy, time);
  run();
  CAF_REQUIRE(deref<lossy_gateway_actor>(lossy).state.lost);
  auto labels = node("node-1")["metadata"]["labels"];
  for (auto label : janitor::operand_deploy_labels)
    CAF_CHECK_EQUAL(labels.value(std::string{label}, ""), "true"); // untouched
  CAF_CHECK(!crs("gpuresets")[0].contains("status")
            || crs("gpuresets")[0]["status"].value("phase", "") == "");
  advance(js.poll);
  auto status = crs("gpuresets")[0]["status"];
  CAF_CHECK_EQUAL(status.value("phase", std::string{}), "TearingDown");
  for (auto label : janitor::operand_deploy_labels)
    CAF_CHECK_EQUAL(status["savedLabels"].value(std::string{label}, ""), "true");
  labels = node("node-1")["metadata"]["labels"];
  CAF_CHECK_EQUAL(labels.value("nvidia.com/gpu.deploy.device-plugin", ""), "false");
  anon_send_exit(janitor, exit_reason::user_shutdown);
  anon_send_exit(lossy, exit_reason::user_shutdown);
  run();
}

// One pass works on several nodes at once (janitor.max_concurrent_nodes):
// a node whose requests hang holds up only its own CRs, and the next node's
// lane starts when one ends; one node's CRs stay one at a time (seed 000
// §4.3, the node lock).
CAF_TEST(a_node_whose_requests_hang_holds_up_only_its_own_reset) {
  jobs_only = true;
  janitor_settings js;
  js.max_concurrent_nodes = 2;
  add_gpu_reset("reset-1", "node-1", "GPU-a"); // the oldest: its lane starts first
  add_gpu_reset("reset-2", "node-2", "GPU-b");
  add_gpu_reset("reset-3", "node-2", "GPU-c"); // waits for reset-2 (the node lock)
  add_gpu_reset("reset-4", "node-3", "GPU-d");
  auto stalling =
    sys.spawn(stalling_gateway, gateway, std::string{"/api/v1/nodes/node-1"});
  auto janitor = sys.spawn(janitor_controllers, js, stalling, time);
  run();
  auto phase = [&](const std::string& name) {
    for (const auto& cr : crs("gpuresets"))
      if (cr["metadata"].value("name", "") == name)
        return cr.contains("status") ? cr["status"].value("phase", std::string{})
                                     : std::string{};
    return std::string{"(gone)"};
  };
  CAF_CHECK_EQUAL(phase("reset-1"), "");            // its node's GET never returns
  CAF_CHECK_EQUAL(phase("reset-2"), "TearingDown"); // beside it
  CAF_CHECK_EQUAL(phase("reset-3"), "");            // node-2 is locked by reset-2
  CAF_CHECK_EQUAL(phase("reset-4"), "TearingDown"); // once node-2's lane ended
  auto summary = json::parse(ask(janitor, summary_atom::value));
  CAF_CHECK_EQUAL(summary.value("nodesInProgress", 0), 1); // node-1's, still waiting
  CAF_CHECK_EQUAL(summary.value("passing", false), true);
  CAF_CHECK_EQUAL(deref<stalling_gateway_actor>(stalling).state.held.size(), 1u);
  anon_send_exit(janitor, exit_reason::user_shutdown);
  anon_send_exit(stalling, exit_reason::user_shutdown);
  run();
}

// With one lane at a time the hung node holds up the whole pass: the bound
// is what the setting says.
CAF_TEST(one_lane_at_a_time_is_one_node_at_a_time) {
  jobs_only = true;
  janitor_settings js;
  js.max_concurrent_nodes = 1;
  add_gpu_reset("reset-1", "node-1", "GPU-a");
  add_gpu_reset("reset-2", "node-2", "GPU-b");
  auto stalling =
    sys.spawn(stalling_gateway, gateway, std::string{"/api/v1/nodes/node-1"});
  auto janitor = sys.spawn(janitor_controllers, js, stalling, time);
  run();
  for (const auto& cr : crs("gpuresets"))
    CAF_CHECK(!cr.contains("status") || cr["status"].value("phase", "") == "");
  anon_send_exit(janitor, exit_reason::user_shutdown);
  anon_send_exit(stalling, exit_reason::user_shutdown);
  run();
}

// A Job the API server could not create for now (a 503 after the client's
// retries) is created on the next pass: a busy API server fails no reboot
// (which would escalate to replacing the node) and no reset. A refusal that
// retrying cannot mend (403) still fails the CR, naming why.
CAF_TEST(a_job_the_api_server_could_not_create_for_now_is_created_next_pass) {
  jobs_only = true;
  janitor_settings js;
  js.reboot.bug_report.enabled = false;
  boot("node-3", "boot-1", "True");
  add_reboot_node("reboot-3", "node-3");
  auto busy = sys.spawn(lossy_gateway, gateway,
                        std::string{"/apis/batch/v1/namespaces/vigil-system/jobs"},
                        std::string{"POST"}, http_error(503, "ServiceUnavailable"));
  auto janitor = sys.spawn(janitor_controllers, js, busy, time);
  run(); // the baseline boot ID first, then the Job
  auto status = [&] { return crs("rebootnodes")[0].value("status", json::object()); };
  CAF_CHECK_EQUAL(status().value("phase", std::string{}), "Rebooting");
  advance(js.poll);
  CAF_REQUIRE(deref<lossy_gateway_actor>(busy).state.lost);
  CAF_CHECK_EQUAL(status().value("phase", std::string{}), "Rebooting");
  CAF_CHECK_EQUAL(status().value("jobName", std::string{}), "");
  CAF_CHECK(crs("jobs", "batch", "v1").empty());
  advance(js.poll);
  CAF_CHECK_EQUAL(status().value("phase", std::string{}), "Rebooting");
  CAF_CHECK_EQUAL(crs("jobs", "batch", "v1").size(), 1u);
  CAF_CHECK_NOT_EQUAL(status().value("jobName", std::string{}), "");
  CAF_CHECK(render_janitor_metrics(*js.metrics)
              .find("reboot_node_requests_total{node=\"node-3\"} 1\n")
            != std::string::npos);
  anon_send_exit(janitor, exit_reason::user_shutdown);
  anon_send_exit(busy, exit_reason::user_shutdown);
  run();
  // Forbidden: no retry mends it.
  add_gpu_reset("reset-6", "node-1", "GPU-a");
  auto forbidding = sys.spawn(lossy_gateway, gateway,
                              std::string{"/apis/batch/v1/namespaces/vigil-system/jobs"},
                              std::string{"POST"}, http_error(403, "Forbidden"));
  janitor = sys.spawn(janitor_controllers, js, forbidding, time);
  run();
  for (int pass = 0; pass < 3 && !deref<lossy_gateway_actor>(forbidding).state.lost;
       ++pass)
    advance(js.poll);
  CAF_REQUIRE(deref<lossy_gateway_actor>(forbidding).state.lost);
  json reset;
  for (const auto& r : crs("gpuresets"))
    if (r["metadata"].value("name", "") == "reset-6")
      reset = r;
  CAF_CHECK_EQUAL(reset["status"].value("failureReason", std::string{}),
                  "job_create_failed");
  anon_send_exit(janitor, exit_reason::user_shutdown);
  anon_send_exit(forbidding, exit_reason::user_shutdown);
  run();
}

CAF_TEST_FIXTURE_SCOPE_END()
