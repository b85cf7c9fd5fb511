// The NIC driver check of the kernel-log monitor: mlx5_core's fault lines
// (a firmware command timeout, a lost health heartbeat, an unrecoverable
// error; transmit timeouts, slot power, module temperature and unplugs) as NIC
// HealthEvents, as NVIDIA NVSentinel's syslog-health-monitor reports them.
// The patterns are configuration (config/nic_driver_patterns.csv); the first
// that matches a line wins. The NIC is found from the line's PCI address
// through sysfs.
#pragma once

#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "messages/expected.hpp"
#include "messages/health_event.hpp"
#include "messages/wall_time.hpp"

namespace vigil::agent {

inline constexpr std::string_view nic_driver_check_name = "SysLogsNICDriverError";

struct nic_driver_pattern {
  std::string name; ///< the event's errorCode: "cmd_exec_timeout"
  bool fatal = false;
  recommended_action action = recommended_action::none;
  std::string regex; ///< ECMAScript, searched anywhere in the message
  std::string description;
};

/// Reads the CSV (a header, `#` comments, then
/// name,fatal,action,regex,description); failures name the line and field.
expected<std::vector<nic_driver_pattern>> parse_nic_driver_patterns(std::string_view csv);
/// config/nic_driver_patterns.csv from `dir`; the failure names the file.
expected<std::vector<nic_driver_pattern>>
load_nic_driver_patterns(const std::string& dir);

/// "0000:03:00.0": the first PCI function address in `text`, lower case, or "".
std::string first_pci_function(std::string_view text);

/// The NIC a PCI function is when its driver is mlx5_core: the first name
/// under <sysfs>/bus/pci/devices/<bdf>/infiniband/, else under net/; "" when
/// the driver is another or nothing is there.
std::string mlx5_device_of(const std::string& sysfs_root, const std::string& pci);

class nic_driver_check {
public:
  /// A regex that does not compile fails naming the pattern.
  static expected<nic_driver_check> make(std::vector<nic_driver_pattern> patterns);

  /// The first pattern matching `message`, or nullptr. Lines without "mlx5"
  /// or "NETDEV WATCHDOG" are passed over without a regex.
  const nic_driver_pattern* match(std::string_view message) const;

  const std::vector<nic_driver_pattern>& patterns() const { return patterns_; }

  /// What the monitor and `vigil parse kmsg` ask of a raw kernel-log line:
  /// its event when a pattern matches (the NIC resolved under `sysfs_root`,
  /// the time `at`), else nullopt.
  std::optional<health_event> event_for(std::string_view raw_line, wall_time at,
                                        const std::string& node_name,
                                        const std::string& boot_id,
                                        const std::string& sysfs_root) const;

private:
  std::vector<nic_driver_pattern> patterns_;
  std::vector<std::regex> compiled_;
  /// A literal each pattern's match must contain: searched first, so that a
  /// line of mlx5 chatter costs substring searches, not regexes.
  std::vector<std::string> literals_;
};

/// The longest run of literal characters a match of `regex` must contain
/// (outside groups and alternations, an escaped character taken as itself,
/// a character made optional by ?, * or { dropped); "" when none is certain.
std::string required_literal(std::string_view regex);

struct nic_driver_event_input {
  std::string node_name;
  std::string boot_id;
  std::string_view message; ///< the kernel's text (the id's identity)
  std::string_view raw_line;
  std::string timestamp_key; ///< as xid events key their ids
  wall_time at{};
  std::string device; ///< "mlx5_0", or "" when unknown
  std::string pci;    ///< the line's PCI address, or ""
};

/// The event for a matched line: agent syslog-health-monitor, check
/// SysLogsNICDriverError, component NIC, errorCode the pattern's name, the
/// NIC as entity when known, the line as message.
health_event nic_driver_event(const nic_driver_pattern& pattern,
                              const nic_driver_event_input& in);

} // namespace vigil::agent
