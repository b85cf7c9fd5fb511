// The root supervisor: owns the long-lived components of one process and
// shuts them down in order. On an exit request it asks its children to stop
// one at a time, newest first (the next once the previous is down), lets
// in-flight work finish for the grace period, then cancels what is left
// explicitly with exit_reason::kill and says which.
#pragma once

#include <string>
#include <vector>

#include <caf/actor_addr.hpp>
#include <caf/error.hpp>
#include <caf/fwd.hpp>
#include <caf/stateful_actor.hpp>

#include "runtime/config.hpp"

namespace vigil {

struct supervised_child {
  std::string name;
  caf::actor_addr address;
  caf::strong_actor_ptr handle;
};

struct supervisor_state {
  std::vector<supervised_child> children; ///< in start order
  bool stopping = false;
  caf::error stop_reason;
  std::vector<std::string> cancelled; ///< children killed when the grace ran out
  static inline const char* name = "supervisor";
};

using supervisor_actor = caf::stateful_actor<supervisor_state>;

/// `grace`: how long children may take to stop before they are cancelled.
caf::behavior supervisor(supervisor_actor* self, caf::timespan grace);

} // namespace vigil
