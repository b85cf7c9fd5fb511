// `vigil parse kmsg`: runs the whole GPU log path (parser, catalog rules, burst
// grouping) over a saved kernel log and returns the events and counters.
#pragma once

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actors/agent/topology/gpu_metadata.hpp"
#include "actors/agent/xid/nic_driver_check.hpp"
#include "actors/agent/xid/xid_cancellation.hpp"
#include "actors/agent/xid/xid_catalog.hpp"
#include "messages/health_event.hpp"
#include "messages/wall_time.hpp"

namespace vigil::agent {

/// Counts malformed NVIDIA lines per kind and keeps the first line of each,
/// so callers log a kind once.
class malformed_lines {
public:
  /// Counts one; true when this is the first of its kind (log it).
  bool add(std::string_view kind, std::string_view line);

  const std::map<std::string, std::uint64_t, std::less<>>& counts() const {
    return counts_;
  }
  /// kind → the first line of that kind.
  const std::map<std::string, std::string, std::less<>>& first_lines() const {
    return first_;
  }
  std::uint64_t total() const;

private:
  std::map<std::string, std::uint64_t, std::less<>> counts_;
  std::map<std::string, std::string, std::less<>> first_;
};

struct parse_options {
  xid_catalog catalog; ///< from xid_catalog::load(config dir)
  std::string node_name;
  std::string boot_id;
  /// Seeds PCI → GPU UUID; "GPU at PCI" lines in the log add to it.
  std::optional<gpu_metadata> metadata;
  /// Kernel timestamps ([  123.456]) are offsets from this instant.
  wall_time boot_time{};
  /// RFC 3164 timestamps carry no year; this one is assumed.
  int syslog_year = 1970;
  std::chrono::nanoseconds burst_window = std::chrono::minutes(3);
  processing_strategy strategy = processing_strategy::execute_remediation;
  /// mlx5_core's fault lines (config/nic_driver_patterns.csv); none: not checked.
  std::shared_ptr<const nic_driver_check> nic_check;
  std::string sysfs_root = "/sys"; ///< where the NIC of a PCI address is looked up
  /// config/xid_cancellations.csv; none: nothing is cancelled.
  std::shared_ptr<const xid_cancellations> cancellations;
};

struct parse_counters {
  std::uint64_t lines = 0;
  std::uint64_t nvidia_lines = 0;
  std::uint64_t nic_driver_lines = 0; ///< matched a NIC driver pattern
  std::uint64_t events_before_grouping = 0;
  malformed_lines malformed;
};

struct parse_result {
  /// In order of first appearance; each burst once, with its final
  /// burstCount, burstFirstSeen and burstLastSeen.
  std::vector<health_event> events;
  parse_counters counters;
};

/// Reads `in` line by line. Each line's time is its kernel timestamp
/// (boot_time + offset), else its syslog timestamp, else the previous line's.
parse_result parse_kernel_log(std::istream& in, const parse_options& options);

} // namespace vigil::agent
