// What the parts of remediation_machine share: the context of one input.
// remediation_machine.cpp holds the inputs, the queue and the timers,
// remediation_machine_cr.cpp creating and following the CR,
// remediation_machine_verification.cpp validation, verification and the
// escalation ladder. Internal to the machine.
#pragma once

#include "actors/control/remediation/remediation_machine.hpp"

namespace vigil::control {

/// One input's surroundings: what the node looks like, when, and the
/// commands collected so far.
struct remediation_machine::context {
  const remediation_view* view; ///< null for inputs that need none
  wall_time now;
  remediation_commands out;

  const remediation_view& node() const {
    static const remediation_view none;
    return view != nullptr ? *view : none;
  }
};

} // namespace vigil::control
