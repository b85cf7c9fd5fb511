// Port health rules: what a state/phys_state pair means and how severe it is
// (seed 002 §3, Appendix A), and the Appendix A counter rules.
#pragma once

#include <cstdint>
#include <map>
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

/// One port's Appendix A counters as vigil has seen them on this boot.
struct counter_history {
  /// The last reading of each counter.
  std::map<std::string, std::uint64_t> readings;
  /// Where each counter's rise is measured from: its first reading on this
  /// boot, or its reading after a reset.
  std::map<std::string, std::uint64_t> baselines;
  /// Counters reported above their threshold and not cleared yet.
  std::set<std::string> breached;

  friend bool operator==(const counter_history& a, const counter_history& b) {
    return a.readings == b.readings && a.baselines == b.baselines
           && a.breached == b.breached;
  }
};

/// What a counter did in one poll (seed 002 Appendix A).
struct counter_finding {
  enum class kind {
    increased, ///< link_downed rose while above its threshold: fatal
    breached,  ///< another counter rose above its threshold: fatal
    cleared,   ///< a breached counter is within its threshold again: healthy
  };
  kind what = kind::increased;
  std::string counter;
  /// The reading the change is measured from: the last one for `increased`
  /// and `cleared`, the baseline for `breached`.
  std::uint64_t previous = 0;
  std::uint64_t current = 0;
  std::uint64_t baseline = 0;
  std::uint64_t threshold = 0; ///< the rise above `baseline` that is tolerated
};

/// seed 002 Appendix A, measured from vigil's own baselines: a counter's
/// first reading on this boot (also on a new port, or a counter that went
/// down: a reset) only sets its baseline, since old errors are history and
/// not a present fault. A rise above the baseline of more than the counter's
/// threshold (`thresholds`, 0 when absent) is fatal: every further increase
/// of link_downed (one event per rise, counted by the §6.3 flap rule), once
/// for the others until they clear. Updates `history`.
std::vector<counter_finding>
evaluate_counters(counter_history& history,
                  const std::map<std::string, std::uint64_t>& current,
                  const std::map<std::string, std::uint64_t>& thresholds);

/// "Port mlx5_0 port 1: link_downed increased by 2 (3 -> 5)" and the like.
std::string counter_message(std::string_view device, unsigned port,
                            std::string_view link_layer, const counter_finding& finding);

} // namespace vigil::agent
