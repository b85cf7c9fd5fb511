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
  return out;
}

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
  return out;
}

} // namespace vigil
