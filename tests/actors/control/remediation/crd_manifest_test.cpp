// The CRDs and alert rules `vigil install` prints (runtime/install/assets/)
// parse and say what the remediation code relies on (kinds, fields, the
// one-GPU limit). The RBAC is checked by install_manifests_test.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include <gtest/gtest.h>

#include "actors/control/remediation/remediation_plan.hpp"

namespace vigil::control {
namespace {

std::string deploy(const std::string& file) {
  const char* dir = std::getenv("VIGIL_SOURCE_DIR");
  return std::string{dir != nullptr ? dir : "."} + "/runtime/install/assets/" + file;
}

YAML::Node version_schema(const YAML::Node& crd) {
  return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
}

void expect_common(const YAML::Node& crd, remediation_kind kind,
                   const std::string& plural) {
  EXPECT_EQ(crd["apiVersion"].as<std::string>(), "apiextensions.k8s.io/v1");
  EXPECT_EQ(crd["kind"].as<std::string>(), "CustomResourceDefinition");
  EXPECT_EQ(crd["metadata"]["name"].as<std::string>(), plural + ".vigil.dev");
  EXPECT_EQ(crd["spec"]["group"].as<std::string>(), "vigil.dev");
  EXPECT_EQ(crd["spec"]["scope"].as<std::string>(), "Cluster");
  EXPECT_EQ(crd["spec"]["names"]["kind"].as<std::string>(), to_string(kind));
  EXPECT_EQ(crd["spec"]["names"]["plural"].as<std::string>(), plural);
  const auto version = crd["spec"]["versions"][0];
  EXPECT_EQ(version["name"].as<std::string>(), "v1alpha1");
  EXPECT_TRUE(version["served"].as<bool>());
  EXPECT_TRUE(version["storage"].as<bool>());
  EXPECT_TRUE(version["subresources"]["status"].IsMap());
  EXPECT_GE(version["additionalPrinterColumns"].size(), 3u);
  auto schema = version_schema(crd);
  EXPECT_EQ(schema["type"].as<std::string>(), "object");
  auto spec = schema["properties"]["spec"];
  EXPECT_EQ(spec["required"][0].as<std::string>(), "nodeName");
  EXPECT_EQ(spec["properties"]["nodeName"]["minLength"].as<int>(), 1);
  auto status = schema["properties"]["status"]["properties"];
  for (const char* field :
       {"phase", "conditions", "startedAt", "completedAt", "failureReason"})
    EXPECT_TRUE(status[field].IsMap()) << plural << " status." << field;
  EXPECT_EQ(status["conditions"]["x-kubernetes-list-type"].as<std::string>(), "map");
}

TEST(crd_manifest, gpureset) {
  auto crd = YAML::LoadFile(deploy("crds/gpuresets.vigil.dev.yaml"));
  expect_common(crd, remediation_kind::gpu_reset, "gpuresets");
  auto schema = version_schema(crd);
  auto uuids = schema["properties"]["spec"]["properties"]["gpuUUIDs"];
  EXPECT_EQ(uuids["type"].as<std::string>(), "array");
  EXPECT_EQ(uuids["minItems"].as<int>(), 1);
  EXPECT_EQ(uuids["maxItems"].as<int>(), 1);
  EXPECT_EQ(uuids["items"]["pattern"].as<std::string>().rfind("^GPU-", 0), 0u);
  for (const char* field : {"reason", "sourceEventId"})
    EXPECT_TRUE(schema["properties"]["spec"]["properties"][field].IsMap()) << field;
  auto status = schema["properties"]["status"]["properties"];
  for (const char* field : {"jobName", "jobCreatedAt", "savedLabels"})
    EXPECT_TRUE(status[field].IsMap()) << field;
  std::vector<std::string> phases;
  for (const auto& p : status["phase"]["enum"])
    phases.push_back(p.as<std::string>());
  EXPECT_EQ(phases, (std::vector<std::string>{"Pending", "TearingDown", "Resetting",
                                              "Restoring", "Succeeded", "Failed"}));
}

TEST(crd_manifest, rebootnode_and_terminatenode) {
  auto reboot = YAML::LoadFile(deploy("crds/rebootnodes.vigil.dev.yaml"));
  expect_common(reboot, remediation_kind::reboot_node, "rebootnodes");
  auto status = version_schema(reboot)["properties"]["status"]["properties"];
  EXPECT_TRUE(status["bootIdBefore"].IsMap());
  EXPECT_TRUE(status["bootIdAfter"].IsMap());
  EXPECT_TRUE(status["bugReport"]["properties"]["path"].IsMap());
  EXPECT_EQ(
    version_schema(reboot)["properties"]["spec"]["properties"]["collectBugReport"]["type"]
      .as<std::string>(),
    "boolean");
  // Every reason the janitor writes is one the API server accepts.
  std::vector<std::string> reasons;
  for (const auto& r : status["failureReason"]["enum"])
    reasons.push_back(r.as<std::string>());
  for (const char* written : {"job_create_failed", "timeout", "node_not_found"})
    EXPECT_NE(std::find(reasons.begin(), reasons.end(), written), reasons.end())
      << written;
  auto terminate = YAML::LoadFile(deploy("crds/terminatenodes.vigil.dev.yaml"));
  expect_common(terminate, remediation_kind::terminate_node, "terminatenodes");
}

TEST(crd_manifest, rules_parse) {
  auto rules = YAML::LoadFile(deploy("vigil-rules.yaml"));
  EXPECT_EQ(rules["kind"].as<std::string>(), "PrometheusRule");
  std::vector<std::string> alerts;
  for (const auto& group : rules["spec"]["groups"])
    for (const auto& rule : group["rules"])
      if (rule["alert"])
        alerts.push_back(rule["alert"].as<std::string>());
  for (const char* name : {"VigilGPUResetHighFailureRate", "VigilJanitorUnavailable",
                           "VigilGPUResetConsecutiveFailures", "VigilGPUResetSlow"})
    EXPECT_NE(std::find(alerts.begin(), alerts.end(), name), alerts.end()) << name;
}

} // namespace
} // namespace vigil::control
