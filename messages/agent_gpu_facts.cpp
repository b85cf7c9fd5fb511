#include "messages/agent_gpu_facts.hpp"

#include <nlohmann/json.hpp>

namespace vigil {

nlohmann::json encode_agent_gpu_facts(const agent_gpu_facts& facts) {
  auto out = nlohmann::json::object();
  if (!facts.product.empty())
    out["product"] = facts.product;
  if (facts.gpu_count >= 0)
    out["count"] = facts.gpu_count;
  if (facts.nvswitch_count >= 0)
    out["nvswitches"] = facts.nvswitch_count;
  if (!facts.driver_version.empty())
    out["driverVersion"] = facts.driver_version;
  if (!facts.devices.empty()) {
    auto devices = nlohmann::json::array();
    for (const auto& gpu : facts.devices) {
      nlohmann::json d = {{"uuid", gpu.uuid}};
      if (gpu.index >= 0)
        d["index"] = gpu.index;
      if (!gpu.pci.empty())
        d["pci"] = gpu.pci;
      devices.push_back(std::move(d));
    }
    out["devices"] = std::move(devices);
  }
  return out;
}

namespace {

expected<std::vector<agent_gpu>> decode_devices(const nlohmann::json& list) {
  if (!list.is_array())
    return failure{"gpus.devices", "expected an array"};
  if (list.size() > max_agent_gpus)
    return failure{"gpus.devices",
                   "more than " + std::to_string(max_agent_gpus) + " GPUs"};
  std::vector<agent_gpu> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const auto where = "gpus.devices[" + std::to_string(i) + "]";
    const auto& d = list[i];
    if (!d.is_object())
      return failure{where, "expected an object"};
    agent_gpu gpu;
    auto uuid = d.find("uuid");
    if (uuid == d.end() || !uuid->is_string() || uuid->get<std::string>().empty())
      return failure{where + ".uuid", "expected a non-empty string"};
    gpu.uuid = uuid->get<std::string>();
    if (auto pci = d.find("pci"); pci != d.end() && !pci->is_null()) {
      if (!pci->is_string())
        return failure{where + ".pci", "expected a string"};
      gpu.pci = pci->get<std::string>();
    }
    if (auto index = d.find("index"); index != d.end() && !index->is_null()) {
      if (!index->is_number_integer() || index->get<long long>() < 0
          || index->get<long long>() >= static_cast<long long>(max_agent_gpus))
        return failure{where + ".index", "expected an integer from 0 to "
                                           + std::to_string(max_agent_gpus - 1)};
      gpu.index = index->get<int>();
    }
    out.push_back(std::move(gpu));
  }
  return out;
}

} // namespace

expected<agent_gpu_facts> decode_agent_gpu_facts(const nlohmann::json& object) {
  if (!object.is_object())
    return failure{"gpus", "expected an object"};
  agent_gpu_facts out;
  for (auto [key, into] : {std::pair{"product", &out.product},
                           std::pair{"driverVersion", &out.driver_version}}) {
    auto it = object.find(key);
    if (it == object.end() || it->is_null())
      continue;
    if (!it->is_string())
      return failure{std::string("gpus.") + key, "expected a string"};
    *into = it->get<std::string>();
  }
  for (auto [key, into] : {std::pair{"count", &out.gpu_count},
                           std::pair{"nvswitches", &out.nvswitch_count}}) {
    auto it = object.find(key);
    if (it == object.end() || it->is_null())
      continue;
    if (!it->is_number_integer() || it->get<long long>() < 0
        || it->get<long long>() > 100000)
      return failure{std::string("gpus.") + key, "expected an integer, 0 or more"};
    *into = it->get<int>();
  }
  if (auto it = object.find("devices"); it != object.end() && !it->is_null()) {
    auto devices = decode_devices(*it);
    if (!devices)
      return devices.error();
    out.devices = std::move(*devices);
  }
  return out;
}

} // namespace vigil
