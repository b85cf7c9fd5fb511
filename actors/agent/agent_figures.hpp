// What the agent's components report for its /metrics and /healthz: each
// answers (figures_atom) with its own figures, and the endpoints actor gathers
// them. Local messages only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>

#include "actors/agent/forwarder/forwarder_logic.hpp"
#include "actors/agent/forwarder/heartbeat.hpp"
#include "messages/wall_time.hpp"

namespace vigil {

/// (figures_atom) → agent::forwarder_figures from the forwarder,
/// agent::monitor_figures from the xid and nic monitors.
using figures_atom = caf::atom_constant<caf::atom("figures")>;

namespace agent {

/// A monitor's counters since the agent started.
struct monitor_figures {
  std::uint64_t polls = 0;
  std::optional<wall_time> last_poll; ///< when the last poll ended
  std::uint64_t events = 0;           ///< HealthEvents handed to the forwarder
  std::uint64_t lines = 0;            ///< kernel-log lines read (xid_monitor)
  std::uint64_t malformed = 0;        ///< NVIDIA lines that did not parse (xid_monitor)
};

/// The forwarder's counters since the agent started, and its queues now.
struct forwarder_figures {
  forwarder_stats events;
  std::uint64_t spooled = 0;    ///< events written to the disk spool
  std::size_t spool_depth = 0;  ///< events on disk now
  std::size_t spool_bytes = 0;  ///< their bytes, with record headers
  std::size_t memory_depth = 0; ///< events queued in memory now
  bool spooling = false;        ///< new events go to the spool (control plane away)
  std::optional<wall_time> last_accepted; ///< the last batch the control plane took
  heartbeat_stats heartbeats;
};

} // namespace agent
} // namespace vigil

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(vigil::agent::monitor_figures)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(vigil::agent::forwarder_figures)
