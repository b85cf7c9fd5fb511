// Turns parsed kernel log records into HealthEvents: catalog lookup, the
// bucket → action table and the WORKFLOW_* rules, PCI → GPU UUID (seed 000 §1).
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "actors/agent/topology/gpu_metadata.hpp"
#include "actors/agent/xid/xid_catalog.hpp"
#include "actors/agent/xid/xid_parser.hpp"
#include "messages/health_event.hpp"
#include "messages/wall_time.hpp"

namespace vigil::agent {

/// The names NVSentinel's syslog-health-monitor uses, so its consumers match ours.
inline constexpr std::string_view syslog_agent_name = "syslog-health-monitor";
inline constexpr std::string_view xid_check_name = "SysLogsXIDError";
inline constexpr std::string_view sxid_check_name = "SysLogsSXIDError";
inline constexpr std::string_view fallen_off_check_name = "SysLogsGPUFallenOff";

struct xid_event_options {
  std::string node_name;
  /// Mixed into event ids so one log's ids differ from another boot's; may be empty.
  std::string boot_id;
  processing_strategy strategy = processing_strategy::execute_remediation;
  /// WORKFLOW_XID_48: an XID 63 or 64 on the same GPU this long before the 48
  /// makes it "not solo" (drain and reset). Default 3 minutes.
  std::chrono::nanoseconds companion_window = std::chrono::minutes(3);
};

/// Stateful: remembers PCI ↔ UUID and, per GPU, when XID 63/64 were last seen.
/// The catalog must outlive the builder.
class xid_event_builder {
public:
  xid_event_builder(const xid_catalog& catalog, xid_event_options options);

  /// Seeds PCI ↔ UUID from gpu_metadata.json (seed 002 §12.2), and keeps
  /// its NVLinks to attribute SXids to the GPUs behind the switch port.
  void learn_gpus(const gpu_metadata& metadata);
  /// Records one PCI ↔ UUID pair; `pci` in any form normalise_pci_address reads.
  void learn_gpu(std::string_view pci, std::string uuid);
  /// "" when unknown.
  std::string uuid_for_pci(std::string_view pci) const;
  /// pci_entity_value form, "" when unknown.
  std::string pci_for_uuid(std::string_view uuid) const;

  /// The event for one parsed line at time `at` (the line's own time where it
  /// has one), or nullopt for lines that make none: non-NVIDIA, malformed,
  /// "GPU at PCI" (learned here), SXid "Data {…}" payloads. `raw_line` goes
  /// into metadata["line"] (the fallen-off message uses its joined text).
  std::optional<health_event> build(const parsed_line& line, std::string_view raw_line,
                                    wall_time at);

private:
  health_event base_event(std::string_view check, std::string_view component,
                          wall_time at) const;
  health_event xid_event(const xid_record& xid, const parsed_line& line,
                         std::string_view raw_line, wall_time at);
  health_event sxid_event(const sxid_record& sxid, const parsed_line& line,
                          std::string_view raw_line, wall_time at) const;
  health_event reset_event(const reset_occurred_record& reset, const parsed_line& line,
                           std::string_view raw_line, wall_time at);
  void add_gpu_entities(health_event& event, const std::string& pci) const;
  void apply_rules(const xid_record& xid, const xid_catalog_entry* entry,
                   const std::string& gpu_key, wall_time at, health_event& event);

  const xid_catalog& catalog_;
  xid_event_options options_;
  gpu_metadata metadata_; ///< the last learn_gpus: NVLinks for SXid attribution
  std::map<std::string, std::string> uuid_by_pci_;
  std::map<std::string, std::string> pci_by_uuid_;
  /// GPU (UUID, else PCI) → when it last logged XID 63 or 64.
  std::map<std::string, wall_time> last_remap_event_;
};

/// The part of an event id that tells a line's moment: its kernel timestamp
/// ("k123456"), else its syslog timestamp, else `at`.
std::string timestamp_key(const kernel_log_line& line, wall_time at);

/// A stable id: 32 hex digits hashing node, boot, the line's identity (its
/// message text) and its timestamp, so re-parsing one log gives the same ids.
std::string make_event_id(std::string_view node, std::string_view boot_id,
                          std::string_view identity, std::string_view timestamp);

} // namespace vigil::agent
