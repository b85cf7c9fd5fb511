#include "runtime/sim/kube/kube_crds.hpp"

#include <algorithm>

namespace vigil::kube {

bool is_crd_type(const resource_type& type) {
  return type.group == "apiextensions.k8s.io"
         && type.plural == "customresourcedefinitions";
}

std::optional<std::string> crd_problem(const json& crd) {
  const auto spec = crd.value("spec", json::object());
  const auto group = spec.value("group", "");
  const auto plural = spec.value("names", json::object()).value("plural", "");
  const auto name = crd.value("metadata", json::object()).value("name", "");
  if (group.empty() || plural.empty())
    return "spec.group and spec.names.plural are required";
  if (name != plural + "." + group)
    return "metadata.name: must be spec.names.plural+\".\"+spec.group";
  const auto versions = spec.value("versions", json::array());
  if (!versions.is_array() || versions.empty())
    return "spec.versions: must have exactly one version marked as storage version";
  const auto storage = std::count_if(versions.begin(), versions.end(), [](const json& v) {
    return v.value("storage", false);
  });
  if (storage != 1)
    return "spec.versions: must have exactly one version marked as storage version";
  return std::nullopt;
}

std::vector<resource_type> crd_resource_types(const json& crd) {
  const auto spec = crd.value("spec", json::object());
  const auto names = spec.value("names", json::object());
  std::vector<std::string> short_names;
  for (const auto& s : names.value("shortNames", json::array()))
    short_names.push_back(s.get<std::string>());
  std::vector<resource_type> types;
  for (const auto& version : spec.value("versions", json::array())) {
    if (!version.value("served", false))
      continue;
    const bool status = version.value("subresources", json::object()).contains("status");
    types.push_back({spec.value("group", ""), version.value("name", ""),
                     names.value("plural", ""), names.value("kind", ""),
                     spec.value("scope", "Namespaced") == "Namespaced", status,
                     short_names, true});
  }
  return types;
}

json established_crd_status(const json& crd) {
  const auto spec = crd.value("spec", json::object());
  json stored = json::array();
  for (const auto& version : spec.value("versions", json::array()))
    if (version.value("storage", false))
      stored.push_back(version.value("name", ""));
  const auto now = crd.value("metadata", json::object()).value("creationTimestamp", "");
  auto condition = [&](const char* type, const char* reason, const char* message) {
    return json{{"type", type},
                {"status", "True"},
                {"lastTransitionTime", now},
                {"reason", reason},
                {"message", message}};
  };
  return {{"conditions",
           {condition("NamesAccepted", "NoConflicts", "no conflicts found"),
            condition("Established", "InitialNamesAccepted",
                      "the initial names have been accepted")}},
          {"acceptedNames", spec.value("names", json::object())},
          {"storedVersions", stored}};
}

} // namespace vigil::kube
