#include "actors/agent/nic/nic_health.hpp"

#include <cctype>

namespace vigil::agent {

namespace {

// Logical states (seed 002 §3.1).
constexpr int state_down = 1;
constexpr int state_init = 2;
constexpr int state_armed = 3;
constexpr int state_active = 4;

// Physical states (seed 002 §3.1).
constexpr int phys_polling = 2;
constexpr int phys_disabled = 3;
constexpr int phys_link_up = 5;
constexpr int phys_link_error_recovery = 6;

std::string_view port_prefix(std::string_view link_layer) {
  return link_layer == "Ethernet" ? "RoCE port " : "Port ";
}

std::string port_label(std::string_view device, unsigned port,
                       std::string_view link_layer) {
  return std::string(port_prefix(link_layer)) + std::string(device) + " port "
         + std::to_string(port) + ": ";
}

} // namespace

expected<sysfs_state> parse_sysfs_state(std::string_view text) {
  auto colon = text.find(':');
  auto digits = text.substr(0, colon);
  bool numeric = colon != std::string_view::npos && !digits.empty() && digits.size() <= 3;
  for (char c : digits)
    numeric = numeric && std::isdigit(static_cast<unsigned char>(c));
  if (!numeric)
    return failure{"", "expected \"<n>: <NAME>\", got \"" + std::string(text) + "\""};
  auto name = text.substr(colon + 1);
  while (!name.empty() && name.front() == ' ')
    name.remove_prefix(1);
  return sysfs_state{std::stoi(std::string(digits)), std::string(name)};
}

expected<port_verdict> evaluate_port(std::string_view state, std::string_view phys_state,
                                     std::string_view link_layer) {
  auto logical = parse_sysfs_state(state);
  if (!logical)
    return failure{"state", logical.error().what};
  auto physical = parse_sysfs_state(phys_state);
  if (!physical)
    return failure{"phys_state", physical.error().what};
  port_verdict v;
  v.state_name = logical->name;
  v.phys_name = physical->name;
  const int s = logical->number;
  const int p = physical->number;
  // seed 002 §3.4 step 3: healthy means ACTIVE and LinkUp, nothing else.
  if (s == state_active && p == phys_link_up)
    return v;
  v.condition = port_condition::unhealthy;
  // Appendix A: DOWN and Disabled leave no connectivity.
  if (s == state_down || p == phys_disabled) {
    v.fatal = true;
    v.action = recommended_action::replace_vm;
    return v;
  }
  // seed 002 §3.2: INIT/ARMED wait for the subnet manager on InfiniBand; on
  // Ethernet they are a sub-second transient of link training.
  const bool init_or_armed = s == state_init || s == state_armed;
  if (init_or_armed && link_layer == "Ethernet") {
    v.condition = port_condition::unreported;
    return v;
  }
  // seed 002 §3.2: transient and retrying states; persistent ones are caught
  // by the card homogeneity check (§4.3).
  if (init_or_armed || p == phys_polling || p == phys_link_error_recovery)
    return v;
  // seed 002 §3.4 step 4: any other healthy → unhealthy crossing is fatal.
  v.fatal = true;
  v.action = recommended_action::replace_vm;
  return v;
}

std::string port_message(std::string_view device, unsigned port,
                         std::string_view link_layer, const port_verdict& verdict,
                         std::string_view operstate) {
  const bool roce = link_layer == "Ethernet" && !operstate.empty();
  std::string out = port_label(device, port, link_layer);
  if (verdict.condition == port_condition::healthy) {
    out += "healthy (" + verdict.state_name + ", " + verdict.phys_name;
    if (roce)
      out += ", operstate " + std::string(operstate);
    return out + ")";
  }
  out += "state " + verdict.state_name + ", phys_state " + verdict.phys_name;
  if (roce)
    out += ", operstate " + std::string(operstate);
  return out;
}

std::vector<counter_finding>
evaluate_counters(const std::optional<std::map<std::string, std::uint64_t>>& previous,
                  const std::set<std::string>& breached,
                  const std::map<std::string, std::uint64_t>& current) {
  using kind = counter_finding::kind;
  std::vector<counter_finding> out;
  for (const auto& [name, value] : current) {
    std::uint64_t before = 0;
    bool have_before = false;
    if (previous) {
      auto it = previous->find(name);
      have_before = it != previous->end();
      before = have_before ? it->second : 0;
    }
    if (name == "link_downed") {
      // Appendix A: delta > 0 at runtime; the first reading is a baseline.
      if (have_before && value > before)
        out.push_back({kind::increased, name, before, value});
      continue;
    }
    // Appendix A: any value above 0, reported once until it clears.
    const bool was_breached = breached.count(name) != 0;
    if (value > 0 && !was_breached)
      out.push_back({kind::breached, name, before, value});
    else if (value == 0 && was_breached)
      out.push_back({kind::cleared, name, before, value});
  }
  return out;
}

std::string counter_message(std::string_view device, unsigned port,
                            std::string_view link_layer, const counter_finding& f) {
  std::string out = port_label(device, port, link_layer) + f.counter;
  switch (f.what) {
    case counter_finding::kind::increased:
      return out + " increased by " + std::to_string(f.current - f.previous) + " ("
             + std::to_string(f.previous) + " -> " + std::to_string(f.current) + ")";
    case counter_finding::kind::breached:
      return out + " is " + std::to_string(f.current) + " (threshold > 0)";
    case counter_finding::kind::cleared: return out + " is back to 0";
  }
  return out;
}

} // namespace vigil::agent
