// The NIC monitor's persisted state: port snapshots, counter baselines and
// breach flags, known devices and the boot ID (seed 002 §2.2, §3.4, §7.2).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/agent/nic/nic_health.hpp"
#include "messages/expected.hpp"

namespace vigil::agent {

/// The last evaluated health of a port. `degraded` is unhealthy without
/// being fatal (INIT/ARMED on InfiniBand, Polling, LinkErrorRecovery), so a
/// later fatal state is a boundary of its own; once fatal a port stays
/// `unhealthy` until it is healthy again.
enum class recorded_health { healthy, degraded, unhealthy, unknown };

/// One port as the previous poll left it.
struct port_record {
  std::string state;      ///< raw "4: ACTIVE"
  std::string phys_state; ///< raw "5: LinkUp"
  std::string link_layer;
  /// Health as last evaluated; `unknown` for an Ethernet port seen only in
  /// INIT/ARMED, which is then judged as on a first poll (seed 002 §3.2).
  recorded_health health = recorded_health::unknown;
  /// Appendix A counters of this boot: last readings, baselines, breaches.
  counter_history counters;

  friend bool operator==(const port_record& a, const port_record& b);
};

/// Everything that survives a pod restart on the same boot.
struct nic_monitor_state {
  std::string boot_id;
  /// Keyed "mlx5_0/1" (device/port).
  std::map<std::string, port_record> ports;
  /// Monitored devices seen on this boot (seed 002 §7.2 KnownDevices).
  std::set<std::string> known_devices;
  /// Devices reported as disappeared and not yet back.
  std::set<std::string> disappeared_devices;
  /// Cards (PCI bus:device) reported below their peer mode (seed 002 §4.3).
  std::set<std::string> anomalous_cards;
  /// Cards below their peer mode at runtime, not reported yet: since when
  /// (Unix seconds).
  std::map<std::string, std::int64_t> cards_below_mode_since;

  friend bool operator==(const nic_monitor_state& a, const nic_monitor_state& b);
};

/// "mlx5_0/1".
std::string port_key(const std::string& device, unsigned port);

/// Pretty JSON, version 1.
std::string encode_nic_state(const nic_monitor_state& state);

/// Parses the JSON form; a failure names the field.
expected<nic_monitor_state> decode_nic_state(const std::string& json);

/// What loading the state file gave: the state, or nothing (a fresh boot,
/// seed 002 §3.4) with a note saying why when the file was there but unusable.
struct nic_state_load {
  std::optional<nic_monitor_state> state;
  std::optional<failure> problem; ///< set for a corrupt or unreadable file
};

/// A missing file is a fresh boot without a problem; a corrupt one is a fresh
/// boot with a problem naming the file (seed 002 §12.1 --state-file).
nic_state_load load_nic_state_file(const std::string& path);

/// Writes via a temporary file and rename, so a crash never leaves half a
/// file; creates no directories. The failure names the file.
status save_nic_state_file(const std::string& path, const nic_monitor_state& state);

} // namespace vigil::agent
