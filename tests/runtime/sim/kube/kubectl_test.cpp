// kubectl (when installed) against the API test server: get, describe,
// cordon and uncordon, the operator's view of what vigil does.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/sim/kube/kube_test_server.hpp"
#include "runtime/sim/kube/test_certificates.hpp"
#include "tests/support/fresh_directory.hpp"

namespace vigil::kube {
namespace {

using json = nlohmann::json;

struct run_result {
  int code;
  std::string out;
};

run_result run(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr)
    return {-1, "popen failed"};
  std::array<char, 4096> buf;
  for (size_t n; (n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0;)
    out.append(buf.data(), n);
  return {::pclose(pipe), out};
}

class kubectl_test : public testing::Test {
protected:
  void SetUp() override {
    if (run("command -v kubectl").code != 0)
      GTEST_SKIP() << "kubectl is not installed";
    // kubectl sends a bearer token only over TLS.
    auto pki = make_test_pki();
    ASSERT_TRUE(pki.has_value()) << pki.error().to_string();
    const auto dir = test::fresh_directory();
    std::ofstream(dir + "/ca.crt") << pki->ca_cert_pem;
    test_server_options options;
    options.tls = true;
    options.cert_pem = pki->server_cert_pem;
    options.key_pem = pki->server_key_pem;
    options.tokens = {"kubectl-token"};
    auto server = kube_test_server::start(options);
    ASSERT_TRUE(server.has_value()) << server.error().to_string();
    server_ = std::move(*server);
    server_->with_store([](object_store& store) {
      json node = {
        {"apiVersion", "v1"},
        {"kind", "Node"},
        {"metadata",
         {{"name", "gpu-node-1"}, {"labels", {{"node-role.kubernetes.io/gpu", ""}}}}},
        {"spec", json::object()},
        {"status",
         {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}},
          {"nodeInfo", {{"kubeletVersion", "v1.30.2"}}}}}};
      EXPECT_TRUE(store.create(*store.find_type("", "v1", "nodes"), "", node).ok());
      json pod = {{"apiVersion", "v1"},
                  {"kind", "Pod"},
                  {"metadata", {{"name", "trainer-0"}, {"namespace", "default"}}},
                  {"spec",
                   {{"nodeName", "gpu-node-1"},
                    {"containers", {{{"name", "main"}, {"image", "pytorch"}}}}}},
                  {"status", {{"phase", "Running"}}}};
      EXPECT_TRUE(store.create(*store.find_type("", "v1", "pods"), "default", pod).ok());
    });
    kubectl_ = "KUBECONFIG=/dev/null kubectl --cache-dir " + dir + "/cache --server "
               + server_->url() + " --certificate-authority " + dir
               + "/ca.crt --token kubectl-token ";
    wrong_token_ = "KUBECONFIG=/dev/null kubectl --server " + server_->url()
                   + " --certificate-authority " + dir + "/ca.crt --token wrong ";
  }

  bool unschedulable() {
    bool value = false;
    server_->with_store([&](object_store& store) {
      auto node = store.get(*store.find_type("", "v1", "nodes"), "", "gpu-node-1");
      value = node.ok()
              && node.value->value("spec", json::object()).value("unschedulable", false);
    });
    return value;
  }

  std::unique_ptr<kube_test_server> server_;
  std::string kubectl_;
  std::string wrong_token_;
};

TEST_F(kubectl_test, get_describe_cordon_uncordon) {
  auto nodes = run(kubectl_ + "get nodes");
  ASSERT_EQ(nodes.code, 0) << nodes.out;
  EXPECT_NE(nodes.out.find("gpu-node-1"), std::string::npos) << nodes.out;
  EXPECT_NE(nodes.out.find("Ready"), std::string::npos) << nodes.out;

  auto pods = run(kubectl_ + "get pods -A");
  ASSERT_EQ(pods.code, 0) << pods.out;
  EXPECT_NE(pods.out.find("trainer-0"), std::string::npos) << pods.out;

  auto described = run(kubectl_ + "describe node gpu-node-1");
  ASSERT_EQ(described.code, 0) << described.out;
  EXPECT_NE(described.out.find("gpu-node-1"), std::string::npos) << described.out;

  auto cordoned = run(kubectl_ + "cordon gpu-node-1");
  ASSERT_EQ(cordoned.code, 0) << cordoned.out;
  EXPECT_TRUE(unschedulable());
  auto listed = run(kubectl_ + "get nodes");
  EXPECT_NE(listed.out.find("SchedulingDisabled"), std::string::npos) << listed.out;

  auto uncordoned = run(kubectl_ + "uncordon gpu-node-1");
  ASSERT_EQ(uncordoned.code, 0) << uncordoned.out;
  EXPECT_FALSE(unschedulable());
}

// `vigil install | kubectl apply -f -` on a cluster with the Prometheus
// Operator: every object is created (the CRDs first, then what they serve),
// and a second apply changes nothing. --validate=false: the test server
// serves no OpenAPI documents (/openapi/v2, /openapi/v3), which kubectl's
// validation downloads; manifest_schema_test validates every object against
// those schemas instead.
TEST_F(kubectl_test, applies_what_vigil_install_prints) {
  const std::string source =
    std::getenv("VIGIL_SOURCE_DIR") ? std::getenv("VIGIL_SOURCE_DIR") : ".";
  auto operator_crds = run(kubectl_ + "apply --validate=false -f " + source
                           + "/tests/data/prometheus-operator-crds.yaml");
  ASSERT_EQ(operator_crds.code, 0) << operator_crds.out;
  const auto install =
    kubectl_ + "apply --validate=false -f " + source + "/deploy/install.yaml";
  auto applied = run(install);
  ASSERT_EQ(applied.code, 0) << applied.out;
  for (const char* created :
       {"namespace/vigil created",
        "customresourcedefinition.apiextensions.k8s.io/gpuresets.vigil.dev created",
        "daemonset.apps/vigil-agent created", "deployment.apps/vigil-control created",
        "clusterrole.rbac.authorization.k8s.io/vigil-control created",
        "servicemonitor.monitoring.coreos.com/vigil-control created",
        "prometheusrule.monitoring.coreos.com/vigil-gpu-reset created",
        "networkpolicy.networking.k8s.io/vigil-default-deny-ingress created"})
    EXPECT_NE(applied.out.find(created), std::string::npos) << created << "\n"
                                                            << applied.out;
  EXPECT_EQ(applied.out.find("error"), std::string::npos) << applied.out;

  auto again = run(install);
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_EQ(again.out.find("created"), std::string::npos) << again.out;

  // The CRDs are served once created: the janitor's kinds can be listed.
  auto resets = run(kubectl_ + "get gpuresets");
  EXPECT_EQ(resets.code, 0) << resets.out;
  auto workloads = run(kubectl_ + "-n vigil get daemonsets,deployments,services");
  ASSERT_EQ(workloads.code, 0) << workloads.out;
  EXPECT_NE(workloads.out.find("vigil-agent"), std::string::npos) << workloads.out;
}

TEST_F(kubectl_test, a_wrong_token_is_refused) {
  auto r = run(wrong_token_ + "get nodes");
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(r.out.find("nauthorized") != std::string::npos
              || r.out.find("must be logged in") != std::string::npos)
    << r.out;
}

} // namespace
} // namespace vigil::kube
