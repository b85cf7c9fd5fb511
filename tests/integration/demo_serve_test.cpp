// `vigil demo --serve` as a process: it prints where its API server,
// ingest and introspection API are, answers the introspection API, an
// event POSTed to its ingest cordons a node, and its API server takes what
// `vigil install` prints with `kubectl apply`.
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/sim/simulated_cluster.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/fresh_directory.hpp"
#include "tests/support/run_shell.hpp"

namespace vigil {
namespace {

using nlohmann::json;
using test::child_process;

// "ingest:        http://127.0.0.1:PORT/v1/events  token T" → the word after `label`.
std::string word_after(const std::string& line, const std::string& label) {
  auto at = line.find(label);
  if (at == std::string::npos)
    return "";
  at = line.find_first_not_of(' ', at + label.size());
  return line.substr(at, line.find_first_of(" \n", at) - at);
}

json get_json(const std::string& url) {
  auto [status, body] = test::http_call(url);
  EXPECT_EQ(status, 200) << url << ": " << body;
  return json::parse(body, nullptr, false);
}

TEST(demo_serve, answers_introspection_and_a_posted_event_cordons_a_node) {
  const auto dir = test::fresh_directory();
  child_process demo(
    {VIGIL_BINARY, "demo", "--serve", "--journal", "sqlite:" + dir + "/journal.db"});
  const auto api_line = demo.wait_for("API server:");
  ASSERT_NE(word_after(api_line, "API server:").rfind("https://127.0.0.1:", 0),
            std::string::npos)
    << demo.seen();
  EXPECT_FALSE(demo.wait_for("kubectl --server").empty());
  const auto ingest_line = demo.wait_for("ingest:");
  const auto ingest_url = word_after(ingest_line, "ingest:");
  const auto ingest_token = word_after(ingest_line, "token");
  const auto intro_line = demo.wait_for("introspection:");
  auto base = word_after(intro_line, "introspection:");
  base = base.substr(0, base.find("/api/nodes"));
  ASSERT_FALSE(base.empty()) << demo.seen();
  ASSERT_FALSE(demo.wait_for("Node list seen: 16 nodes").empty()) << demo.seen();

  auto nodes = get_json(base + "/api/nodes");
  ASSERT_EQ(nodes.size(), 16u);
  for (const auto& n : nodes) {
    EXPECT_FALSE(n["cordoned"].get<bool>()) << n.dump();
    EXPECT_TRUE(n["activeEvents"].is_array()) << n.dump(); // [], never null
  }

  // Anyone's HealthEvent, through the ingest endpoint and its token.
  const auto node = demo::node_name(2);
  json event = {{"agent", "operator"},
                {"componentClass", "GPU"},
                {"checkName", "SysLogsXIDError"},
                {"isFatal", true},
                {"errorCode", {"79"}},
                {"recommendedAction", "RESTART_VM"},
                {"entitiesImpacted",
                 {{{"entityType", "GPU_UUID"}, {"entityValue", demo::gpu_uuid(2, 3)}}}},
                {"nodeName", node}};
  const int port = std::atoi(ingest_url.c_str() + ingest_url.rfind(':') + 1);
  EXPECT_EQ(test::post_events(port, ingest_token, event.dump()).first, 200);
  EXPECT_EQ(test::post_events(port, "wrong", event.dump()).first, 401);
  ASSERT_FALSE(demo.wait_for("node " + node + ": applied: cordon").empty())
    << demo.seen();

  auto detail = get_json(base + "/api/nodes/" + node);
  EXPECT_TRUE(detail["cordoned"].get<bool>()) << detail.dump();

  // The console's API (open in the demo) tells the same from the actors.
  auto console_fleet = get_json(base + "/api/v1/fleet");
  ASSERT_EQ(console_fleet["nodes"].size(), 16u) << console_fleet.dump();
  EXPECT_EQ(console_fleet["counts"]["healthy"].get<int>(), 15)
    << console_fleet["counts"].dump();
  auto console_node = get_json(base + "/api/v1/nodes/" + node);
  EXPECT_NE(console_node["state"], "healthy") << console_node.dump();
  EXPECT_TRUE(detail["cordonedByVigil"].get<bool>());
  ASSERT_EQ(detail["activeEvents"].size(), 1u) << detail.dump();
  EXPECT_EQ(detail["activeEvents"][0]["entityValue"], demo::gpu_uuid(2, 3));
  EXPECT_EQ(detail["gpus"].size(), 8u);
  EXPECT_EQ(detail["nicPorts"].size(), 8u);
  EXPECT_FALSE(detail["pods"].empty());
  bool journaled = false;
  for (const auto& row : detail["timeline"])
    journaled = journaled || row["kind"] == "event";
  EXPECT_TRUE(journaled) << detail["timeline"].dump();
  EXPECT_EQ(test::http_call(base + "/api/nodes/gpu-node-99").first, 404);

  auto actors = get_json(base + "/api/actors");
  bool fleet = false, journal = false, node_actor = false;
  for (const auto& a : actors) {
    fleet = fleet || (a["name"] == "fleet" && a["mailboxDepth"].is_number());
    journal = journal || (a["name"] == "journal" && a["mailboxDepth"].is_number());
    node_actor = node_actor || a["name"] == "node/" + node;
  }
  EXPECT_TRUE(fleet) << actors.dump();
  EXPECT_TRUE(journal) << actors.dump();
  EXPECT_TRUE(node_actor) << actors.dump();
  EXPECT_GE(get_json(base + "/api/breaker")["admitted"].get<int>(), 1);
  EXPECT_EQ(test::http_call(base + "/api/nodes", "DELETE").first, 405);

  EXPECT_EQ(demo.stop(), 0) << demo.seen();

  // The journal now holds rows: a second demo on it would bring this run's
  // state back, so it is refused.
  child_process again(
    {VIGIL_BINARY, "demo", "--serve", "--journal", "sqlite:" + dir + "/journal.db"});
  EXPECT_FALSE(again.wait_for("already holds rows").empty()) << again.seen();
  EXPECT_EQ(again.stop(), 1) << again.seen();
}

// `vigil install | kubectl apply -f -` on the demo's API server, as on a
// cluster running the Prometheus Operator (its two CRDs first): every object
// is created, the CRDs' resources are served, and a second apply creates
// nothing. --validate=false: the API test server serves no /openapi
// documents for kubectl's validation; manifest_schema_test validates every
// object against those schemas instead.
TEST(demo_serve, kubectl_applies_what_vigil_install_prints) {
  if (test::run_shell("command -v kubectl").code != 0)
    GTEST_SKIP() << "kubectl is not installed (not a Debian 12 package)";
  const auto dir = test::fresh_directory();
  const std::string source =
    std::getenv("VIGIL_SOURCE_DIR") != nullptr ? std::getenv("VIGIL_SOURCE_DIR") : ".";
  child_process demo(
    {VIGIL_BINARY, "demo", "--serve", "--journal", "sqlite:" + dir + "/journal.db"});
  auto line = demo.wait_for("kubectl --server");
  ASSERT_FALSE(line.empty()) << demo.seen();
  // "  kubectl --server URL --certificate-authority CA --token T get nodes"
  line = line.substr(line.find("kubectl"));
  line = line.substr(0, line.find(" get nodes"));
  const auto kubectl = "KUBECONFIG=/dev/null " + line + " --cache-dir " + dir + "/cache ";

  auto operator_crds = test::run_shell(kubectl + "apply --validate=false -f " + source
                                       + "/tests/data/prometheus-operator-crds.yaml");
  ASSERT_EQ(operator_crds.code, 0) << operator_crds.out;
  const auto install =
    kubectl + "apply --validate=false -f " + source + "/deploy/install.yaml";
  auto applied = test::run_shell(install);
  ASSERT_EQ(applied.code, 0) << applied.out;
  for (const char* created :
       {"namespace/vigil created",
        "customresourcedefinition.apiextensions.k8s.io/gpuresets.vigil.dev",
        "daemonset.apps/vigil-agent created", "deployment.apps/vigil-control created",
        "clusterrole.rbac.authorization.k8s.io/vigil-control created",
        "servicemonitor.monitoring.coreos.com/vigil-control created",
        "prometheusrule.monitoring.coreos.com/vigil-gpu-reset created",
        "networkpolicy.networking.k8s.io/vigil-default-deny-ingress created"})
    EXPECT_NE(applied.out.find(created), std::string::npos) << created << "\n"
                                                            << applied.out;

  auto again = test::run_shell(install);
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_EQ(again.out.find(" created"), std::string::npos) << again.out;
  auto resets = test::run_shell(kubectl + "get gpuresets");
  EXPECT_EQ(resets.code, 0) << resets.out;
  auto workloads =
    test::run_shell(kubectl + "-n vigil get daemonsets,deployments,services");
  ASSERT_EQ(workloads.code, 0) << workloads.out;
  EXPECT_NE(workloads.out.find("vigil-agent"), std::string::npos) << workloads.out;
  EXPECT_EQ(demo.stop(), 0) << demo.seen();
}

} // namespace
} // namespace vigil
