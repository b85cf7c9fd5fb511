// kubectl (when installed) against the API test server: get, describe,
// cordon and uncordon, the operator's view of what vigil does.
#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/sim/kube/kube_test_server.hpp"
#include "runtime/sim/kube/test_certificates.hpp"
#include "tests/support/fresh_directory.hpp"
#include "tests/support/run_shell.hpp"

namespace vigil::kube {
namespace {

using json = nlohmann::json;

test::shell_result run(const std::string& command) {
  return test::run_shell(command);
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

TEST_F(kubectl_test, a_wrong_token_is_refused) {
  auto r = run(wrong_token_ + "get nodes");
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(r.out.find("nauthorized") != std::string::npos
              || r.out.find("must be logged in") != std::string::npos)
    << r.out;
}

} // namespace
} // namespace vigil::kube
