// `vigil control` as a real process against the Kubernetes API test server and a real
// PostgreSQL journal: ingest over HTTP → journal → cordon → partial drain → crash
// mid-drain → restart → recovery → uncordon. The test waits on the process's log lines
// (blocking reads, no sleeps); ctest's timeout is the only deadline.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <curl/curl.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "actors/control/drain/drain_resource.hpp"
#include "actors/control/remediation/remediation_resource.hpp"
#include "actors/janitor/gpu_reset_plan.hpp"
#include "actors/janitor/janitor_resource.hpp"
#include "runtime/journal/journal_store.hpp"
#include "runtime/sim/kube/kube_test_server.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/test_databases.hpp"

namespace vigil {
namespace {

using nlohmann::json;
using test::child_process;
using test::post_events;
using test::post_to;

json xid_event(const std::string& id, const std::string& gpu, bool healthy) {
  json e = {{"id", id},
            {"agent", "xid-monitor"},
            {"componentClass", "GPU"},
            {"checkName", "SysLogsXIDError"},
            {"isFatal", !healthy},
            {"isHealthy", healthy},
            {"errorCode", {"48"}},
            {"recommendedAction", healthy ? "NONE" : "COMPONENT_RESET"},
            {"entitiesImpacted", {{{"entityType", "GPU_UUID"}, {"entityValue", gpu}}}},
            {"nodeName", "node-1"},
            {"message", "XID 48 DBE"},
            {"generatedTimestamp", "2026-11-23T10:00:00Z"}};
  return e;
}

json node_object(const std::string& name) {
  json labels = {{"nvidia.com/gpu.present", "true"},
                 {"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}};
  for (auto label : {"nvidia.com/gpu.deploy.device-plugin", "nvidia.com/gpu.deploy.dcgm",
                     "nvidia.com/gpu.deploy.dcgm-exporter",
                     "nvidia.com/gpu.deploy.gpu-feature-discovery"})
    labels[label] = "true";
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", labels}}},
          {"spec", json::object()},
          {"status",
           {{"nodeInfo", {{"bootID", "boot-1"}}},
            {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

// Runs a shell command and returns what it printed on stdout.
std::string output_of(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr)
    return out;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;)
    out.append(buffer, n);
  pclose(pipe);
  return out;
}

json gpu_pod(const std::string& name, const std::string& gpu) {
  json devices = {
    {"devices", {{{"resourceName", "nvidia.com/gpu"}, {"deviceIds", {gpu}}}}}};
  return {{"metadata",
           {{"name", name},
            {"annotations", {{control::gpu_devices_annotation, devices.dump()}}}}},
          {"spec",
           {{"nodeName", "node-1"},
            {"containers",
             {{{"name", "main"},
               {"image", "trainer"},
               {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}}}}},
          {"status", {{"phase", "Running"}}}};
}

class control_integration : public ::testing::Test {
protected:
  void SetUp() override {
    kube::test_server_options options;
    options.tokens = {"api-token"};
    auto server = kube::kube_test_server::start(options);
    ASSERT_TRUE(server.has_value()) << server.error().to_string();
    api_ = std::move(*server);
    api_->with_store([](kube::object_store& store) {
      store.create_system_namespaces();
      // The CRDs vigil install prints, installed; the janitor's namespace.
      for (auto [plural, kind] :
           {std::pair<const char*, const char*>{"gpuresets", "GPUReset"},
            {"rebootnodes", "RebootNode"},
            {"terminatenodes", "TerminateNode"}})
        store.register_type(
          {"vigil.dev", "v1alpha1", plural, kind, false, true, {}, true});
      for (const char* ns : {"vigil-system", "gpu-operator"})
        if (!store.get(*store.find_type("", "v1", "namespaces"), "", ns).ok())
          store.create(*store.find_type("", "v1", "namespaces"), "",
                       {{"metadata", {{"name", ns}}}});
      const auto* nodes = store.find_type("", "v1", "nodes");
      const auto* pods = store.find_type("", "v1", "pods");
      for (int i = 1; i <= 4; ++i)
        store.create(*nodes, "", node_object("node-" + std::to_string(i)));
      store.create(*pods, "default", gpu_pod("job-a", "GPU-a"));
      store.create(*pods, "default", gpu_pod("job-b", "GPU-b"));
    });
    dir_ = test::fresh_directory();
    journal_url_ = test::fresh_postgres_database();
    if (journal_url_.empty())
      journal_url_ = "sqlite:" + dir_ + "/journal.db";
    std::ofstream(dir_ + "/token") << "ingest-token\n";
    std::ofstream(dir_ + "/kubeconfig")
      << "apiVersion: v1\nkind: Config\n"
      << "clusters: [{name: t, cluster: {server: \"" << api_->url() << "\"}}]\n"
      << "users: [{name: u, user: {token: api-token}}]\n"
      << "contexts: [{name: c, context: {cluster: t, "
         "user: u}}]\ncurrent-context: c\n";
  }

  void TearDown() override {
    if (cluster_hand_.joinable()) {
      stop_hand_ = true;
      cluster_hand_.join();
    }
  }

  void write_config() {
    std::ofstream(dir_ + "/vigil.yaml")
      << "log: {format: json, level: info}\n"
      << "journal: {url: \"" << journal_url_ << "\"}\n"
      << "control:\n  listen: 127.0.0.1:0\n  plain_http: true\n  token_file: " << dir_
      << "/token\n"
      << "  token_review: {enabled: " << (token_review_ ? "true" : "false") << "}\n"
      << "  metrics_readers: [" << (token_review_ ? "monitoring/prometheus-k8s" : "")
      << "]\n"
      << "  kubeconfig: " << dir_ << "/kubeconfig\n"
      << "drain: {poll_seconds: 1}\n"
      << "remediation: {poll_seconds: 1, enabled: " << (remediate_ ? "true" : "false")
      << "}\n"
      << "janitor: {poll_seconds: 1}\n";
  }

  // The kubelet, the GPU operator and the validation Jobs' controller,
  // played in the background as a cluster would: an operand pod runs on node-1 exactly
  // while its deploy label is not "false"; a validation Job passes.
  void play_the_cluster() {
    cluster_hand_ = std::thread([this] {
      while (!stop_hand_) {
        api_->with_store([](kube::object_store& store) {
          const auto* pods = store.find_type("", "v1", "pods");
          const auto* jobs = store.find_type("batch", "v1", "jobs");
          // The kubelet: evicted pods go at the end of their grace period.
          for (const auto& [ns, name] : store.terminating_pods())
            store.finish_pod_deletion(ns, name);
          auto node = store.get(*store.find_type("", "v1", "nodes"), "", "node-1");
          json labels = node.ok()
                          ? (*node.value)["metadata"].value("labels", json::object())
                          : json::object();
          for (std::size_t i = 0; i < janitor::operand_apps.size(); ++i) {
            const std::string app{janitor::operand_apps[i]};
            const std::string label{janitor::operand_deploy_labels[i]};
            const bool deployed = labels.value(label, "true") != "false";
            const bool running = store.get(*pods, "gpu-operator", app).ok();
            if (deployed && !running) {
              store.create(
                *pods, "gpu-operator",
                {{"metadata",
                  {{"name", app},
                   {"labels", {{"app", app}}},
                   {"ownerReferences",
                    {{{"apiVersion", "apps/v1"},
                      {"kind", "DaemonSet"},
                      {"name", app}}}}}},
                 {"spec", {{"nodeName", "node-1"}, {"containers", {{{"name", app}}}}}},
                 {"status", {{"phase", "Running"}}}});
            } else if (!deployed && running) {
              store.remove(*pods, "gpu-operator", app, {});
              store.finish_pod_deletion("gpu-operator", app);
            }
          }
          auto listed = store.list(*jobs, "vigil-system", {});
          if (listed.ok())
            for (const auto& job : (*listed.value)["items"])
              if (job["metadata"]
                    .value("labels", json::object())
                    .contains("vigil.dev/validation")
                  && !job.value("status", json::object()).contains("conditions"))
                store.patch(
                  *jobs, "vigil-system", job["metadata"]["name"].get<std::string>(),
                  json{{"status",
                        {{"succeeded", 1},
                         {"conditions", {{{"type", "Complete"}, {"status", "True"}}}}}}},
                  kube::patch_type::merge, true);
        });
        std::this_thread::sleep_for(std::chrono::milliseconds{50});
      }
    });
  }

  // Starts `vigil control` and returns its ingest port.
  int start(std::unique_ptr<child_process>& control) {
    write_config();
    control = std::make_unique<child_process>(std::vector<std::string>{
      VIGIL_BINARY, "control", "--config", dir_ + "/vigil.yaml"});
    auto line = control->wait_for("listening on 127.0.0.1:");
    EXPECT_FALSE(line.empty()) << control->seen();
    auto at = line.find("127.0.0.1:") + 10;
    // Ingest answers 503 until this replica holds the Lease. The election
    // runs beside the listener, so its line may come before or after.
    const std::string leads = "now leads (Lease vigil/vigil-control)";
    EXPECT_TRUE(control->printed(leads)) << control->seen();
    return std::atoi(line.c_str() + at);
  }

  json pod(const std::string& name) {
    json out;
    api_->with_store([&](kube::object_store& store) {
      auto p = store.get(*store.find_type("", "v1", "pods"), "default", name);
      out = p.ok() ? *p.value : json();
    });
    return out;
  }
  bool cordoned(const std::string& node) {
    bool out = false;
    api_->with_store([&](kube::object_store& store) {
      auto n = store.get(*store.find_type("", "v1", "nodes"), "", node);
      out = n.ok() && (*n.value)["spec"].value("unschedulable", false);
    });
    return out;
  }

  json get(const char* group, const char* version, const char* plural,
           const std::string& ns, const std::string& name) {
    json out;
    api_->with_store([&](kube::object_store& store) {
      auto o = store.get(*store.find_type(group, version, plural), ns, name);
      out = o.ok() ? *o.value : json();
    });
    return out;
  }
  json items(const char* group, const char* version, const char* plural) {
    json out;
    api_->with_store([&](kube::object_store& store) {
      auto l = store.list(*store.find_type(group, version, plural), "", {});
      out = l.ok() ? (*l.value)["items"] : json::array();
    });
    return out;
  }
  // The Job controller's part: the Job ends, its pod with `exit_code`.
  void job_ends(const std::string& name, bool succeeded) {
    api_->with_store([&](kube::object_store& store) {
      const auto* jobs = store.find_type("batch", "v1", "jobs");
      json status = succeeded
                      ? json{{"succeeded", 1},
                             {"conditions", {{{"type", "Complete"}, {"status", "True"}}}}}
                      : json{{"failed", 1},
                             {"conditions",
                              {{{"type", "Failed"},
                                {"status", "True"},
                                {"reason", "BackoffLimitExceeded"}}}}};
      store.patch(*jobs, "vigil-system", name, json{{"status", status}},
                  kube::patch_type::merge, true);
    });
  }
  // The agent: kernel-log lines through the real XID parser, as HealthEvents.
  std::string agent_events(const std::string& lines) {
    const std::string source = std::getenv("VIGIL_SOURCE_DIR");
    const std::string bin = VIGIL_BINARY;
    if (!std::ifstream(dir_ + "/gpu_metadata.json"))
      output_of(bin + " parse topo --node node-1 --topo " + source
                + "/tests/data/topo/h100_8gpu_wrapped_ansi.txt --gpus " + source
                + "/tests/data/topo/h100_8gpu_query.csv > " + dir_
                + "/gpu_metadata.json");
    std::ofstream(dir_ + "/kmsg.log") << lines;
    return output_of(bin + " parse kmsg --node node-1 --boot-id boot-1 --boot-time "
                     + "2026-11-23T10:00:00Z --metadata " + dir_ + "/gpu_metadata.json < "
                     + dir_ + "/kmsg.log 2>/dev/null");
  }

  // The kubelet's part: pods in their grace period go for good.
  void kubelet_finishes() {
    api_->with_store([](kube::object_store& store) {
      for (const auto& [ns, name] : store.terminating_pods())
        store.finish_pod_deletion(ns, name);
    });
  }
  // Everything the control plane journaled, read after it stopped.
  std::optional<std::vector<journal_record>> journal_rows() {
    auto store = make_journal_store(journal_url_);
    if (!store || !(*store)->open().has_value())
      return std::nullopt;
    auto rows = (*store)->read({});
    if (!rows.has_value())
      return std::nullopt;
    return std::move(*rows);
  }

  std::unique_ptr<kube::kube_test_server> api_;
  std::string dir_;
  std::string journal_url_;
  bool remediate_ = true;
  bool token_review_ = false;
  std::thread cluster_hand_;
  std::atomic<bool> stop_hand_{false};
};

TEST_F(control_integration, ingest_cordon_partial_drain_restart_and_recovery) {
  remediate_ = false; // quarantine, drain and recovery only: no CR holds the node
  std::unique_ptr<child_process> control;
  int port = start(control);
  ASSERT_GT(port, 0);

  // Unauthenticated posts are refused and nothing is stored.
  EXPECT_EQ(post_events(port, "wrong", xid_event("e1", "GPU-a", false).dump()).first,
            401);

  auto [status, body] = post_events(
    port, "ingest-token", xid_event("e1", "GPU-a", false).dump() + "\n{\"id\":7}\n");
  EXPECT_EQ(status, 200) << body;
  auto reply = json::parse(body, nullptr, false);
  EXPECT_EQ(reply.value("accepted", 0), 1) << body;
  EXPECT_EQ(reply.value("rejected", 0), 1) << body; // the bad line, with its reason

  ASSERT_FALSE(control->wait_for("node node-1: evicted default/job-a").empty())
    << control->seen();
  EXPECT_TRUE(cordoned("node-1"));
  EXPECT_TRUE(pod("job-a")["metadata"].contains("deletionTimestamp"));
  EXPECT_FALSE(pod("job-b")["metadata"].contains("deletionTimestamp"));
  // The process dies in the middle of the drain (SIGKILL: no orderly
  // shutdown). Its successor rebuilds from the journal, keeps the node
  // cordoned and takes the drain up again.
  control.reset();
  port = start(control);
  ASSERT_GT(port, 0);
  // The fleet's rebuild line may come before the leader's, which start()
  // waited for.
  ASSERT_TRUE(control->printed("1 nodes with events")) << control->seen();
  EXPECT_TRUE(cordoned("node-1"));
  // The kubelet finishes the pod; the drain sees it go.
  kubelet_finishes();
  ASSERT_FALSE(control->wait_for("drain partial:GPU-a succeeded").empty())
    << control->seen();
  // The operator's reset, through `vigil breaker reset`: journaled, then answered.
  const auto reset_out = dir_ + "/reset.out";
  const auto reset = std::string(VIGIL_BINARY)
                     + " breaker reset --url http://127.0.0.1:" + std::to_string(port)
                     + " --token-file " + dir_ + "/token > " + reset_out + " 2>&1";
  const int reset_status = std::system(reset.c_str());
  std::ifstream reset_file(reset_out);
  const std::string reset_text((std::istreambuf_iterator<char>(reset_file)),
                               std::istreambuf_iterator<char>());
  EXPECT_TRUE(WIFEXITED(reset_status) && WEXITSTATUS(reset_status) == 0) << reset_text;
  EXPECT_NE(reset_text.find("circuit breaker reset"), std::string::npos) << reset_text;
  EXPECT_EQ(control->stop(), 0) << control->seen();

  // A new process rebuilds node-1's fault from the journal; the recovery
  // posted to it releases the node.
  port = start(control);
  ASSERT_GT(port, 0);
  // The rebuilt node actor knows its fault and that its drain completed.
  EXPECT_TRUE(control->printed("1 nodes with events")) << control->seen();
  EXPECT_TRUE(cordoned("node-1"));
  std::tie(status, body) =
    post_events(port, "ingest-token", xid_event("e2", "GPU-a", true).dump());
  EXPECT_EQ(status, 200) << body;
  ASSERT_FALSE(control->wait_for("node node-1: applied: uncordon").empty())
    << control->seen();
  EXPECT_FALSE(cordoned("node-1"));
  EXPECT_FALSE(pod("job-b")["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(control->stop(), 0) << control->seen();

  // Everything acknowledged is in the journal, in order.
  auto rows = journal_rows();
  ASSERT_TRUE(rows.has_value());
  std::vector<std::string> kinds;
  for (const auto& r : *rows)
    if (r.kind == "event" || r.kind == control::drain_row)
      kinds.push_back(
        r.kind == "event" ? "event" : json::parse(r.body)["phase"].get<std::string>());
  // The drain started before the crash may be started again after it (the
  // plan is journaled each time); it ends once, and nothing was cancelled.
  ASSERT_GE(kinds.size(), 4u);
  EXPECT_EQ(kinds.front(), "event");
  EXPECT_EQ(kinds[1], "started");
  EXPECT_EQ(std::vector<std::string>(kinds.end() - 2, kinds.end()),
            (std::vector<std::string>{"succeeded", "event"}));
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), "succeeded"), 1);
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), "cancelled"), 0);
  EXPECT_EQ(
    std::count_if(rows->begin(), rows->end(),
                  [](const journal_record& r) { return r.kind == "breaker_reset"; }),
    1);
}

// An Alertmanager webhook (a PrometheusRule on dcgm-exporter's metrics):
// the firing alert quarantines node-1 through the same journal and node actor
// as an event; its resolved notification releases it.
TEST_F(control_integration, an_alertmanager_webhook_quarantines_and_releases) {
  remediate_ = false;
  std::unique_ptr<child_process> control;
  int port = start(control);
  ASSERT_GT(port, 0);
  auto webhook = [&](const std::string& status) {
    json alert = {
      {"status", status},
      {"labels",
       {{"alertname", "GpuDoubleBitEcc"},
        {"severity", "critical"},
        {"Hostname", "node-1"},
        {"UUID", "GPU-a"}}},
      {"annotations", {{"summary", "DBE on GPU-a"}}},
      {"startsAt", "2026-11-26T08:00:00Z"},
      {"endsAt", status == "resolved" ? "2026-11-26T08:05:00Z" : "0001-01-01T00:00:00Z"},
      {"fingerprint", "c0ffee"}};
    json body = {{"version", "4"},
                 {"status", status},
                 {"receiver", "vigil"},
                 {"alerts", json::array({alert})}};
    return test::curl_call(test::local_url(port, "/v1/alertmanager"), "POST",
                           "ingest-token", body.dump(), "application/json");
  };
  auto [status, body] = webhook("firing");
  EXPECT_EQ(status, 200) << body;
  EXPECT_EQ(json::parse(body, nullptr, false).value("accepted", 0), 1) << body;
  ASSERT_FALSE(control->wait_for("node node-1: applied: cordon").empty())
    << control->seen();
  std::tie(status, body) = webhook("firing"); // Alertmanager's repeat
  EXPECT_EQ(json::parse(body, nullptr, false).value("duplicates", 0), 1) << body;
  std::tie(status, body) = webhook("resolved");
  EXPECT_EQ(status, 200) << body;
  ASSERT_FALSE(control->wait_for("node node-1: applied: uncordon").empty())
    << control->seen();
  EXPECT_EQ(control->stop(), 0) << control->seen();
}

// End to end, XID 48 from the kernel log → partial drain → GPUReset → the
// janitor tears the GPU operator's operands down, runs the reset Job (played
// by the test), restores the labels → the agent reads "GPU reset occurred"
// → uncordon. Then a second GPU whose reset Job fails falls back to a reboot,
// which the new boot ID proves.
// Agents authenticate with their projected ServiceAccount token, which the
// control plane checks with a TokenReview; each may report for its own node
// only. The operator's static token still reports for any node.
TEST_F(control_integration, an_agent_reports_only_for_its_own_node) {
  remediate_ = false;
  token_review_ = true;
  api_->with_store([](kube::object_store& store) {
    kube::service_account_token agent;
    agent.username = "system:serviceaccount:vigil:vigil-agent";
    agent.audiences = {"vigil"};
    agent.extra = {{"authentication.kubernetes.io/node-name", {"node-1"}},
                   {"authentication.kubernetes.io/pod-name", {"vigil-agent-x1"}}};
    store.token_reviews().add("agent-of-node-1", agent);
    auto api_audience = agent;
    api_audience.audiences = {"https://kubernetes.default.svc"};
    store.token_reviews().add("api-audience-token", api_audience);
    auto other_account = agent;
    other_account.username = "system:serviceaccount:default:builder";
    store.token_reviews().add("builder-token", other_account);
    kube::service_account_token prometheus;
    prometheus.username = "system:serviceaccount:monitoring:prometheus-k8s";
    prometheus.audiences = {"https://kubernetes.default.svc"};
    store.token_reviews().add("prometheus-token", prometheus);
  });
  std::unique_ptr<child_process> control;
  int port = start(control);
  ASSERT_GT(port, 0);

  auto own = post_events(port, "agent-of-node-1", xid_event("t1", "GPU-a", true).dump());
  EXPECT_EQ(own.first, 200) << own.second;
  auto other = xid_event("t2", "GPU-c", true);
  other["nodeName"] = "node-2";
  auto foreign = post_events(port, "agent-of-node-1", other.dump());
  EXPECT_EQ(foreign.first, 403) << foreign.second;
  EXPECT_NE(foreign.second.find("node-2"), std::string::npos) << foreign.second;
  auto beat =
    post_to(port, "/v1/heartbeat", "agent-of-node-1", R"({"nodeName":"node-2"})");
  EXPECT_EQ(beat.first, 403) << beat.second;
  EXPECT_EQ(
    post_to(port, "/v1/heartbeat", "agent-of-node-1", R"({"nodeName":"node-1"})").first,
    200);
  auto reset = post_to(port, "/v1/breaker/reset", "agent-of-node-1", "");
  EXPECT_EQ(reset.first, 403) << reset.second;

  for (const char* refused : {"api-audience-token", "builder-token", "nobody"}) {
    auto r = post_events(port, refused, xid_event("t3", "GPU-a", true).dump());
    EXPECT_EQ(r.first, 401) << refused << ": " << r.second;
  }
  // The operator's token: any node.
  EXPECT_EQ(post_events(port, "ingest-token", other.dump()).first, 200);
  // /metrics: the operator's token or a listed reader's own token.
  auto metrics = [&](const std::string& token) {
    auto r = post_to(port, "/metrics", token, "");
    return r.first;
  };
  EXPECT_EQ(metrics("prometheus-token"), 200);
  EXPECT_EQ(metrics("ingest-token"), 200);
  EXPECT_EQ(metrics("agent-of-node-1"), 401);
  EXPECT_EQ(metrics("nobody"), 401);
  // The HTTPS server's own counters are on it (vigil_http_*).
  const auto scraped = post_to(port, "/metrics", "prometheus-token", "").second;
  EXPECT_NE(scraped.find("vigil_http_requests_total "), std::string::npos) << scraped;
  EXPECT_NE(scraped.find("vigil_http_connections_open "), std::string::npos);
  // The console: its page loads without a token (a browser sends none with a
  // navigation); its API wants the same tokens as /metrics.
  EXPECT_EQ(test::get_with_token(port, "/console/", "").first, 200);
  auto console_api = [&](const std::string& token) {
    return test::get_with_token(port, "/api/v1/fleet", token).first;
  };
  EXPECT_EQ(console_api(""), 401);
  EXPECT_EQ(console_api("ingest-token"), 200);
  EXPECT_EQ(console_api("prometheus-token"), 200);
  EXPECT_EQ(console_api("agent-of-node-1"), 401);
  EXPECT_EQ(test::get_with_token(port, "/api/v1/stream", "").first, 401);
  // A review is remembered: the revoked token still works until it expires.
  api_->with_store(
    [](kube::object_store& store) { store.token_reviews().revoke("agent-of-node-1"); });
  EXPECT_EQ(
    post_events(port, "agent-of-node-1", xid_event("t4", "GPU-a", true).dump()).first,
    200);
}

TEST_F(control_integration, gpu_reset_and_reboot_fallback_end_to_end) {
  const std::string gpu0 = "GPU-00000000-2051-db6c-0430-ffc457bff830"; // 0000:18:00
  const std::string gpu1 = "GPU-00000001-2051-db6c-0430-ffc457bff831"; // 0000:2a:00
  api_->with_store([&](kube::object_store& store) {
    store.create(*store.find_type("", "v1", "pods"), "default", gpu_pod("train-0", gpu0));
    store.create(*store.find_type("", "v1", "pods"), "default", gpu_pod("train-1", gpu1));
  });
  play_the_cluster();
  std::unique_ptr<child_process> control;
  int port = start(control);
  ASSERT_GT(port, 0);

  auto xid48 = agent_events("NVRM: Xid (PCI:0000:18:00): 48, pid='<unknown>', "
                            "name=<unknown>, An uncorrectable double bit error (DBE) has "
                            "been detected on GPU in the framebuffer at partition 6, "
                            "subpartition 0.\n");
  ASSERT_NE(xid48.find(gpu0), std::string::npos) << xid48;
  ASSERT_NE(xid48.find("COMPONENT_RESET"), std::string::npos) << xid48;
  EXPECT_EQ(post_events(port, "ingest-token", xid48).first, 200);

  ASSERT_FALSE(control->wait_for("node node-1: evicted default/train-0").empty())
    << control->seen();
  kubelet_finishes();
  ASSERT_FALSE(control->wait_for("created for reset-" + gpu0).empty()) << control->seen();
  auto resets = items("vigil.dev", "v1alpha1", "gpuresets");
  ASSERT_EQ(resets.size(), 1u);
  const auto reset_name = resets[0]["metadata"]["name"].get<std::string>();
  ASSERT_FALSE(control->wait_for("GPUReset " + reset_name + ": Resetting").empty())
    << control->seen();
  auto node = get("", "v1", "nodes", "", "node-1");
  EXPECT_EQ(node["metadata"]["labels"]["nvidia.com/gpu.deploy.device-plugin"], "false");
  // The Job exists before the log line; the CR's status may still be on its way.
  const auto job_name = janitor::reset_job_name(reset_name);
  auto job = get("batch", "v1", "jobs", "vigil-system", job_name);
  ASSERT_FALSE(job.is_null());
  EXPECT_EQ(job["spec"]["template"]["spec"]["nodeName"], "node-1");
  job_ends(job_name, true);
  ASSERT_FALSE(control->wait_for("GPU " + gpu0 + " on node node-1 reset").empty())
    << control->seen();
  node = get("", "v1", "nodes", "", "node-1");
  EXPECT_EQ(node["metadata"]["labels"]["nvidia.com/gpu.deploy.device-plugin"], "true");
  ASSERT_FALSE(
    control->wait_for("node node-1: GPUReset " + reset_name + " succeeded").empty())
    << control->seen();
  EXPECT_TRUE(cordoned("node-1")); // until the agent sees the GPU come back
  // The reset Job's kernel-log line, read by the agent.
  auto healthy = agent_events("GPU reset occurred: " + gpu0 + "\n");
  ASSERT_NE(healthy.find("\"isHealthy\":true"), std::string::npos) << healthy;
  EXPECT_EQ(post_events(port, "ingest-token", healthy).first, 200);
  ASSERT_FALSE(control->wait_for("node node-1: applied: uncordon").empty())
    << control->seen();
  EXPECT_FALSE(pod("train-1")["metadata"].contains("deletionTimestamp"));

  // The second GPU: its reset Job fails (exit 2: nvidia-smi could not reset).
  auto xid48b =
    agent_events("NVRM: Xid (PCI:0000:2a:00): 48, pid='<unknown>', "
                 "name=<unknown>, An uncorrectable double bit error (DBE) has "
                 "been detected on GPU in the framebuffer at partition 2, "
                 "subpartition 0.\n");
  EXPECT_EQ(post_events(port, "ingest-token", xid48b).first, 200);
  ASSERT_FALSE(control->wait_for("node node-1: evicted default/train-1").empty())
    << control->seen();
  kubelet_finishes();
  ASSERT_FALSE(control->wait_for("created for reset-" + gpu1).empty()) << control->seen();
  std::string second;
  for (const auto& r : items("vigil.dev", "v1alpha1", "gpuresets"))
    if (r["spec"]["gpuUUIDs"][0] == gpu1)
      second = r["metadata"]["name"].get<std::string>();
  ASSERT_FALSE(control->wait_for("GPUReset " + second + ": Resetting").empty())
    << control->seen();
  job_ends(janitor::reset_job_name(second), false);
  ASSERT_FALSE(control->wait_for("RebootNode").empty()) << control->seen();
  // A reboot after a failed reset keeps the driver's bug report first.
  ASSERT_FALSE(
    control->wait_for("collecting nvidia-bug-report.sh on node node-1").empty())
    << control->seen();
  auto requested = items("vigil.dev", "v1alpha1", "rebootnodes");
  ASSERT_EQ(requested.size(), 1u);
  EXPECT_EQ(requested[0]["spec"]["collectBugReport"], true);
  const auto reboot_name = requested[0]["metadata"]["name"].get<std::string>();
  job_ends(janitor::bug_report_job_name(reboot_name), true);
  ASSERT_FALSE(control->wait_for("rebooting node node-1 (boot ID boot-1)").empty())
    << control->seen();
  const auto bug_report =
    get("vigil.dev", "v1alpha1", "rebootnodes", "", reboot_name)["status"]["bugReport"];
  EXPECT_EQ(bug_report.value("outcome", ""), "collected");
  EXPECT_EQ(bug_report.value("path", "").rfind("node-1:/var/log/vigil/bug-reports/", 0),
            0u);
  node = get("", "v1", "nodes", "", "node-1");
  EXPECT_EQ(node["metadata"]["labels"]["nvidia.com/gpu.deploy.dcgm"], "true");
  EXPECT_TRUE(cordoned("node-1"));
  // The node comes back with a new boot ID and Ready.
  api_->with_store([](kube::object_store& store) {
    store.patch(*store.find_type("", "v1", "nodes"), "", "node-1",
                json{{"status", {{"nodeInfo", {{"bootID", "boot-2"}}}}}},
                kube::patch_type::merge, true);
  });
  ASSERT_FALSE(control->wait_for("node node-1: applied: uncordon").empty())
    << control->seen();
  auto reboots = items("vigil.dev", "v1alpha1", "rebootnodes");
  ASSERT_EQ(reboots.size(), 1u);
  EXPECT_EQ(reboots[0]["status"]["phase"], "Succeeded");
  EXPECT_EQ(reboots[0]["status"]["bootIdAfter"], "boot-2");
  EXPECT_EQ(control->stop(), 0) << control->seen();

  // Every step is journaled.
  auto rows = journal_rows();
  ASSERT_TRUE(rows.has_value());
  std::vector<std::string> steps;
  for (const auto& r : *rows)
    if (r.kind == control::remediation_row) {
      auto body = json::parse(r.body);
      steps.push_back(body["phase"].get<std::string>() + " "
                      + body["kind"].get<std::string>());
    }
  for (const char* expected :
       {"requested GPUReset", "created GPUReset", "succeeded GPUReset",
        "verified GPUReset", "failed GPUReset", "created RebootNode",
        "succeeded RebootNode"})
    EXPECT_NE(std::find(steps.begin(), steps.end(), expected), steps.end()) << expected;
}

} // namespace
} // namespace vigil
