// The NIC monitor's decision logic without an actor: startup checks, one poll
// turned into HealthEvents and new persisted state (seed 002 §3.4, §4, §7).
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "actors/agent/nic/nic_monitor_options.hpp"
#include "actors/agent/nic/nic_roles.hpp"
#include "actors/agent/nic/nic_state_file.hpp"
#include "actors/agent/nic/nic_sysfs.hpp"
#include "actors/agent/topology/gpu_metadata.hpp"
#include "messages/expected.hpp"
#include "messages/health_event.hpp"
#include "messages/wall_time.hpp"

namespace vigil::agent {

/// seed 002 §12.2 and §4.1.2: nic_topology present and non-empty, and (unless
/// the inclusion override skips the NUMA gate) at least one GPU with a known
/// NUMA node. The failure names `path` and the field.
status validate_nic_metadata(const gpu_metadata& metadata, const std::string& path,
                             bool inclusion_override);

/// Loads and validates the metadata file; a missing file fails naming it.
expected<gpu_metadata> load_nic_metadata(const std::string& path,
                                         bool inclusion_override);

/// seed 002 §4.2: the InfiniBand device carrying the default route, from the
/// routing table at `proc_net_route`; "" when the table is unreadable or the
/// interface has no InfiniBand backing (the step is then skipped silently).
std::string resolve_default_route_device(const std::string& sysfs_root,
                                         const std::string& proc_net_route);

/// What one poll produced.
struct nic_poll_result {
  std::vector<health_event> events;
  std::vector<nic_diagnostic> diagnostics;
  /// The role of every supported PF device classified in this poll.
  std::map<std::string, nic_classification> roles;
  /// True on the first poll of a boot or without usable persisted state.
  bool baseline = false;
};

/// seed 002 §3.4 step 4: whether the host rebooted between the persisted
/// boot ID and the current one. An empty ID (unreadable, or never read) is
/// no evidence of a reboot.
bool boot_changed(const std::string& persisted, const std::string& current);

/// Holds the configuration and the previous state; turns snapshots into events.
class nic_poller {
public:
  /// Validates `metadata` (seed 002 §4.1.2, §12.2; failures name
  /// options.metadata_path) and compiles the name patterns. `persisted` is
  /// what the state file held; nullopt means a fresh boot.
  static expected<nic_poller> start(const nic_monitor_options& options,
                                    const gpu_metadata& metadata,
                                    const std::string& default_route_device,
                                    std::optional<nic_monitor_state> persisted);

  /// One poll cycle (seed 002 §3.4): events only on health boundary
  /// crossings, baselines after a reboot or without state, disappearance
  /// (§7), card homogeneity (§4.3) and Appendix A counters.
  nic_poll_result poll(const nic_snapshot& snapshot, const std::string& boot_id,
                       wall_time now);

  /// The state to persist after each poll; empty before the first poll
  /// when there was nothing persisted.
  const std::optional<nic_monitor_state>& state() const { return state_; }

  const nic_monitor_options& options() const { return options_; }

private:
  struct monitored_device;
  struct port_eval;
  struct card_summary;
  class poll_run;

  nic_poller() = default;

  std::optional<nic_classification> select(const nic_device& device,
                                           nic_poll_result& result) const;

  nic_monitor_options options_;
  nic_classifier classifier_;
  std::vector<std::regex> exclusion_;
  std::vector<std::regex> inclusion_override_;
  std::optional<nic_monitor_state> state_;
};

/// seed 002 §9.1: a RoCE port's state event carries its GID table's
/// diagnostics as metadata: gid_count, gid_ipv4 (the IPv4 addresses of its
/// GIDs) and, when the table would break RoCE, gid_problems. The table is read
/// only for the events of this poll, never for every port.
void add_gid_diagnostics(std::vector<health_event>& events, const std::string& sysfs_root,
                         std::vector<nic_diagnostic>& diagnostics);

/// Events and notes of run_nic_poll_once.
struct nic_poll_once_result {
  std::vector<health_event> events;
  std::vector<nic_diagnostic> diagnostics;
  std::map<std::string, nic_classification> roles;
};

/// One whole cycle as `vigil nic scan` runs it: loads metadata (failing as
/// startup would), the routing table, the state file and the boot ID, reads
/// sysfs, polls, and writes the state file back. Problems that do not stop
/// the monitor (unreadable files, a corrupt state file) are diagnostics.
expected<nic_poll_once_result> run_nic_poll_once(const nic_monitor_options& options,
                                                 wall_time now);

} // namespace vigil::agent
