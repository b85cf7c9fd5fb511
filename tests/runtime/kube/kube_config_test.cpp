// kubeconfig and in-cluster configuration: the fields kubectl reads, relative
// paths, inline data, and errors that name the field.
#include "runtime/kube/kube_config.hpp"

#include <fstream>
#include <map>

#include <gtest/gtest.h>

#include "tests/support/fresh_directory.hpp"

namespace vigil::kube {
namespace {

std::string write(const std::string& dir, const std::string& name,
                  const std::string& text) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

constexpr const char* two_contexts = R"(
apiVersion: v1
kind: Config
current-context: prod
clusters:
- name: prod-cluster
  cluster:
    server: https://10.0.0.1:6443
    certificate-authority: ca.crt
- name: lab-cluster
  cluster:
    server: https://lab:6443
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==
    insecure-skip-tls-verify: true
contexts:
- name: prod
  context: {cluster: prod-cluster, user: admin, namespace: gpu-ops}
- name: lab
  context: {cluster: lab-cluster, user: robot}
users:
- name: admin
  user:
    client-certificate: admin.crt
    client-key-data: a2V5
- name: robot
  user:
    token: s3cr3t
)";

class kubeconfig : public testing::Test {
protected:
  void SetUp() override {
    dir_ = test::fresh_directory();
    write(dir_, "ca.crt", "CA");
    write(dir_, "admin.crt", "CERT");
    path_ = write(dir_, "config", two_contexts);
  }
  std::string dir_, path_;
};

TEST_F(kubeconfig, current_context_with_files_relative_to_the_kubeconfig) {
  auto conn = load_kubeconfig(path_);
  ASSERT_TRUE(conn.has_value()) << conn.error().to_string();
  EXPECT_EQ(conn->server, "https://10.0.0.1:6443");
  EXPECT_EQ(conn->ca_file, dir_ + "/ca.crt");
  EXPECT_EQ(conn->client_cert_file, dir_ + "/admin.crt");
  EXPECT_EQ(conn->client_key_data, "key");
  EXPECT_EQ(conn->default_namespace, "gpu-ops");
  EXPECT_FALSE(conn->insecure_skip_tls_verify);
}

TEST_F(kubeconfig, context_flag_overrides_with_inline_ca_and_token) {
  auto conn = load_kubeconfig(path_, "lab");
  ASSERT_TRUE(conn.has_value()) << conn.error().to_string();
  EXPECT_EQ(conn->server, "https://lab:6443");
  EXPECT_EQ(conn->ca_data, "-----BEGIN CERTIFICATE-----\n");
  EXPECT_EQ(conn->token, "s3cr3t");
  EXPECT_TRUE(conn->insecure_skip_tls_verify);
  EXPECT_EQ(conn->default_namespace, "default");
}

TEST_F(kubeconfig, errors_name_the_field) {
  auto missing_context = load_kubeconfig(path_, "nope");
  ASSERT_FALSE(missing_context.has_value());
  EXPECT_NE(missing_context.error().to_string().find("contexts: no entry named 'nope'"),
            std::string::npos)
    << missing_context.error().to_string();

  auto unreadable = load_kubeconfig(dir_ + "/absent");
  ASSERT_FALSE(unreadable.has_value());
  EXPECT_EQ(unreadable.error().where, dir_ + "/absent");

  std::remove((dir_ + "/ca.crt").c_str());
  auto no_ca = load_kubeconfig(path_);
  ASSERT_FALSE(no_ca.has_value());
  EXPECT_NE(no_ca.error().to_string().find(
              "clusters[prod-cluster].cluster.certificate-authority"),
            std::string::npos)
    << no_ca.error().to_string();

  auto no_current = parse_kubeconfig("clusters: []\n", "k", "");
  ASSERT_FALSE(no_current.has_value());
  EXPECT_NE(no_current.error().to_string().find("current-context"), std::string::npos);

  auto bad_yaml = parse_kubeconfig("clusters: [\n", "k", "");
  ASSERT_FALSE(bad_yaml.has_value());
  EXPECT_NE(bad_yaml.error().to_string().find("not valid YAML"), std::string::npos);

  auto bad_base64 = parse_kubeconfig(
    "current-context: c\ncontexts: [{name: c, context: {cluster: x}}]\n"
    "clusters: [{name: x, cluster: {server: 'https://x', certificate-authority-data: "
    "'@@'}}]\n",
    "k", "");
  ASSERT_FALSE(bad_base64.has_value());
  EXPECT_NE(bad_base64.error().to_string().find("certificate-authority-data"),
            std::string::npos)
    << bad_base64.error().to_string();
}

TEST(in_cluster, service_account_files_and_env) {
  const auto dir = test::fresh_directory();
  write(dir, "token", "tok\n");
  write(dir, "ca.crt", "CA");
  write(dir, "namespace", "vigil-system");
  std::map<std::string, std::string> env{{"KUBERNETES_SERVICE_HOST", "10.96.0.1"},
                                         {"KUBERNETES_SERVICE_PORT", "443"}};
  auto lookup = [&](const std::string& k) { return env.count(k) ? env.at(k) : ""; };
  auto conn = in_cluster_connection(lookup, dir);
  ASSERT_TRUE(conn.has_value()) << conn.error().to_string();
  EXPECT_EQ(conn->server, "https://10.96.0.1:443");
  EXPECT_EQ(conn->token_file, dir + "/token"); // re-read by the client when it rotates
  EXPECT_EQ(conn->default_namespace, "vigil-system");

  env.erase("KUBERNETES_SERVICE_HOST");
  auto outside = in_cluster_connection(lookup, dir);
  ASSERT_FALSE(outside.has_value());
  EXPECT_EQ(outside.error().where, "KUBERNETES_SERVICE_HOST");
}

TEST(resolve_connection, kubectl_order) {
  const auto dir = test::fresh_directory();
  const auto a = write(dir, "a",
                       "current-context: c\ncontexts: [{name: c, context: "
                       "{cluster: x}}]\nclusters: [{name: x, cluster: "
                       "{server: 'https://a'}}]\n");
  std::map<std::string, std::string> env{{"KUBECONFIG", dir + "/missing:" + a}};
  auto lookup = [&](const std::string& k) { return env.count(k) ? env.at(k) : ""; };
  auto conn = resolve_connection("", "", lookup);
  ASSERT_TRUE(conn.has_value()) << conn.error().to_string();
  EXPECT_EQ(conn->server, "https://a");
  auto flag = resolve_connection(dir + "/none", "", lookup);
  ASSERT_FALSE(flag.has_value());
  EXPECT_EQ(flag.error().where, dir + "/none");
}

TEST(base64, decodes_and_rejects) {
  EXPECT_EQ(*base64_decode("aGVsbG8gd29ybGQ="), "hello world");
  EXPECT_EQ(*base64_decode("aGVs\nbG8="), "hello");
  EXPECT_FALSE(base64_decode("a*b").has_value());
}

} // namespace
} // namespace vigil::kube
