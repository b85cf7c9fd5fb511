#include "actors/control/drain/dra_allocations.hpp"

#include <map>
#include <tuple>

#include <nlohmann/json.hpp>

#include "messages/json_path.hpp"

namespace vigil::control {

namespace {

using nlohmann::json;

// (driver, pool, device) → the device's GPU UUID ("" when it has none).
using device_key = std::tuple<std::string, std::string, std::string>;

expected<json> list_items(const std::string& body, const char* what) {
  auto doc = json::parse(body, nullptr, false);
  if (!doc.is_object() || !doc.contains("items") || !doc["items"].is_array())
    return failure{what, "not a List object with an items array"};
  return doc["items"];
}

// A resource.k8s.io collection: ResourceSlices (cluster-scoped), or
// ResourceClaims across the cluster or in namespace `ns`.
std::string dra_path(std::string_view version, const char* plural,
                     const std::string& ns = {}) {
  return kube::resource_path({"resource.k8s.io", std::string(version), plural}, ns);
}

} // namespace

kube::kube_request resource_claims_request(std::string_view version,
                                           const std::string& ns) {
  return kube::make_request("GET", dra_path(version, "resourceclaims", ns));
}

kube::kube_request resource_slices_request(std::string_view version,
                                           const std::string& node) {
  return kube::make_request("GET", dra_path(version, "resourceslices"), {},
                            "fieldSelector="
                              + kube::query_escape("spec.nodeName=" + node));
}

std::string device_gpu_uuid(const json& device) {
  const json* attributes = json_at(device, {"attributes"});
  if (attributes == nullptr)
    attributes = json_at(device, {"basic", "attributes"}); // v1beta1
  if (attributes == nullptr || !attributes->is_object())
    return "";
  for (const auto& [name, value] : attributes->items()) {
    const bool is_uuid =
      name == "uuid"
      || (name.size() > 5 && name.compare(name.size() - 5, 5, "/uuid") == 0);
    if (is_uuid && value.is_object())
      if (auto text = value.find("string"); text != value.end() && text->is_string())
        return text->get<std::string>();
  }
  return "";
}

expected<gpu_allocations> dra_gpu_allocations(const std::vector<std::string>& claim_lists,
                                              const std::string& slice_list_json,
                                              const std::string& node) {
  json claims = json::array();
  for (const auto& list : claim_lists) {
    auto items = list_items(list, "ResourceClaimList");
    if (!items)
      return items.error();
    for (auto& claim : *items)
      claims.push_back(std::move(claim));
  }
  auto slices = list_items(slice_list_json, "ResourceSliceList");
  if (!slices)
    return slices.error();
  std::map<device_key, std::string> devices;
  for (const auto& slice : *slices) {
    if (json_text(slice, {"spec", "nodeName"}) != node)
      continue;
    const auto driver = json_text(slice, {"spec", "driver"});
    const auto pool = json_text(slice, {"spec", "pool", "name"});
    const json* listed = json_at(slice, {"spec", "devices"});
    if (listed == nullptr || !listed->is_array())
      continue;
    for (const auto& device : *listed)
      devices[{driver, pool, json_text(device, {"name"})}] = device_gpu_uuid(device);
  }
  gpu_allocations report;
  report.node = node;
  report.source = "dra";
  for (const auto& claim : claims) {
    const json* results = json_at(claim, {"status", "allocation", "devices", "results"});
    const json* users = json_at(claim, {"status", "reservedFor"});
    if (results == nullptr || !results->is_array() || users == nullptr
        || !users->is_array())
      continue;
    std::map<std::string, gpu_allocation> by_driver;
    for (const auto& result : *results) {
      const auto driver = json_text(result, {"driver"});
      auto found = devices.find(
        {driver, json_text(result, {"pool"}), json_text(result, {"device"})});
      if (found == devices.end())
        continue; // another node's device
      auto& a = by_driver[driver];
      a.resource = "dra:" + driver;
      a.container = json_text(claim, {"metadata", "name"}); // the claim, for the journal
      if (found->second.empty())
        a.unresolved.push_back(json_text(result, {"device"}));
      else
        a.gpu_uuids.push_back(found->second);
    }
    const auto ns = json_text(claim, {"metadata", "namespace"});
    for (const auto& user : *users) {
      if (json_text(user, {"resource"}) != "pods")
        continue;
      for (auto a : by_driver) {
        a.second.ns = ns;
        a.second.pod = json_text(user, {"name"});
        report.allocations.push_back(std::move(a.second));
      }
    }
  }
  return report;
}

} // namespace vigil::control
