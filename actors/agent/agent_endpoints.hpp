// The agent's HTTP face on --metrics-port (seed 002 §12.1): GET /healthz (200
// while the forwarder and the monitors answer; 503 naming those that do not)
// and GET /metrics (Prometheus text of their figures). The handler runs on the
// HTTP server's I/O thread and only hands the request to the endpoints actor,
// which asks each component with a timeout, so a stuck one shows as such.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>

#include <caf/actor.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/agent/agent_figures.hpp"
#include "runtime/http/http_server.hpp"

namespace vigil {

/// The components /healthz speaks for; a null handle is one that is off
/// (the NIC monitor with --no-nic) and is neither asked nor required.
struct agent_components {
  caf::actor forwarder;
  caf::actor xid_monitor;
  caf::actor nic_monitor;
  caf::actor dcgm_monitor;
  caf::actor fabric_monitor;
};

/// What one round of asking gave.
struct agent_snapshot {
  std::optional<agent::forwarder_figures> forwarder;
  std::optional<agent::monitor_figures> xid_monitor;
  std::optional<agent::monitor_figures> nic_monitor;
  std::optional<agent::monitor_figures> dcgm_monitor;
  std::optional<agent::monitor_figures> fabric_monitor;
  /// Component name → why it gave no figures ("did not answer within 2s").
  std::map<std::string, std::string> silent;
};

struct health_verdict {
  int status = 200;
  std::string body;
};

/// 200 "ok" when no component is silent; else 503 "not running: NAME (why); …".
health_verdict judge_agent_health(const agent_snapshot& snapshot);

/// Prometheus text exposition (vigil_agent_*) of the figures in `snapshot`;
/// a silent component has vigil_agent_component_up 0 and no other samples.
std::string render_agent_metrics(const agent_snapshot& snapshot);

struct agent_endpoints_state {
  agent_components components;
  caf::timespan ask_timeout{};
  static inline const char* name = "agent_endpoints";
};

using agent_endpoints_actor = caf::stateful_actor<agent_endpoints_state>;

/// Answers the handler's requests; each component gets `ask_timeout` to
/// answer (figures_atom), all asked at once.
caf::behavior agent_endpoints(agent_endpoints_actor* self, agent_components components,
                              caf::timespan ask_timeout);

/// The request handler for http::server::start: /healthz, /metrics, else 404.
http::handler make_agent_handler(caf::actor endpoints);

} // namespace vigil
