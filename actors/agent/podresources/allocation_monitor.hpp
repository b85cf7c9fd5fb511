// The allocation_monitor actor: asks the kubelet's PodResources API which pod
// holds which GPU every poll interval and reports it to the control plane
// (POST /v1/allocations) when it changed, every refresh interval (so a
// restarted control plane has it within a minute), and at once when the
// forwarder sees a GPU fault (report_now_atom): the drain of seed 000 §3.1
// needs the holders of the failing GPU. An unavailable kubelet is reported
// too (available: false, with the reason), so the control plane can say why a
// partial drain became full. gRPC and HTTP block, so spawn it detached.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <caf/stateful_actor.hpp>

#include "actors/agent/agent_figures.hpp"
#include "actors/agent/forwarder/http_event_poster.hpp"
#include "actors/agent/podresources/gpu_allocation_reader.hpp"
#include "actors/agent/podresources/pod_resources_client.hpp"
#include "actors/protocol/agent_messages.hpp"
#include "runtime/clock.hpp"

namespace vigil {

struct allocation_monitor_config {
  std::string node;
  agent::gpu_resource_names resources;
  std::chrono::milliseconds poll_interval{10'000};
  std::chrono::milliseconds refresh_interval{60'000};
};

struct allocation_monitor_state {
  allocation_monitor_config config;
  std::shared_ptr<agent::pod_resources_client> kubelet;
  agent::gpu_metadata metadata; ///< device index → GPU UUID
  std::shared_ptr<agent::http_event_poster> poster;
  std::shared_ptr<const clock> wall;
  std::string last_sent; ///< the last accepted report without its observedAt
  std::optional<wall_time> last_sent_at;
  std::string last_problem;       ///< the kubelet's, as last logged
  std::string last_unresolved;    ///< unresolved device ids, as last logged
  agent::monitor_figures figures; ///< polls; events = reports accepted
  static inline const char* name = "allocation_monitor";
};

using allocation_monitor_actor = caf::stateful_actor<allocation_monitor_state>;

/// Polls at once, then every `config.poll_interval`. Answers (figures_atom)
/// with agent::monitor_figures; (report_now_atom) polls and reports now.
caf::behavior allocation_monitor(allocation_monitor_actor* self,
                                 allocation_monitor_config config,
                                 std::shared_ptr<agent::pod_resources_client> kubelet,
                                 agent::gpu_metadata metadata,
                                 std::shared_ptr<agent::http_event_poster> poster,
                                 std::shared_ptr<const clock> wall);

} // namespace vigil
