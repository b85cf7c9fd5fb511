// The xid_monitor actor: reads the kernel log (kmsg, journald or a syslog
// file), parses XID/SXid lines, groups bursts and forwards the events; the
// read position is saved once the lines' events are with the forwarder.
// Reading blocks (briefly), so spawn it detached.
#pragma once

#include <memory>

#include <caf/actor.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/agent/agent_figures.hpp"
#include "actors/agent/logsource/kernel_log_source.hpp"
#include "actors/agent/logsource/log_position_store.hpp"
#include "actors/agent/xid/burst_grouper.hpp"
#include "actors/agent/xid/nic_driver_check.hpp"
#include "actors/agent/xid/parse_kernel_log.hpp"
#include "actors/agent/xid/xid_cancellation.hpp"
#include "actors/agent/xid/xid_events.hpp"
#include "actors/agent/xid/xid_parser.hpp"
#include "actors/protocol/agent_messages.hpp"
#include "runtime/clock.hpp"

namespace vigil {

struct xid_monitor_config {
  std::string node_name;
  std::chrono::milliseconds poll_interval{200};
  std::size_t max_lines_per_poll = 10000;
};

/// What the monitor owns; built (and its inputs validated) before spawning.
struct xid_monitor_parts {
  std::unique_ptr<agent::kernel_log_source> source;
  std::unique_ptr<agent::log_position_store> positions;
  std::unique_ptr<agent::xid_catalog> catalog;
  std::optional<agent::gpu_metadata> metadata;
  /// mlx5_core's fault lines (config/nic_driver_patterns.csv); null: none.
  std::shared_ptr<const agent::nic_driver_check> nic_check;
  /// config/xid_cancellations.csv; none: nothing is cancelled.
  std::shared_ptr<const agent::xid_cancellations> cancellations;
  std::string sysfs_root = "/sys";
};

struct xid_monitor_state {
  xid_monitor_config config;
  xid_monitor_parts parts;
  std::unique_ptr<agent::xid_event_builder> builder;
  agent::kernel_log_parser parser;
  agent::burst_grouper grouper{std::chrono::minutes(3)};
  agent::malformed_lines malformed;
  std::vector<agent::closed_burst> closed;
  caf::actor forwarder;
  agent::monitor_figures figures; ///< polls, lines, events (malformed: `malformed`)
  static inline const char* name = "xid_monitor";
};

using xid_monitor_actor = caf::stateful_actor<xid_monitor_state>;

/// Answers (figures_atom) with agent::monitor_figures.
caf::behavior xid_monitor(xid_monitor_actor* self, xid_monitor_config config,
                          std::shared_ptr<xid_monitor_parts> parts, caf::actor forwarder,
                          std::shared_ptr<const clock> wall);

/// The healthy baselines after a host reboot: one per check, with no
/// entities, which clears every entity of that check on the control plane.
std::vector<health_event> xid_reboot_baselines(const std::string& node,
                                               const std::string& boot_id, wall_time now);

} // namespace vigil
