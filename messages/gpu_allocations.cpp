#include "messages/gpu_allocations.hpp"

#include <algorithm>
#include <map>
#include <utility>

#include <nlohmann/json.hpp>

namespace vigil {

namespace {

using json = nlohmann::json;

expected<std::string> text_field(const json& object, const char* key,
                                 const std::string& where, bool required) {
  auto it = object.find(key);
  if (it == object.end()) {
    if (required)
      return failure{where + key, "missing"};
    return std::string();
  }
  if (!it->is_string())
    return failure{where + key, "expected a string"};
  return it->get<std::string>();
}

expected<std::vector<std::string>> text_list(const json& object, const char* key,
                                             const std::string& where) {
  std::vector<std::string> out;
  auto it = object.find(key);
  if (it == object.end())
    return out;
  if (!it->is_array())
    return failure{where + key, "expected an array of strings"};
  for (const auto& item : *it) {
    if (!item.is_string())
      return failure{where + key, "expected an array of strings"};
    out.push_back(item.get<std::string>());
  }
  return out;
}

expected<gpu_allocation> decode_allocation(const json& item, const std::string& where) {
  if (!item.is_object())
    return failure{where, "expected an object"};
  gpu_allocation a;
  for (auto [field, key, required] :
       {std::tuple{&a.ns, "namespace", true}, std::tuple{&a.pod, "pod", true},
        std::tuple{&a.container, "container", false},
        std::tuple{&a.resource, "resourceName", false}}) {
    auto value = text_field(item, key, where + ".", required);
    if (!value)
      return value.error();
    *field = std::move(*value);
  }
  auto uuids = text_list(item, "gpuUuids", where + ".");
  if (!uuids)
    return uuids.error();
  a.gpu_uuids = std::move(*uuids);
  auto unresolved = text_list(item, "unresolvedDeviceIds", where + ".");
  if (!unresolved)
    return unresolved.error();
  a.unresolved = std::move(*unresolved);
  return a;
}

} // namespace

std::string encode_gpu_allocations(const gpu_allocations& report) {
  nlohmann::ordered_json j;
  j["nodeName"] = report.node;
  j["observedAt"] = format_rfc3339(report.observed);
  j["source"] = report.source;
  j["available"] = report.available;
  if (!report.error.empty())
    j["error"] = report.error;
  auto list = nlohmann::ordered_json::array();
  for (const auto& a : report.allocations) {
    nlohmann::ordered_json item;
    item["namespace"] = a.ns;
    item["pod"] = a.pod;
    item["container"] = a.container;
    item["resourceName"] = a.resource;
    item["gpuUuids"] = a.gpu_uuids;
    if (!a.unresolved.empty())
      item["unresolvedDeviceIds"] = a.unresolved;
    list.push_back(std::move(item));
  }
  j["allocations"] = std::move(list);
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

expected<gpu_allocations> decode_gpu_allocations(std::string_view text) {
  auto j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return failure{"body", "expected one JSON object"};
  gpu_allocations report;
  auto node = text_field(j, "nodeName", "", true);
  if (!node)
    return node.error();
  if (node->empty())
    return failure{"nodeName", "empty"};
  report.node = std::move(*node);
  auto observed = text_field(j, "observedAt", "", true);
  if (!observed)
    return observed.error();
  auto at = parse_rfc3339(*observed);
  if (!at)
    return failure{"observedAt", "not an RFC 3339 time: " + *observed};
  report.observed = *at;
  auto source = text_field(j, "source", "", false);
  if (!source)
    return source.error();
  if (!source->empty())
    report.source = std::move(*source);
  if (auto it = j.find("available"); it != j.end()) {
    if (!it->is_boolean())
      return failure{"available", "expected true or false"};
    report.available = it->get<bool>();
  }
  auto error = text_field(j, "error", "", false);
  if (!error)
    return error.error();
  report.error = std::move(*error);
  auto list = j.find("allocations");
  if (list != j.end()) {
    if (!list->is_array())
      return failure{"allocations", "expected an array"};
    for (std::size_t i = 0; i < list->size(); ++i) {
      auto a = decode_allocation((*list)[i], "allocations[" + std::to_string(i) + "]");
      if (!a)
        return a.error();
      report.allocations.push_back(std::move(*a));
    }
  }
  return report;
}

std::optional<std::vector<std::string>>
gpus_held_by(const gpu_allocations& report, std::string_view ns, std::string_view pod) {
  std::optional<std::vector<std::string>> held;
  for (const auto& a : report.allocations) {
    if (a.ns != ns || a.pod != pod)
      continue;
    if (!a.unresolved.empty())
      return std::nullopt;
    if (!held)
      held.emplace();
    held->insert(held->end(), a.gpu_uuids.begin(), a.gpu_uuids.end());
  }
  if (held) {
    std::sort(held->begin(), held->end());
    held->erase(std::unique(held->begin(), held->end()), held->end());
  }
  return held;
}

std::vector<gpu_holder> gpu_holders(const gpu_allocations& report,
                                    const std::vector<std::string>& gpu_uuids) {
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> held;
  for (const auto& a : report.allocations)
    held[{a.ns, a.pod}].insert(held[{a.ns, a.pod}].end(), a.gpu_uuids.begin(),
                               a.gpu_uuids.end());
  std::vector<gpu_holder> out;
  for (auto& [pod, gpus] : held) {
    const bool holds_one = std::any_of(gpus.begin(), gpus.end(), [&](const auto& uuid) {
      return std::find(gpu_uuids.begin(), gpu_uuids.end(), uuid) != gpu_uuids.end();
    });
    if (!holds_one)
      continue;
    std::sort(gpus.begin(), gpus.end());
    gpus.erase(std::unique(gpus.begin(), gpus.end()), gpus.end());
    out.push_back({pod.first, pod.second, std::move(gpus)});
  }
  return out;
}

} // namespace vigil
