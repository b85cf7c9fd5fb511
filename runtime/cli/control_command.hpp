// `vigil control`: the control plane (Deployment) — ingest, journal, fleet of
// node actors, breaker and the Kubernetes gateway, behind one HTTP(S) port.
#pragma once

#include <vector>

#include "runtime/cli/cli.hpp"

namespace vigil {

std::vector<option_spec> control_option_specs();

int run_control(command_context& ctx);

} // namespace vigil
