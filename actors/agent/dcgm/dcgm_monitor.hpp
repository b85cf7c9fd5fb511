// The dcgm_monitor actor: reads the node's dcgm-exporter page every interval
// and hands dcgm_health's events to the forwarder. The read blocks, so spawn
// it detached.
#pragma once

#include <chrono>
#include <memory>

#include <caf/actor.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/agent/agent_figures.hpp"
#include "actors/agent/dcgm/dcgm_exporter_client.hpp"
#include "actors/agent/dcgm/dcgm_health.hpp"
#include "actors/agent/xid/xid_catalog.hpp"
#include "runtime/clock.hpp"

namespace vigil {

struct dcgm_monitor_config {
  std::string node;
  agent::dcgm_thresholds thresholds;
  std::chrono::milliseconds interval{30000}; ///< seed 004 scrapes every 30 s
};

struct dcgm_monitor_state {
  std::shared_ptr<agent::metrics_page_source> source;
  std::shared_ptr<const agent::xid_catalog> catalog;
  std::optional<agent::dcgm_health> health;
  caf::actor forwarder;
  agent::monitor_figures figures; ///< scrapes, events handed to the forwarder
  /// agent::describe of the checks the last page gave no data, as last logged.
  std::string blind_checks;
  static inline const char* name = "dcgm_monitor";
};

using dcgm_monitor_actor = caf::stateful_actor<dcgm_monitor_state>;

/// `catalog` may be null (XIDs are then reported with CONTACT_SUPPORT). Answers
/// (figures_atom) with agent::monitor_figures: polls are scrapes, `malformed`
/// the page lines skipped.
caf::behavior dcgm_monitor(dcgm_monitor_actor* self, dcgm_monitor_config config,
                           std::shared_ptr<agent::metrics_page_source> source,
                           std::shared_ptr<const agent::xid_catalog> catalog,
                           caf::actor forwarder, std::shared_ptr<const clock> wall);

} // namespace vigil
