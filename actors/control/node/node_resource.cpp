#include "actors/control/node/node_resource.hpp"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

namespace vigil::control {

namespace {

using nlohmann::json;

const kube::api_resource nodes{"", "v1", "nodes", false};
const kube::api_resource events{"", "v1", "events", true};

std::string string_at(const json& object, const char* key) {
  auto i = object.find(key);
  return i != object.end() && i->is_string() ? i->get<std::string>() : std::string{};
}

json to_json(const taint& t) {
  json out = {{"key", t.key}, {"effect", std::string(to_string(t.effect))}};
  if (!t.value.empty())
    out["value"] = t.value;
  return out;
}

std::vector<taint> taints_from(const json& list) {
  std::vector<taint> out;
  if (!list.is_array())
    return out;
  for (const auto& item : list) {
    if (!item.is_object())
      continue;
    auto effect = parse_taint_effect(string_at(item, "effect"));
    if (!effect) // NoExecute/NoSchedule/PreferNoSchedule only; others are not ours
      continue;
    out.push_back({string_at(item, "key"), string_at(item, "value"), *effect});
  }
  return out;
}

std::set<std::string> managed_condition_types(const quarantine_policy& policy) {
  std::set<std::string> types;
  for (const auto& [family, type] : policy.condition_types)
    types.insert(type);
  types.insert(agent_condition_type);
  types.insert(fabric_condition_type);
  for (const auto& rule : policy.rules)
    if (!rule.condition_type.empty())
      types.insert(rule.condition_type);
  return types;
}

bool is_managed(const std::set<std::string>& types, const std::string& type) {
  // A family without a configured type gets "<componentClass>Healthy".
  return types.count(type) > 0
         || (type.size() > 7 && type.compare(type.size() - 7, 7, "Healthy") == 0);
}

// Seconds, nanoseconds and a sequence: unique across node actor restarts.
std::string event_name(const std::string& node, wall_time now, std::uint64_t sequence) {
  auto nanos = std::to_string(1000000000 + unix_nanos(now)).substr(1);
  return node + ".vigil." + std::to_string(unix_seconds(now)) + nanos + "."
         + std::to_string(sequence);
}

std::string taint_text(const taint& t) {
  return t.key + (t.value.empty() ? "" : "=" + t.value) + ":"
         + std::string(to_string(t.effect));
}

} // namespace

expected<observed_node> observe_node_body(const std::string& body,
                                          const quarantine_policy& policy,
                                          const label_selector& gpu_nodes,
                                          const label_filter& keep) {
  return observe_node(json::parse(body, nullptr, false), policy, gpu_nodes, keep);
}

expected<observed_node> observe_node(const json& doc, const quarantine_policy& policy,
                                     const label_selector& gpu_nodes,
                                     const label_filter& keep) {
  if (doc.is_discarded() || !doc.is_object())
    return failure{"node", "not a JSON object"};
  if (string_at(doc, "kind") != "" && string_at(doc, "kind") != "Node")
    return failure{"node", "kind is " + string_at(doc, "kind") + ", not Node"};
  auto metadata = doc.find("metadata");
  if (metadata == doc.end() || !metadata->is_object())
    return failure{"node", "missing metadata"};
  if (string_at(*metadata, "name").empty())
    return failure{"node", "missing metadata.name"};

  observed_node out;
  out.resource_version = string_at(*metadata, "resourceVersion");
  auto& obs = out.observation;
  if (auto labels = metadata->find("labels");
      labels != metadata->end() && labels->is_object())
    for (const auto& [key, value] : labels->items())
      if (value.is_string())
        obs.labels[key] = value.get<std::string>();
  out.gpu_node = gpu_nodes.matches(obs.labels);
  if (keep)
    for (auto it = obs.labels.begin(); it != obs.labels.end();)
      it = keep(it->first) ? std::next(it) : obs.labels.erase(it);
  if (auto notes = metadata->find("annotations");
      notes != metadata->end() && notes->is_object()) {
    obs.cordon_owned = string_at(*notes, node_annotation::cordoned) == "true";
    obs.annotation = string_at(*notes, node_annotation::quarantine);
    auto owned =
      json::parse(string_at(*notes, node_annotation::owned_taints), nullptr, false);
    obs.owned_taints = taints_from(owned);
    std::sort(obs.owned_taints.begin(), obs.owned_taints.end());
  }
  if (auto spec = doc.find("spec"); spec != doc.end() && spec->is_object()) {
    auto unschedulable = spec->find("unschedulable");
    obs.unschedulable = unschedulable != spec->end() && unschedulable->is_boolean()
                        && unschedulable->get<bool>();
    if (auto taints = spec->find("taints"); taints != spec->end())
      obs.taints = taints_from(*taints);
  }
  const auto types = managed_condition_types(policy);
  if (auto status = doc.find("status"); status != doc.end() && status->is_object())
    if (auto conditions = status->find("conditions");
        conditions != status->end() && conditions->is_array())
      for (const auto& c : *conditions) {
        if (!c.is_object())
          continue;
        auto type = string_at(c, "type");
        kube_condition seen{type, string_at(c, "status"), string_at(c, "reason"),
                            string_at(c, "message"), std::nullopt};
        if (auto since = parse_rfc3339(string_at(c, "lastTransitionTime")))
          seen.since = *since;
        out.conditions.push_back(std::move(seen));
        if (!is_managed(types, type))
          continue;
        obs.conditions[type] =
          node_condition{type, string_at(c, "status") == "True", string_at(c, "reason"),
                         string_at(c, "message")};
      }
  return out;
}

std::string node_spec_patch(const quarantine_decision& d, const observed_node& node) {
  const auto& obs = node.observation;
  json annotations = json::object();
  if (d.cordon_owned_after != obs.cordon_owned)
    annotations[node_annotation::cordoned] =
      d.cordon_owned_after ? json("true") : json(nullptr);
  auto owned_before = obs.owned_taints;
  std::sort(owned_before.begin(), owned_before.end());
  if (d.owned_taints_after != owned_before) {
    if (d.owned_taints_after.empty()) {
      annotations[node_annotation::owned_taints] = nullptr;
    } else {
      json list = json::array();
      for (const auto& t : d.owned_taints_after)
        list.push_back(to_json(t));
      annotations[node_annotation::owned_taints] = list.dump();
    }
  }
  if (d.annotation)
    annotations[node_annotation::quarantine] =
      d.annotation->empty() ? json(nullptr) : json(*d.annotation);

  json spec = json::object();
  if (d.cordon)
    spec["unschedulable"] = true;
  if (d.uncordon)
    spec["unschedulable"] = nullptr;
  if (!d.add_taints.empty() || !d.remove_taints.empty()) {
    json taints = json::array();
    for (const auto& t : obs.taints)
      if (std::find(d.remove_taints.begin(), d.remove_taints.end(), t)
          == d.remove_taints.end())
        taints.push_back(to_json(t));
    for (const auto& t : d.add_taints)
      if (std::find(obs.taints.begin(), obs.taints.end(), t) == obs.taints.end())
        taints.push_back(to_json(t));
    spec["taints"] = taints.empty() ? json(nullptr) : taints;
  }
  if (annotations.empty() && spec.empty())
    return {};
  json patch = {{"metadata", {{"resourceVersion", node.resource_version}}}};
  if (!annotations.empty())
    patch["metadata"]["annotations"] = annotations;
  if (!spec.empty())
    patch["spec"] = spec;
  return patch.dump();
}

std::string node_status_patch(const quarantine_decision& d, wall_time now) {
  if (d.set_conditions.empty())
    return {};
  const auto stamp = format_rfc3339(now);
  json conditions = json::array();
  for (const auto& c : d.set_conditions)
    conditions.push_back({{"type", c.type},
                          {"status", c.healthy ? "True" : "False"},
                          {"reason", c.reason},
                          {"message", c.message},
                          {"lastHeartbeatTime", stamp},
                          {"lastTransitionTime", stamp}});
  return json{{"status", {{"conditions", conditions}}}}.dump();
}

std::optional<kube::kube_request> spec_patch_request(const std::string& node,
                                                     const std::string& patch) {
  if (patch.empty())
    return std::nullopt;
  auto r = kube::make_request("PATCH", kube::resource_path(nodes, {}, node), patch);
  r.content_type = kube::content_type::merge_patch;
  r.urgent = true; // cordon, taints, uncordon: before drains and Events
  return r;
}

std::optional<kube::kube_request> status_patch_request(const std::string& node,
                                                       const std::string& patch) {
  if (patch.empty())
    return std::nullopt;
  auto r =
    kube::make_request("PATCH", kube::resource_path(nodes, {}, node, "status"), patch);
  r.content_type = kube::content_type::strategic_merge_patch;
  return r;
}

kube::kube_request get_node_request(const std::string& node) {
  return kube::make_request("GET", kube::resource_path(nodes, {}, node));
}

kube::kube_request node_event_request(const std::string& node, const std::string& ns,
                                      const std::string& reason,
                                      const std::string& message, bool warning,
                                      wall_time now, std::uint64_t sequence) {
  const auto stamp = format_rfc3339(now);
  json event = {
    {"apiVersion", "v1"},
    {"kind", "Event"},
    {"metadata", {{"name", event_name(node, now, sequence)}, {"namespace", ns}}},
    {"involvedObject",
     {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}, {"uid", node}}},
    {"reason", reason},
    {"message", message.substr(0, 1024)},
    {"type", warning ? "Warning" : "Normal"},
    {"source", {{"component", "vigil"}}},
    {"reportingComponent", "vigil"},
    {"firstTimestamp", stamp},
    {"lastTimestamp", stamp},
    {"count", 1}};
  return kube::make_request("POST", kube::resource_path(events, ns), event.dump());
}

std::string describe(const quarantine_decision& d) {
  std::string out;
  auto add = [&](const std::string& part) { out += (out.empty() ? "" : "; ") + part; };
  if (d.cordon)
    add("cordon");
  if (d.uncordon)
    add("uncordon");
  for (const auto& t : d.add_taints)
    add("taint " + taint_text(t));
  for (const auto& t : d.remove_taints)
    add("untaint " + taint_text(t));
  for (const auto& c : d.set_conditions)
    add(c.type + (c.healthy ? "=True" : "=False"));
  if (d.held_by_breaker)
    add("held by the circuit breaker");
  if (d.opted_out && d.quarantined)
    add("opted out: no cordon or taint");
  if (out.empty() && d.annotation)
    add("annotation updated");
  return out.empty() ? "no change" : out;
}

} // namespace vigil::control
