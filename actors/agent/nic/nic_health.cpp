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
evaluate_counters(counter_history& history,
                  const std::map<std::string, std::uint64_t>& current,
                  const std::map<std::string, std::uint64_t>& thresholds) {
  using kind = counter_finding::kind;
  std::vector<counter_finding> out;
  for (const auto& [name, value] : current) {
    auto last = history.readings.find(name);
    const bool first_sight = last == history.readings.end();
    const std::uint64_t previous = first_sight ? value : last->second;
    // Installing vigil must not turn the errors a counter gathered before
    // into a fault of today: the first reading, and the one after a reset,
    // is a baseline. A state file of an older vigil kept no baselines; its
    // last readings serve.
    if (first_sight || value < previous)
      history.baselines[name] = value;
    const auto baseline = history.baselines.emplace(name, previous).first->second;
    history.readings[name] = value;
    auto limit = thresholds.find(name);
    const std::uint64_t threshold = limit == thresholds.end() ? 0 : limit->second;
    const bool above = value > baseline && value - baseline > threshold;
    if (name == "link_downed") {
      // Appendix A "delta > 0 (runtime)": each rise is an event of its own.
      if (above && value > previous)
        out.push_back({kind::increased, name, previous, value, baseline, threshold});
      continue;
    }
    // Appendix A "> 0", as a rise since the baseline. A breach clears when
    // the rise is within the threshold again: after a reset (the counter is
    // back to 0 or lower, a new baseline) or a raised threshold. Never on a
    // timer: the monitor reports boundary crossings and stabilization
    // windows are the analyzer's (seed 002 §2.1).
    const bool was_breached = history.breached.count(name) != 0;
    if (above && !was_breached) {
      history.breached.insert(name);
      out.push_back({kind::breached, name, baseline, value, baseline, threshold});
    } else if (!above && was_breached) {
      history.breached.erase(name);
      out.push_back({kind::cleared, name, previous, value, baseline, threshold});
    }
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
      return out + " rose by " + std::to_string(f.current - f.baseline)
             + " above its baseline (" + std::to_string(f.baseline) + " -> "
             + std::to_string(f.current) + ", threshold " + std::to_string(f.threshold)
             + ")";
    case counter_finding::kind::cleared:
      if (f.current < f.previous)
        return out + " was reset (" + std::to_string(f.previous) + " -> "
               + std::to_string(f.current) + "): cleared, new baseline";
      return out + " rose by " + std::to_string(f.current - f.baseline)
             + ", within its threshold " + std::to_string(f.threshold) + " again";
  }
  return out;
}

} // namespace vigil::agent
