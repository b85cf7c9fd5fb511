#include "actors/control/fleet/agent_liveness.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace vigil::control {

expected<agent_heartbeat> decode_heartbeat(std::string_view body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object())
    return failure{"heartbeat", "not a JSON object"};
  agent_heartbeat out;
  auto text = [&](const char* key, std::string& into) -> status {
    auto it = j.find(key);
    if (it == j.end())
      return ok();
    if (!it->is_string())
      return failure{key, "expected a string"};
    into = it->get<std::string>();
    return ok();
  };
  for (auto [key, into] :
       {std::pair{"nodeName", &out.node_name},
        std::pair{"agentVersion", &out.agent_version}, std::pair{"bootId", &out.boot_id}})
    if (auto st = text(key, *into); !st)
      return st.error();
  if (out.node_name.empty())
    return failure{"nodeName", "missing or empty"};
  std::string sent;
  if (auto st = text("sentAt", sent); !st)
    return st.error();
  if (!sent.empty()) {
    auto at = parse_rfc3339(sent);
    if (!at)
      return failure{"sentAt", at.error().to_string()};
    out.sent_at = *at;
  }
  if (auto it = j.find("intervalSeconds"); it != j.end()) {
    if (!it->is_number() || it->get<double>() < 0)
      return failure{"intervalSeconds", "expected a number of seconds, 0 or more"};
    out.interval_seconds = it->get<double>();
  }
  if (auto it = j.find("gpus"); it != j.end() && !it->is_null()) {
    auto gpus = decode_agent_gpu_facts(*it);
    if (!gpus)
      return gpus.error();
    out.gpus = std::move(*gpus);
  }
  return out;
}

void agent_liveness::watch(const std::string& node, wall_time now) {
  nodes_.try_emplace(node, entry{now, false});
}

void agent_liveness::forget(const std::string& node) {
  nodes_.erase(node);
}

bool agent_liveness::heard(const std::string& node, wall_time now) {
  auto& e = nodes_[node];
  const bool was_flagged = e.flagged;
  e.last = std::max(e.last, now);
  e.flagged = false;
  return was_flagged;
}

std::vector<std::pair<std::string, wall_time>>
agent_liveness::newly_silent(wall_time now) {
  std::vector<std::pair<std::string, wall_time>> out;
  if (silence_.count() == 0)
    return out;
  for (auto& [node, e] : nodes_)
    if (!e.flagged && now - e.last >= silence_) {
      e.flagged = true;
      out.emplace_back(node, e.last);
    }
  return out;
}

std::size_t agent_liveness::silent() const {
  return static_cast<std::size_t>(std::count_if(
    nodes_.begin(), nodes_.end(), [](const auto& n) { return n.second.flagged; }));
}

} // namespace vigil::control
