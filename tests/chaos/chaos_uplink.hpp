// The simulated fleet's agents' way to the control plane in the chaos run:
// the simulator hands its batches of HealthEvents here as it would to the
// ingest actor, and this actor POSTs them to /v1/events of whichever replica
// answers (a Service in front of two pods), again and again until every
// event has a verdict, as the agent's forwarder does. What the control
// plane acknowledged (accepted or duplicate) is recorded for the check that
// nothing acknowledged was lost.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <caf/fwd.hpp>

namespace vigil::chaos {

struct uplink_record {
  std::mutex mutex;
  std::set<std::string> acknowledged; ///< event ids the control plane stored
  std::atomic<std::uint64_t> posts{0};
  std::atomic<std::uint64_t> failed_posts{0}; ///< no answer, or not a verdict
  std::atomic<std::uint64_t> rejected{0};     ///< events refused line by line
  std::atomic<std::uint64_t> waiting{0};      ///< events without a verdict yet
};

/// Spawns the uplink (detached: it blocks on HTTP). `ports` are the
/// replicas' ingest ports on 127.0.0.1; `token` the ingest token.
caf::actor spawn_uplink(caf::actor_system& system, std::vector<std::uint16_t> ports,
                        std::string token, std::shared_ptr<uplink_record> record);

} // namespace vigil::chaos
