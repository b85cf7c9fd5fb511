// Shared pieces of the object store tests: object builders, list and watch
// readers, and a fixture over a store with a virtual clock and a registered
// custom resource type (gpuresets.vigil.dev).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/sim/kube/kube_object_store.hpp"

namespace vigil::kube::test_support {

inline constexpr std::int64_t may_first_2024 = 1714521600; // 2024-05-01T00:00:00Z

inline json node_object(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", {{"kubernetes.io/hostname", name}}}}},
          {"spec", json::object()},
          {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

inline json pod_object(const std::string& name, const std::string& node_name,
                       json labels = json::object(), bool ready = true) {
  return {
    {"metadata", {{"name", name}, {"labels", std::move(labels)}}},
    {"spec",
     {{"nodeName", node_name},
      {"containers", {{{"name", "main"}, {"image", "busybox"}}}}}},
    {"status",
     {{"phase", "Running"},
      {"conditions", {{{"type", "Ready"}, {"status", ready ? "True" : "False"}}}}}}};
}

inline json owner_reference(const json& owner, bool block = false) {
  json ref = {{"apiVersion", owner["apiVersion"]},
              {"kind", owner["kind"]},
              {"name", owner["metadata"]["name"]},
              {"uid", owner["metadata"]["uid"]}};
  if (block)
    ref["blockOwnerDeletion"] = true;
  return ref;
}

inline std::vector<std::string> names_of(const json& list) {
  std::vector<std::string> names;
  for (const auto& item : list["items"])
    names.push_back(item["metadata"]["name"].get<std::string>());
  return names;
}

inline std::vector<std::string> types_of(const std::vector<watch_event>& events) {
  std::vector<std::string> types;
  for (const auto& event : events)
    types.push_back(event.type + ":"
                    + event.object["metadata"]["name"].get<std::string>());
  return types;
}

using strings = std::vector<std::string>;

class kube_store : public ::testing::Test {
protected:
  kube_store() {
    store.set_clock([this] { return clock; });
    store.register_type(gpu_resets);
  }

  const resource_type& type(const std::string& plural, const std::string& group = "") {
    const auto* found =
      store.find_type(group, group == "vigil.dev" ? "v1alpha1" : "v1", plural);
    EXPECT_NE(found, nullptr) << plural;
    return *found;
  }
  const resource_type& nodes() { return type("nodes"); }
  const resource_type& pods() { return type("pods"); }
  const resource_type& configmaps() { return type("configmaps"); }
  const resource_type& budgets() { return type("poddisruptionbudgets", "policy"); }
  const resource_type& jobs() { return type("jobs", "batch"); }
  const resource_type& resets() { return type("gpuresets", "vigil.dev"); }

  json create(const resource_type& t, const std::string& ns, json object) {
    auto result = store.create(t, ns, std::move(object));
    EXPECT_TRUE(result.ok()) << result.error.message;
    return result.ok() ? *result.value : json();
  }
  json get(const resource_type& t, const std::string& ns, const std::string& name) {
    auto result = store.get(t, ns, name);
    EXPECT_TRUE(result.ok()) << result.error.message;
    return result.ok() ? *result.value : json();
  }
  json patch(const resource_type& t, const std::string& ns, const std::string& name,
             const json& body, patch_type kind, bool status = false) {
    auto result = store.patch(t, ns, name, body, kind, status);
    EXPECT_TRUE(result.ok()) << result.error.message;
    return result.ok() ? *result.value : json();
  }
  bool exists(const resource_type& t, const std::string& ns, const std::string& name) {
    return store.get(t, ns, name).ok();
  }
  std::vector<watch_event> watch(const resource_type& t, const std::string& ns,
                                 std::uint64_t from, list_options selectors = {}) {
    api_status error;
    auto events = store.changes_since(t, ns, from, selectors, error);
    EXPECT_TRUE(events.has_value()) << error.message;
    return events.value_or(std::vector<watch_event>{});
  }
  json budget(const std::string& name, json selector_labels, const char* field,
              json value) {
    return {{"metadata", {{"name", name}}},
            {"spec",
             {{"selector", {{"matchLabels", std::move(selector_labels)}}},
              {field, std::move(value)}}}};
  }

  std::int64_t clock = may_first_2024;
  resource_type gpu_resets{"vigil.dev", "v1alpha1", "gpuresets", "GPUReset",
                           true,        true,       {"gr"},      true};
  object_store store;
};

} // namespace vigil::kube::test_support
