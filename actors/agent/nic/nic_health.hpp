// Port health rules: what a state/phys_state pair means and how severe it is
// (seed 002 §3, Appendix A), and the Appendix A counter rules.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "messages/expected.hpp"
#include "messages/health_event.hpp"

namespace vigil::agent {

/// A sysfs state value split: "1: DOWN" → {1, "DOWN"}.
struct sysfs_state {
  int number = 0;
  std::string name;
};

/// Parses "<n>: <NAME>"; the failure says what was found instead.
expected<sysfs_state> parse_sysfs_state(std::string_view text);

/// seed 002 §3.4 step 3 and §3.2: how a port's health reads.
enum class port_condition {
  healthy,    ///< ACTIVE and LinkUp
  unhealthy,  ///< anything else that is reported
  unreported, ///< INIT/ARMED on Ethernet: a sub-second transient (§3.2), DEBUG only
};

/// The verdict for one port reading.
struct port_verdict {
  port_condition condition = port_condition::healthy;
  bool fatal = false;
  recommended_action action = recommended_action::none;
  std::string state_name; ///< "DOWN"
  std::string phys_name;  ///< "Disabled"
};

/// seed 002 §3.2, §3.4 and Appendix A: ACTIVE + LinkUp is healthy; DOWN or
/// Disabled is fatal (REPLACE_VM); INIT/ARMED on InfiniBand, Polling and
/// LinkErrorRecovery are non-fatal; INIT/ARMED on Ethernet is not reported;
/// any other unhealthy pair is fatal. Fails on text that is not "<n>: <NAME>".
expected<port_verdict> evaluate_port(std::string_view state, std::string_view phys_state,
                                     std::string_view link_layer);

/// seed 002 §13.1 messages: "Port mlx5_0 port 1: state DOWN, phys_state
/// Disabled"; Ethernet ports are "RoCE port …" with ", operstate <x>" added
/// when the operstate is known.
std::string port_message(std::string_view device, unsigned port,
                         std::string_view link_layer, const port_verdict& verdict,
                         std::string_view operstate);

/// What a counter did between two readings (seed 002 Appendix A).
struct counter_finding {
  enum class kind {
    increased, ///< link_downed delta > 0 at runtime: fatal
    breached,  ///< another counter went above 0: fatal
    cleared,   ///< a breached counter is back to 0: healthy
  };
  kind what = kind::increased;
  std::string counter;
  std::uint64_t previous = 0;
  std::uint64_t current = 0;
};

/// seed 002 Appendix A. `previous` is the last reading of this boot (absent
/// after a reboot or on a new port: link_downed then only sets the baseline);
/// `breached` the counters already reported. A counter that went down
/// (reset) sets a new baseline and reports nothing.
std::vector<counter_finding>
evaluate_counters(const std::optional<std::map<std::string, std::uint64_t>>& previous,
                  const std::set<std::string>& breached,
                  const std::map<std::string, std::uint64_t>& current);

/// "Port mlx5_0 port 1: link_downed increased by 2 (3 -> 5)" and the like.
std::string counter_message(std::string_view device, unsigned port,
                            std::string_view link_layer, const counter_finding& finding);

} // namespace vigil::agent
