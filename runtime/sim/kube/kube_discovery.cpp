#include "runtime/sim/kube/kube_discovery.hpp"

#include <algorithm>
#include <cctype>
#include <ctime>
#include <set>

#include "runtime/sim/kube/kube_store_support.hpp"

namespace vigil::kube {

using namespace detail;

namespace {

const char* const name_description =
  "Name must be unique within a namespace. Is required when creating resources, although "
  "some resources may allow a client to request the generation of an appropriate name "
  "automatically. Name is primarily intended for creation idempotence and configuration "
  "definition. Cannot be updated.";
const char* const age_description =
  "CreationTimestamp is a timestamp representing the server time when this object was "
  "created.";

// Kubernetes' version shape: v<major>[(alpha|beta)<minor>].
struct version_rank {
  bool kube_like = false;
  int stability = 0; // 2 GA, 1 beta, 0 alpha
  long major = 0;
  long minor = 0;
};

version_rank rank_of(const std::string& version) {
  version_rank rank;
  if (version.size() < 2 || version[0] != 'v'
      || !std::isdigit(static_cast<unsigned char>(version[1])))
    return rank;
  std::size_t at = 1;
  while (at < version.size() && std::isdigit(static_cast<unsigned char>(version[at])))
    ++at;
  rank.major = std::stol(version.substr(1, at - 1));
  const auto rest = version.substr(at);
  if (rest.empty()) {
    rank.kube_like = true;
    rank.stability = 2;
    return rank;
  }
  for (const auto& [word, stability] : {std::pair{"beta", 1}, std::pair{"alpha", 0}}) {
    const std::string w = word;
    const auto digits = rest.size() > w.size() ? rest.substr(w.size()) : std::string{};
    if (rest.rfind(w, 0) == 0 && !digits.empty()
        && std::all_of(digits.begin(), digits.end(), [](char c) {
             return std::isdigit(static_cast<unsigned char>(c));
           })) {
      rank.kube_like = true;
      rank.stability = stability;
      rank.minor = std::stol(digits);
    }
  }
  return rank;
}

json column(const std::string& name, const std::string& description, int priority = 0,
            const std::string& format = "") {
  return {{"name", name},
          {"type", "string"},
          {"format", format},
          {"description", description},
          {"priority", priority}};
}

std::string age_of(const json& object, std::int64_t now) {
  auto created = parse_timestamp(meta_string(object, "creationTimestamp"));
  return created ? human_duration(now - *created) : "<unknown>";
}

std::string or_none(const std::string& text) {
  return text.empty() ? "<none>" : text;
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& part : parts)
    out += (out.empty() ? "" : ",") + part;
  return out;
}

json section(const json& object, const char* name) {
  auto it = object.find(name);
  return it != object.end() && it->is_object() ? *it : json::object();
}

json list_at(const json& object, const char* name) {
  auto it = object.find(name);
  return it != object.end() && it->is_array() ? *it : json::array();
}

std::string node_status(const json& node) {
  std::string ready = "Unknown";
  for (const auto& condition : list_at(section(node, "status"), "conditions"))
    if (condition.value("type", "") == "Ready")
      ready = condition.value("status", "") == "True" ? "Ready" : "NotReady";
  if (section(node, "spec").value("unschedulable", false))
    ready += ",SchedulingDisabled";
  return ready;
}

std::string node_roles(const json& node) {
  const std::string role_prefix = "node-role.kubernetes.io/";
  std::set<std::string> roles;
  const auto labels = section(section(node, "metadata"), "labels");
  for (const auto& [key, value] : labels.items()) {
    if (key.rfind(role_prefix, 0) == 0 && key.size() > role_prefix.size())
      roles.insert(key.substr(role_prefix.size()));
    else if (key == "kubernetes.io/role" && value.is_string()
             && !value.get<std::string>().empty())
      roles.insert(value.get<std::string>());
  }
  return roles.empty() ? "<none>" : join({roles.begin(), roles.end()});
}

std::string node_address(const json& node, const std::string& type) {
  for (const auto& address : list_at(section(node, "status"), "addresses"))
    if (address.value("type", "") == type)
      return address.value("address", "");
  return {};
}

json node_columns() {
  return json::array(
    {column("Name", name_description, 0, "name"),
     column("Status", "The status of the node"), column("Roles", "The roles of the node"),
     column("Age", age_description),
     column("Version", "Kubelet Version reported by the node."),
     column("Internal-IP", "List of addresses reachable to the node.", 1),
     column("External-IP", "List of addresses reachable to the node.", 1),
     column("OS-Image", "OS Image reported by the node.", 1),
     column("Kernel-Version", "Kernel Version reported by the node.", 1),
     column("Container-Runtime", "Container Runtime Version.", 1)});
}

json node_cells(const json& node, std::int64_t now) {
  const auto info = section(section(node, "status"), "nodeInfo");
  return json::array(
    {meta_string(node, "name"), node_status(node), node_roles(node), age_of(node, now),
     info.value("kubeletVersion", ""), or_none(node_address(node, "InternalIP")),
     or_none(node_address(node, "ExternalIP")), or_none(info.value("osImage", "")),
     or_none(info.value("kernelVersion", "")),
     or_none(info.value("containerRuntimeVersion", ""))});
}

// What kubectl shows in a pod's STATUS column, and its ready/restart counts.
struct pod_summary {
  std::string reason;
  int ready = 0;
  int total = 0;
  long long restarts = 0;
};

pod_summary summarize_pod(const json& pod) {
  const auto status = section(pod, "status");
  pod_summary summary;
  summary.total = static_cast<int>(list_at(section(pod, "spec"), "containers").size());
  summary.reason = status.value("reason", status.value("phase", ""));
  bool running = false;
  auto statuses = list_at(status, "containerStatuses");
  for (auto it = statuses.rbegin(); it != statuses.rend(); ++it) {
    const auto state = section(*it, "state");
    const auto waiting = section(state, "waiting");
    const auto terminated = section(state, "terminated");
    summary.restarts += it->value("restartCount", 0LL);
    if (!waiting.value("reason", "").empty()) {
      summary.reason = waiting.value("reason", "");
    } else if (!terminated.value("reason", "").empty()) {
      summary.reason = terminated.value("reason", "");
    } else if (!terminated.empty()) {
      const auto signal = terminated.value("signal", 0);
      summary.reason = signal != 0
                         ? "Signal:" + std::to_string(signal)
                         : "ExitCode:" + std::to_string(terminated.value("exitCode", 0));
    } else if (it->value("ready", false) && state.contains("running")) {
      running = true;
      ++summary.ready;
    }
  }
  if (summary.reason == "Completed" && running)
    summary.reason = "Running";
  if (being_deleted(pod))
    summary.reason = status.value("reason", "") == "NodeLost" ? "Unknown" : "Terminating";
  return summary;
}

json pod_columns() {
  return json::array(
    {column("Name", name_description, 0, "name"),
     column("Ready", "The aggregate readiness state of this pod for accepting traffic."),
     column("Status", "The aggregate status of the containers in this pod."),
     column("Restarts",
            "The number of times the containers in this pod have been restarted."),
     column("Age", age_description), column("IP", "IP address allocated to the pod.", 1),
     column("Node", "Name of the node this pod is assigned to.", 1),
     column("Nominated Node", "Name of the node this pod is nominated to run on.", 1),
     column("Readiness Gates", "The readiness gates of this pod.", 1)});
}

json pod_cells(const json& pod, std::int64_t now) {
  const auto summary = summarize_pod(pod);
  const auto status = section(pod, "status");
  return json::array({meta_string(pod, "name"),
                      std::to_string(summary.ready) + "/" + std::to_string(summary.total),
                      summary.reason, std::to_string(summary.restarts), age_of(pod, now),
                      or_none(status.value("podIP", "")),
                      or_none(section(pod, "spec").value("nodeName", "")),
                      or_none(status.value("nominatedNodeName", "")), "<none>"});
}

json table_columns(const std::string& resource) {
  if (resource == "nodes")
    return node_columns();
  if (resource == "pods")
    return pod_columns();
  json columns = json::array({column("Name", name_description, 0, "name")});
  if (resource == "namespaces")
    columns.push_back(column("Status", "The status of the namespace"));
  columns.push_back(column("Age", age_description));
  return columns;
}

json table_cells(const std::string& resource, const json& object, std::int64_t now) {
  if (resource == "nodes")
    return node_cells(object, now);
  if (resource == "pods")
    return pod_cells(object, now);
  json cells = json::array({meta_string(object, "name")});
  if (resource == "namespaces")
    cells.push_back(section(object, "status").value("phase", ""));
  cells.push_back(age_of(object, now));
  return cells;
}

json row_object(const resource_type& type, const json& object, table_object include) {
  if (include == table_object::full)
    return present(type, object);
  return {{"kind", "PartialObjectMetadata"},
          {"apiVersion", "meta.k8s.io/v1"},
          {"metadata", section(object, "metadata")}};
}

json table_metadata(const json& object_or_list, bool is_list) {
  json metadata = json::object();
  const auto source = section(object_or_list, "metadata");
  for (const char* field : {"resourceVersion", "continue", "remainingItemCount"})
    if (source.contains(field) && (is_list || std::string{field} == "resourceVersion"))
      metadata[field] = source[field];
  return metadata;
}

json resource_entry(const resource_type& type) {
  std::string singular = type.kind;
  std::transform(singular.begin(), singular.end(), singular.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  json entry = {
    {"name", type.plural},
    {"singularName", singular},
    {"namespaced", type.namespaced},
    {"kind", type.kind},
    {"verbs", {"create", "delete", "get", "list", "patch", "update", "watch"}}};
  if (!type.short_names.empty())
    entry["shortNames"] = type.short_names;
  if (type.group.empty() ? type.plural == "pods" : plural_group_of(type) == "jobs.batch")
    entry["categories"] = {"all"};
  return entry;
}

json subresource_entry(const resource_type& type, const std::string& name, json verbs) {
  return {{"name", type.plural + "/" + name},
          {"singularName", ""},
          {"namespaced", type.namespaced},
          {"kind", type.kind},
          {"verbs", std::move(verbs)}};
}

} // namespace

json version_document() {
  return {{"major", "1"},
          {"minor", "30"},
          {"gitVersion", "v1.30.0-vigil"},
          {"gitCommit", "0000000000000000000000000000000000000000"},
          {"gitTreeState", "clean"},
          {"buildDate", "2024-04-17T00:00:00Z"},
          {"goVersion", "go1.22.2"},
          {"compiler", "gc"},
          {"platform", "linux/amd64"}};
}

json api_versions_document() {
  return {{"kind", "APIVersions"},
          {"versions", {"v1"}},
          {"serverAddressByClientCIDRs", json::array()}};
}

json api_group_list(const std::vector<resource_type>& types) {
  std::vector<std::string> groups;
  for (const auto& type : types)
    if (!type.group.empty()
        && std::find(groups.begin(), groups.end(), type.group) == groups.end())
      groups.push_back(type.group);
  json list = {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", json::array()}};
  for (const auto& group : groups) {
    std::vector<std::string> versions;
    for (const auto& type : types)
      if (type.group == group
          && std::find(versions.begin(), versions.end(), type.version) == versions.end())
        versions.push_back(type.version);
    std::sort(versions.begin(), versions.end(), higher_version_priority);
    json entries = json::array();
    for (const auto& version : versions)
      entries.push_back({{"groupVersion", group + "/" + version}, {"version", version}});
    list["groups"].push_back(
      {{"name", group}, {"versions", entries}, {"preferredVersion", entries.front()}});
  }
  return list;
}

json api_resource_list(const std::vector<resource_type>& types, const std::string& group,
                       const std::string& version) {
  json resources = json::array();
  for (const auto& type : types) {
    if (type.group != group || type.version != version)
      continue;
    resources.push_back(resource_entry(type));
    if (type.group.empty() && type.plural == "pods") {
      auto eviction = subresource_entry(type, "eviction", {"create"});
      eviction["group"] = "policy";
      eviction["version"] = "v1";
      eviction["kind"] = "Eviction";
      resources.push_back(std::move(eviction));
    }
    if (type.has_status)
      resources.push_back(subresource_entry(type, "status", {"get", "patch", "update"}));
  }
  if (resources.empty())
    return nullptr;
  return {{"kind", "APIResourceList"},
          {"apiVersion", "v1"},
          {"groupVersion", group.empty() ? version : group + "/" + version},
          {"resources", std::move(resources)}};
}

json to_table(const resource_type& type, const json& object_or_list,
              std::optional<std::int64_t> now, table_object include) {
  const auto clock = now.value_or(static_cast<std::int64_t>(std::time(nullptr)));
  const auto resource = plural_group_of(type);
  const bool is_list = object_or_list.is_object() && object_or_list.contains("items")
                       && object_or_list["items"].is_array();
  const json objects = is_list ? object_or_list["items"] : json::array({object_or_list});
  json rows = json::array();
  for (const auto& object : objects) {
    json row = {{"cells", table_cells(resource, object, clock)}};
    if (include != table_object::none)
      row["object"] = row_object(type, object, include);
    rows.push_back(std::move(row));
  }
  return {{"kind", "Table"},
          {"apiVersion", "meta.k8s.io/v1"},
          {"metadata", table_metadata(object_or_list, is_list)},
          {"columnDefinitions", table_columns(resource)},
          {"rows", std::move(rows)}};
}

std::string human_duration(std::int64_t seconds) {
  if (seconds < -1)
    return "<invalid>";
  if (seconds < 0)
    return "0s";
  auto with_rest = [](std::int64_t whole, const char* unit, std::int64_t rest,
                      const char* rest_unit) {
    return std::to_string(whole) + unit
           + (rest == 0 ? "" : std::to_string(rest) + rest_unit);
  };
  const auto minutes = seconds / 60;
  const auto hours = seconds / 3600;
  const auto days = hours / 24;
  if (seconds < 120)
    return std::to_string(seconds) + "s";
  if (minutes < 10)
    return with_rest(minutes, "m", seconds % 60, "s");
  if (minutes < 180)
    return std::to_string(minutes) + "m";
  if (hours < 8)
    return with_rest(hours, "h", minutes % 60, "m");
  if (hours < 48)
    return std::to_string(hours) + "h";
  if (hours < 24 * 8)
    return with_rest(days, "d", hours % 24, "h");
  if (hours < 24 * 365 * 2)
    return std::to_string(days) + "d";
  if (hours < 24 * 365 * 8)
    return with_rest(days / 365, "y", days % 365, "d");
  return std::to_string(days / 365) + "y";
}

bool higher_version_priority(const std::string& a, const std::string& b) {
  const auto left = rank_of(a);
  const auto right = rank_of(b);
  if (left.kube_like != right.kube_like)
    return left.kube_like;
  if (!left.kube_like)
    return a < b;
  return std::tie(left.stability, left.major, left.minor)
         > std::tie(right.stability, right.major, right.minor);
}

} // namespace vigil::kube
