// The object store's registry and storage: resource types, keys, generated
// names and uids, committing changes with their resourceVersion, and the
// history that watches and consistent list pages are rebuilt from.
#include "runtime/sim/kube/kube_object_store.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "runtime/sim/kube/kube_store_support.hpp"

namespace vigil::kube {

using namespace detail;

namespace {

std::uint64_t mix_bits(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

} // namespace

json api_status::to_json() const {
  json status = {
    {"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object()},
    {"status", "Failure"}, {"message", message}, {"reason", reason},
    {"code", code}};
  if (!details.is_null())
    status["details"] = details;
  return status;
}

std::vector<resource_type> builtin_resource_types() {
  return {
    {"", "v1", "nodes", "Node", false, true, {"no"}},
    {"", "v1", "pods", "Pod", true, true, {"po"}},
    {"", "v1", "events", "Event", true, false, {"ev"}},
    {"", "v1", "namespaces", "Namespace", false, true, {"ns"}},
    {"", "v1", "configmaps", "ConfigMap", true, false, {"cm"}},
    {"", "v1", "secrets", "Secret", true, false, {}},
    {"", "v1", "serviceaccounts", "ServiceAccount", true, false, {"sa"}},
    {"", "v1", "services", "Service", true, true, {"svc"}},
    {"apps", "v1", "daemonsets", "DaemonSet", true, true, {"ds"}},
    {"apps", "v1", "deployments", "Deployment", true, true, {"deploy"}},
    {"rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", false, false, {}},
    {"rbac.authorization.k8s.io",
     "v1",
     "clusterrolebindings",
     "ClusterRoleBinding",
     false,
     false,
     {}},
    {"rbac.authorization.k8s.io", "v1", "roles", "Role", true, false, {}},
    {"rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", true, false, {}},
    {"networking.k8s.io",
     "v1",
     "networkpolicies",
     "NetworkPolicy",
     true,
     false,
     {"netpol"}},
    {"apiextensions.k8s.io",
     "v1",
     "customresourcedefinitions",
     "CustomResourceDefinition",
     false,
     true,
     {"crd", "crds"}},
    {"policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", true, true, {"pdb"}},
    {"batch", "v1", "jobs", "Job", true, true, {}},
    {"coordination.k8s.io", "v1", "leases", "Lease", true, false, {}},
    {"resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", true, true, {}},
    {"resource.k8s.io", "v1", "resourceslices", "ResourceSlice", false, false, {}},
  };
}

object_store::object_store(size_t watch_window) : watch_window_(watch_window) {
  for (const auto& type : builtin_resource_types()) {
    register_type(type);
    builtin_plural_groups_.insert(plural_group_of(type));
  }
}

void object_store::register_type(const resource_type& type) {
  auto same = std::find_if(types_.begin(), types_.end(), [&](const resource_type& known) {
    return known.group == type.group && known.version == type.version
           && known.plural == type.plural;
  });
  if (same != types_.end())
    *same = type;
  else
    types_.push_back(type);
}

const resource_type* object_store::find_type(const std::string& group,
                                             const std::string& version,
                                             const std::string& plural) const {
  for (const auto& type : types_)
    if (type.group == group && type.version == version && type.plural == plural)
      return &type;
  return nullptr;
}

std::int64_t object_store::now() const {
  return clock_ ? clock_() : static_cast<std::int64_t>(std::time(nullptr));
}

object_key object_store::key_of(const resource_type& type, const std::string& ns,
                                const std::string& name) const {
  return {plural_group_of(type), type.namespaced ? ns : std::string{}, name};
}

const resource_type* object_store::type_of(const std::string& plural_group) const {
  for (const auto& type : types_)
    if (plural_group_of(type) == plural_group)
      return &type;
  return nullptr;
}

bool object_store::is_builtin(const resource_type& type) const {
  return builtin_plural_groups_.count(plural_group_of(type)) > 0;
}

const json* object_store::find(const object_key& key) const {
  auto it = objects_.find(key);
  return it == objects_.end() ? nullptr : &it->second;
}

bool object_store::uid_exists(const std::string& uid) const {
  return std::any_of(objects_.begin(), objects_.end(), [&](const auto& entry) {
    return meta_string(entry.second, "uid") == uid;
  });
}

std::string object_store::next_uid() {
  const auto high = mix_bits(++name_counter_);
  const auto low = mix_bits(++name_counter_);
  char text[48];
  std::snprintf(
    text, sizeof text, "%08x-%04x-4%03x-%04x-%012llx", static_cast<unsigned>(high >> 32),
    static_cast<unsigned>(high >> 16 & 0xFFFF), static_cast<unsigned>(high & 0xFFF),
    static_cast<unsigned>(0x8000 | (low >> 48 & 0x3FFF)),
    static_cast<unsigned long long>(low & 0xFFFFFFFFFFFFULL));
  return text;
}

std::string object_store::unique_name(const resource_type& type, const std::string& ns,
                                      const std::string& prefix) {
  static const std::string alphabet = "bcdfghjklmnpqrstvwxz2456789";
  const auto base = prefix.substr(0, 58);
  for (;;) {
    auto bits = mix_bits(++name_counter_);
    std::string name = base;
    for (int i = 0; i < 5; ++i, bits /= alphabet.size())
      name += alphabet[bits % alphabet.size()];
    if (find(key_of(type, ns, name)) == nullptr)
      return name;
  }
}

json object_store::commit(const object_key& key, json object, const std::string& event) {
  metadata_of(object)["resourceVersion"] = std::to_string(++resource_version_);
  auto& stored = objects_[key];
  json previous = std::move(stored);
  stored = std::move(object);
  index_for_budgets(key, previous, stored);
  record({key, event, stored, std::move(previous), resource_version_});
  return stored;
}

json object_store::commit_delete(const object_key& key) {
  auto it = objects_.find(key);
  json previous = std::move(it->second);
  objects_.erase(it);
  index_for_budgets(key, previous, json());
  json last = previous;
  metadata_of(last)["resourceVersion"] = std::to_string(++resource_version_);
  record({key, "DELETED", last, std::move(previous), resource_version_});
  return last;
}

void object_store::record(history_entry entry) {
  history_.push_back(std::move(entry));
  while (history_.size() > watch_window_) {
    compacted_through_ = history_.front().resource_version;
    history_.pop_front();
  }
}

void object_store::compact(std::uint64_t resource_version) {
  resource_version = std::min(resource_version, resource_version_);
  while (!history_.empty() && history_.front().resource_version <= resource_version)
    history_.pop_front();
  compacted_through_ = std::max(compacted_through_, resource_version);
}

} // namespace vigil::kube
