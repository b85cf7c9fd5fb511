#include "actors/control/drain/drain_resource.hpp"

#include <nlohmann/json.hpp>

namespace vigil::control {

using nlohmann::json;

namespace {

const kube::api_resource pods_resource{"", "v1", "pods", true};

std::string text_at(const json& object, const char* key) {
  auto i = object.find(key);
  return i != object.end() && i->is_string() ? i->get<std::string>() : std::string{};
}

const json& member(const json& object, const char* key) {
  static const json empty = json::object();
  auto i = object.find(key);
  return i != object.end() && i->is_object() ? *i : empty;
}

// The controller's kind (ownerReferences[controller=true]), else the first owner's.
std::string owner_kind(const json& metadata) {
  auto owners = metadata.find("ownerReferences");
  if (owners == metadata.end() || !owners->is_array() || owners->empty())
    return {};
  for (const auto& owner : *owners)
    if (owner.is_object() && owner.value("controller", false))
      return text_at(owner, "kind");
  return owners->front().is_object() ? text_at(owners->front(), "kind") : std::string{};
}

// A non-zero nvidia.com/gpu in any container's requests or limits.
bool requests_gpu(const json& spec) {
  auto containers = spec.find("containers");
  if (containers == spec.end() || !containers->is_array())
    return false;
  for (const auto& c : *containers) {
    if (!c.is_object())
      continue;
    const auto& resources = member(c, "resources");
    for (const char* part : {"limits", "requests"}) {
      const auto& amounts = member(resources, part);
      auto gpu = amounts.find(gpu_resource);
      if (gpu == amounts.end())
        continue;
      if ((gpu->is_string() && gpu->get<std::string>() != "0")
          || (gpu->is_number() && gpu->get<double>() > 0))
        return true;
    }
  }
  return false;
}

json pod_json(const pod_ref& pod) {
  return {{"namespace", pod.ns}, {"name", pod.name}};
}

} // namespace

kube::kube_request node_pods_request(const std::string& node) {
  return kube::make_request("GET", kube::resource_path(pods_resource), {},
                            "fieldSelector="
                              + kube::query_escape("spec.nodeName=" + node));
}

std::optional<std::vector<std::string>>
gpu_uuids_from_annotation(const std::string& value) {
  auto doc = json::parse(value, nullptr, false);
  if (doc.is_object())
    doc = doc.contains("devices") ? doc["devices"] : json();
  if (!doc.is_array())
    return std::nullopt;
  std::vector<std::string> uuids;
  for (const auto& device : doc) {
    if (!device.is_object() || !device.contains("deviceIds")
        || !device["deviceIds"].is_array())
      return std::nullopt;
    if (text_at(device, "resourceName") != gpu_resource)
      continue;
    for (const auto& id : device["deviceIds"]) {
      if (!id.is_string())
        return std::nullopt;
      uuids.push_back(id.get<std::string>());
    }
  }
  return uuids;
}

expected<std::vector<pod_info>> pods_from_list(const std::string& pod_list_json) {
  auto doc = json::parse(pod_list_json, nullptr, false);
  if (!doc.is_object() || !doc.contains("items") || !doc["items"].is_array())
    return failure{"PodList", "not a List object with an items array"};
  std::vector<pod_info> pods;
  for (const auto& item : doc["items"]) {
    if (!item.is_object())
      return failure{"PodList.items", "an item is not an object"};
    const auto& metadata = member(item, "metadata");
    pod_info pod;
    pod.ns = text_at(metadata, "namespace");
    pod.name = text_at(metadata, "name");
    if (pod.name.empty())
      return failure{"PodList.items", "a pod has no metadata.name"};
    pod.owner_kind = owner_kind(metadata);
    for (const auto& [key, value] : member(metadata, "labels").items())
      if (value.is_string())
        pod.labels.emplace(key, value.get<std::string>());
    const auto& annotations = member(metadata, "annotations");
    pod.mirror = annotations.contains("kubernetes.io/config.mirror");
    const auto phase = text_at(member(item, "status"), "phase");
    pod.finished = phase == "Succeeded" || phase == "Failed";
    const auto& spec = member(item, "spec");
    pod.requests_gpu = requests_gpu(spec);
    const auto claims = spec.find("resourceClaims");
    pod.claims_resources = claims != spec.end() && claims->is_array() && !claims->empty();
    if (auto devices = annotations.find(gpu_devices_annotation);
        devices != annotations.end() && devices->is_string()) {
      pod.gpu_uuids = gpu_uuids_from_annotation(devices->get<std::string>());
      pod.gpu_source = pod.gpu_uuids ? "annotation" : "";
    } else if (!pod.requests_gpu && !pod.claims_resources) {
      // Holds no GPU, known. A pod with resource claims may hold GPUs
      // through DRA: unknown until its claims say which.
      pod.gpu_uuids = std::vector<std::string>{};
      pod.gpu_source = "no GPU request";
    }
    pods.push_back(std::move(pod));
  }
  return pods;
}

std::string apply_gpu_allocations(std::vector<pod_info>& pods,
                                  const std::optional<gpu_allocations>& report,
                                  const std::optional<gpu_allocations>& dra) {
  const bool report_usable = report && report->available;
  for (auto& pod : pods) {
    if (dra)
      if (auto held = gpus_held_by(*dra, pod.ns, pod.name)) {
        pod.gpu_uuids = std::move(*held);
        pod.gpu_source = "dra";
        continue;
      }
    if (report_usable)
      if (auto held = gpus_held_by(*report, pod.ns, pod.name)) {
        pod.gpu_uuids = std::move(*held);
        pod.gpu_source = "kubelet";
      }
  }
  if (!report)
    return "the node's agent has not reported the kubelet's GPU allocations";
  if (!report->available)
    return "the kubelet's PodResources API was unavailable to the node's agent: "
           + report->error;
  return "";
}

kube::kube_request eviction_request(const pod_ref& pod) {
  json eviction = {{"apiVersion", "policy/v1"},
                   {"kind", "Eviction"},
                   {"metadata", {{"name", pod.name}, {"namespace", pod.ns}}}};
  auto request = kube::make_request(
    "POST", kube::resource_path(pods_resource, pod.ns, pod.name, "eviction"),
    eviction.dump());
  request.retry_throttled = false;
  return request;
}

kube::kube_request pod_delete_request(const pod_ref& pod) {
  return kube::make_request("DELETE",
                            kube::resource_path(pods_resource, pod.ns, pod.name));
}

step_result classify(const kube::kube_result& result) {
  if (result.ok())
    return step_result::accepted;
  const auto& err = result.error();
  if (err.not_found())
    return step_result::not_found;
  if (err.throttled())
    return step_result::too_many_requests;
  return step_result::failed;
}

json drain_started_body(const drain_plan& plan, const std::string& key, bool dry_run) {
  json evict = json::array();
  for (const auto& e : plan.evict) {
    auto pod = pod_json(e.pod);
    pod["mode"] = to_string(e.mode);
    if (e.mode == drain_mode::delete_after_timeout)
      pod["timeoutMinutes"] = e.timeout.count();
    if (!e.owner_kind.empty())
      pod["ownerKind"] = e.owner_kind;
    if (e.gpus && !e.gpus->empty()) // attribution: whose work the fault cost
      pod["gpus"] = *e.gpus;
    if (!e.gpu_source.empty())
      pod["gpuSource"] = e.gpu_source;
    evict.push_back(std::move(pod));
  }
  json skipped = json::array();
  for (const auto& s : plan.skipped) {
    auto pod = pod_json(s.pod);
    pod["reason"] = s.reason;
    skipped.push_back(std::move(pod));
  }
  return {{"phase", "started"}, {"drain", key},   {"scope", to_string(plan.scope)},
          {"why", plan.why},    {"evict", evict}, {"skipped", skipped},
          {"dryRun", dry_run}};
}

json drain_finished_body(const drain_progress& progress, const std::string& key,
                         std::size_t evictions, std::size_t deletions) {
  json out = {{"phase", to_string(progress.status())},
              {"drain", key},
              {"scope", to_string(progress.plan().scope)},
              {"pods", progress.plan().evict.size()},
              {"evictions", evictions},
              {"deletions", deletions}};
  if (progress.status() == drain_status::cancelled)
    out["reason"] = progress.cancel_reason();
  return out;
}

} // namespace vigil::control
