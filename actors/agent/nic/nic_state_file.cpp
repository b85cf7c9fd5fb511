#include "actors/agent/nic/nic_state_file.hpp"

#include "actors/agent/state_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace vigil::agent {

namespace {

using json = nlohmann::json;

constexpr int state_format_version = 1;

const char* health_name(recorded_health h) {
  switch (h) {
    case recorded_health::healthy: return "healthy";
    case recorded_health::degraded: return "degraded";
    case recorded_health::unhealthy: return "unhealthy";
    case recorded_health::unknown: return "unknown";
  }
  return "unknown";
}

json encode_port(const port_record& r) {
  json j{{"state", r.state},
         {"phys_state", r.phys_state},
         {"link_layer", r.link_layer},
         {"health", health_name(r.health)},
         {"counters", r.counters.readings},
         {"counter_baselines", r.counters.baselines},
         {"breached_counters", r.counters.breached}};
  return j;
}

// nlohmann's typed getters throw on a wrong type; decode_nic_state catches
// that and names the field it was reading.
port_record decode_port(const json& j, std::string& field) {
  port_record r;
  field = "state";
  r.state = j.at("state").get<std::string>();
  field = "phys_state";
  r.phys_state = j.at("phys_state").get<std::string>();
  field = "link_layer";
  r.link_layer = j.at("link_layer").get<std::string>();
  field = "health";
  const auto health = j.at("health").get<std::string>();
  if (health == "healthy")
    r.health = recorded_health::healthy;
  else if (health == "degraded")
    r.health = recorded_health::degraded;
  else if (health == "unhealthy")
    r.health = recorded_health::unhealthy;
  else if (health != "unknown")
    throw std::invalid_argument("unknown health \"" + health + "\"");
  using counter_map = std::map<std::string, std::uint64_t>;
  field = "breached_counters";
  r.counters.breached = j.value("breached_counters", std::set<std::string>{});
  field = "counters";
  r.counters.readings = j.value("counters", counter_map{});
  // Files of an older vigil have no baselines: their last readings serve
  // (evaluate_counters does the same for any counter without one).
  field = "counter_baselines";
  r.counters.baselines = j.value("counter_baselines", r.counters.readings);
  return r;
}

} // namespace

bool operator==(const port_record& a, const port_record& b) {
  return a.state == b.state && a.phys_state == b.phys_state
         && a.link_layer == b.link_layer && a.health == b.health
         && a.counters == b.counters;
}

bool operator==(const nic_monitor_state& a, const nic_monitor_state& b) {
  return a.boot_id == b.boot_id && a.ports == b.ports
         && a.known_devices == b.known_devices
         && a.disappeared_devices == b.disappeared_devices
         && a.anomalous_cards == b.anomalous_cards
         && a.cards_below_mode_since == b.cards_below_mode_since;
}

std::string port_key(const std::string& device, unsigned port) {
  return device + "/" + std::to_string(port);
}

std::string encode_nic_state(const nic_monitor_state& state) {
  json ports = json::object();
  for (const auto& [key, record] : state.ports)
    ports[key] = encode_port(record);
  json doc{{"version", state_format_version},
           {"boot_id", state.boot_id},
           {"ports", std::move(ports)},
           {"known_devices", state.known_devices},
           {"disappeared_devices", state.disappeared_devices},
           {"anomalous_cards", state.anomalous_cards},
           {"cards_below_mode_since", state.cards_below_mode_since}};
  return doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

expected<nic_monitor_state> decode_nic_state(const std::string& text) {
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded())
    return failure{"", "not valid JSON"};
  if (!doc.is_object())
    return failure{"", "expected a JSON object"};
  std::string field = "version";
  try {
    if (doc.at("version").get<int>() != state_format_version)
      return failure{"version", "unsupported state file version"};
    nic_monitor_state state;
    field = "boot_id";
    state.boot_id = doc.at("boot_id").get<std::string>();
    field = "ports";
    for (const auto& [key, value] : doc.at("ports").items()) {
      std::string sub;
      try {
        state.ports.emplace(key, decode_port(value, sub));
      } catch (...) {
        field = "ports." + key + "." + sub;
        throw;
      }
    }
    field = "known_devices";
    state.known_devices = doc.at("known_devices").get<std::set<std::string>>();
    field = "disappeared_devices";
    state.disappeared_devices = doc.value("disappeared_devices", std::set<std::string>{});
    field = "anomalous_cards";
    state.anomalous_cards = doc.value("anomalous_cards", std::set<std::string>{});
    field = "cards_below_mode_since";
    state.cards_below_mode_since =
      doc.value("cards_below_mode_since", std::map<std::string, std::int64_t>{});
    return state;
  } catch (const std::exception&) {
    return failure{field, "missing or of the wrong type"};
  }
}

nic_state_load load_nic_state_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT)
      return {};
    return {std::nullopt, failure{path, std::string("unreadable: ") + std::strerror(errno)
                                          + "; treated as a fresh boot"}};
  }
  std::ostringstream text;
  text << in.rdbuf();
  auto state = decode_nic_state(text.str());
  if (!state)
    return {std::nullopt, failure{path, "corrupt (" + state.error().to_string()
                                          + "); treated as a fresh boot"}};
  return {std::move(*state), std::nullopt};
}

status save_nic_state_file(const std::string& path, const nic_monitor_state& state) {
  return replace_file(path, encode_nic_state(state));
}

} // namespace vigil::agent
