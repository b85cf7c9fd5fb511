#include "actors/agent/podresources/gpu_allocation_reader.hpp"

#include <algorithm>
#include <cctype>

#include "actors/agent/text_input.hpp"

namespace vigil::agent {

namespace {

bool all_digits(std::string_view text) {
  return !text.empty() && text.size() <= 4
         && std::all_of(text.begin(), text.end(),
                        [](unsigned char c) { return std::isdigit(c) != 0; });
}

// NVIDIA's GPU UUIDs: "GPU-" and 32 hex digits in dashed groups.
bool looks_like_gpu_uuid(std::string_view id) {
  constexpr std::string_view prefix = "GPU-";
  if (id.size() <= prefix.size() || id.substr(0, prefix.size()) != prefix
      || id.size() > 64)
    return false;
  std::size_t hex = 0;
  for (unsigned char c : id.substr(prefix.size())) {
    if (std::isxdigit(c) != 0)
      ++hex;
    else if (c != '-')
      return false;
  }
  return hex >= 8;
}

} // namespace

bool gpu_resource_names::matches(std::string_view resource) const {
  return std::any_of(patterns.begin(), patterns.end(), [&](const std::string& p) {
    if (!p.empty() && p.back() == '*')
      return resource.substr(0, p.size() - 1)
             == std::string_view(p).substr(0, p.size() - 1);
    return resource == p;
  });
}

expected<gpu_resource_names> parse_gpu_resource_names(std::string_view list) {
  gpu_resource_names names;
  names.patterns.clear();
  while (true) {
    const auto comma = list.find(',');
    const auto entry = trim_space(list.substr(0, comma));
    if (entry.empty() || entry == "*")
      return failure{"--gpu-resources",
                     "an empty resource name in \"" + std::string(list) + "\""};
    names.patterns.emplace_back(entry);
    if (comma == std::string_view::npos)
      break;
    list.remove_prefix(comma + 1);
  }
  return names;
}

std::string gpu_uuid_of_device_id(std::string_view id, const gpu_metadata& metadata) {
  if (looks_like_gpu_uuid(id))
    return std::string(id);
  if (all_digits(id)) {
    const int index = std::stoi(std::string(id));
    for (const auto& gpu : metadata.gpus)
      if (gpu.gpu_id == index)
        return gpu.uuid;
  }
  return "";
}

gpu_allocations gpu_allocations_from(const v1::ListPodResourcesResponse& list,
                                     const std::string& node, wall_time observed,
                                     const gpu_metadata& metadata,
                                     const gpu_resource_names& resources,
                                     allocation_read_notes& notes) {
  gpu_allocations report;
  report.node = node;
  report.observed = observed;
  for (const auto& pod : list.pod_resources())
    for (const auto& container : pod.containers())
      for (const auto& devices : container.devices()) {
        if (!resources.matches(devices.resource_name())) {
          ++notes.other_resources;
          continue;
        }
        gpu_allocation a{pod.namespace_(),        pod.name(), container.name(),
                         devices.resource_name(), {},         {}};
        for (const auto& id : devices.device_ids()) {
          auto uuid = gpu_uuid_of_device_id(id, metadata);
          if (uuid.empty()) {
            a.unresolved.push_back(id);
            notes.unresolved.push_back(a.ns + "/" + a.pod + "/" + a.container + ": "
                                       + id);
          } else {
            a.gpu_uuids.push_back(std::move(uuid));
          }
        }
        report.allocations.push_back(std::move(a));
      }
  return report;
}

std::vector<std::string> allocatable_gpus(const v1::AllocatableResourcesResponse& answer,
                                          const gpu_metadata& metadata,
                                          const gpu_resource_names& resources) {
  std::vector<std::string> gpus;
  for (const auto& devices : answer.devices())
    if (resources.matches(devices.resource_name()))
      for (const auto& id : devices.device_ids())
        if (auto uuid = gpu_uuid_of_device_id(id, metadata); !uuid.empty())
          gpus.push_back(std::move(uuid));
  std::sort(gpus.begin(), gpus.end());
  gpus.erase(std::unique(gpus.begin(), gpus.end()), gpus.end());
  return gpus;
}

} // namespace vigil::agent
