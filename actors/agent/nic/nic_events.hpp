// HealthEvents of the NIC monitor: fields, messages and entities of seed 002
// §11.2 and §13, and a stable id for each.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "actors/agent/nic/nic_health.hpp"
#include "actors/agent/nic/nic_monitor_options.hpp"
#include "actors/agent/nic/nic_roles.hpp"
#include "messages/health_event.hpp"
#include "messages/wall_time.hpp"

namespace vigil::agent {

/// The agent name on every event (seed 002 §13.1).
inline constexpr const char* nic_agent_name = "nic-health-monitor";

/// What every event of one poll shares.
struct nic_event_context {
  std::string node_name;
  processing_strategy strategy = processing_strategy::execute_remediation;
  std::string boot_id;
  wall_time now;
};

/// A port's state crossing (seed 002 §3.4 step 5, §13.1); `details` become
/// metadata (pci_address, role, hca_type, …).
health_event make_port_state_event(const nic_event_context& ctx,
                                   const std::string& device, unsigned port,
                                   const std::string& link_layer,
                                   const port_verdict& verdict,
                                   const std::string& operstate,
                                   std::map<std::string, std::string> details);

/// An Appendix A counter finding, on the degradation check of the link layer;
/// errorCode carries the counter name, metadata its previous, current and
/// baseline readings and its threshold.
health_event make_counter_event(const nic_event_context& ctx, const std::string& device,
                                unsigned port, const std::string& link_layer,
                                const counter_finding& finding);

/// seed 002 §7, §13.1: "NIC mlx5_0 disappeared from /sys/class/infiniband/ -
/// hardware failure", fatal, REPLACE_VM, entity NIC only.
health_event make_disappeared_event(const nic_event_context& ctx,
                                    const std::string& device,
                                    const std::string& link_layer);

/// The healthy counterpart when a disappeared device is back.
health_event make_reappeared_event(const nic_event_context& ctx,
                                   const std::string& device,
                                   const std::string& link_layer);

/// seed 002 §4.3.3 and §7.2: "Card 0000:47:00 (Compute) has 1 active ports,
/// expected 2 (peer mode)" (fatal), or its recovery; entities are the card's NICs.
health_event make_card_event(const nic_event_context& ctx, const card_verdict& verdict,
                             const std::vector<std::string>& devices,
                             const std::string& link_layer);

/// A stable id: FNV-1a of node, check, entities, health, message, boot ID and
/// poll time, so a re-sent event keeps its id and a new crossing gets a new one.
std::string nic_event_id(const health_event& event, const std::string& boot_id);

} // namespace vigil::agent
