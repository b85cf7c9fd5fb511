// The NIC monitor's settings: the flags of seed 002 §12.1 with their
// defaults, and their parser (errors name the flag).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "messages/expected.hpp"
#include "messages/health_event.hpp"
#include "runtime/command_line.hpp"

namespace vigil::agent {

/// The checks --checks enables (seed 002 §12.1); also the events' checkName.
enum class nic_check {
  infiniband_state,       ///< "InfiniBandStateCheck"
  infiniband_degradation, ///< "InfiniBandDegradationCheck" (Appendix A counters)
  ethernet_state,         ///< "EthernetStateCheck"
  ethernet_degradation,   ///< "EthernetDegradationCheck"
};

std::string_view to_string(nic_check check);
std::optional<nic_check> parse_nic_check(std::string_view name);

/// The state or degradation check for a port's link layer ("Ethernet" → the
/// Ethernet ones, anything else → the InfiniBand ones).
nic_check state_check_for(std::string_view link_layer);
nic_check degradation_check_for(std::string_view link_layer);

/// seed 002 Appendix A: every counter at 0 (any rise above its baseline is
/// fatal).
std::map<std::string, std::uint64_t> default_counter_thresholds();

/// Applies "NAME=N[,NAME=N...]" over `thresholds`; the failure names
/// --counter-threshold and the bad counter name or value.
status parse_counter_thresholds(std::string_view text,
                                std::map<std::string, std::uint64_t>& thresholds);

/// seed 002 §12.1; every default is the seed's.
struct nic_monitor_options {
  /// --state-polling-interval, Go duration ("1s", "500ms"); must be > 0.
  std::chrono::milliseconds state_polling_interval{1000};
  /// --state-file: persisted port state (hostPath-backed JSON).
  std::string state_file = "/var/run/nic_health_monitor/state.json";
  /// --boot-id-path: the kernel boot ID, to detect host reboots.
  std::string boot_id_path = "/nvsentinel/proc/sys/kernel/random/boot_id";
  /// --metadata-path: gpu_metadata.json of the metadata collector (§12.2).
  std::string metadata_path = "/var/lib/nvsentinel/gpu_metadata.json";
  /// --checks: the enabled checks, default all four.
  std::set<nic_check> checks = {
    nic_check::infiniband_state, nic_check::infiniband_degradation,
    nic_check::ethernet_state, nic_check::ethernet_degradation};
  /// Names given to --checks that are not checks: to be logged and skipped.
  std::vector<std::string> unknown_checks;
  /// --node-name, else $NODE_NAME; startup fails when both are unset.
  std::string node_name;
  /// --nic-exclusion-regex: comma-separated patterns; matching device or
  /// interface names are dropped before classification.
  std::string nic_exclusion_regex = "^veth.*,^docker.*,^br-.*,^lo$";
  /// --nic-inclusion-regex-override: when non-empty, only devices matching
  /// it are monitored and the NUMA gate, topology classification and the
  /// exclusion regex are skipped (an operator's emergency override).
  std::string nic_inclusion_regex_override;
  /// --sysfs-root: the host's /sys as mounted in the container.
  std::string sysfs_root = "/nvsentinel/sys";
  /// --proc-net-route: the host's routing table (§4.2 default-route step).
  std::string proc_net_route = "/nvsentinel/proc/net/route";
  /// --processing-strategy: EXECUTE_REMEDIATION or STORE_ONLY.
  processing_strategy strategy = processing_strategy::execute_remediation;
  /// --counter-threshold NAME=N: how far (a count of errors) each Appendix A
  /// counter may rise above its baseline before the rise is fatal. Default 0
  /// for every counter: the seed's "> 0", measured since vigil's baseline.
  std::map<std::string, std::uint64_t> counter_thresholds = default_counter_thresholds();
};

/// The flags parse_nic_monitor_flags accepts, for --help texts.
std::vector<option_spec> nic_monitor_option_specs();

/// Those of them that tune the monitor itself (poll interval, checks, name
/// patterns, processing strategy): the same in every command that runs it.
/// The paths and the node name each command documents with its own defaults.
std::vector<option_spec> nic_monitor_tuning_specs();

/// Parses the flags (without program and subcommand names); --node-name
/// falls back to `node_name_env`. Failures name the flag ("--checks").
expected<nic_monitor_options>
parse_nic_monitor_flags(const std::vector<std::string>& args,
                        const std::optional<std::string>& node_name_env);

/// The same, with $NODE_NAME as the fallback.
expected<nic_monitor_options>
parse_nic_monitor_flags(const std::vector<std::string>& args);

/// Applies those of the flags that `args` holds over `options` (a command
/// that embeds the monitor: `vigil agent`, `vigil nic scan`); failures name
/// the flag. Names in `skip` are left to the caller (its own meaning).
status apply_nic_monitor_flags(const command_line& args, nic_monitor_options& options,
                               const std::set<std::string>& skip = {});

/// --metadata-path (seed 002 §12.1's name) or --metadata (vigil's): the
/// gpu_metadata.json to read, `fallback` when neither is given. Both, naming
/// different files, is an error naming the two flags.
expected<std::string> metadata_path_flag(const command_line& args,
                                         const std::string& fallback);

/// "1s", "500ms", "1m30s", "2h": a positive Go duration, whole milliseconds.
expected<std::chrono::milliseconds> parse_go_duration(std::string_view text);

/// Compiles comma-separated ECMAScript patterns; empty items are skipped.
/// The failure names `flag` and the pattern.
expected<std::vector<std::regex>> compile_name_patterns(std::string_view flag,
                                                        std::string_view csv);

} // namespace vigil::agent
