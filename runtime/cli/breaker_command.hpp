// `vigil breaker reset`: the operator's explicit reset of the circuit breaker,
// a POST to the running control plane's /v1/breaker/reset.
#pragma once

#include <vector>

#include "runtime/cli/cli.hpp"

namespace vigil {

std::vector<option_spec> breaker_option_specs();

/// `reset` only. 0 when the control plane journaled the reset; 1 when it
/// answered otherwise or could not be reached (the message says which); 2 on
/// bad usage.
int run_breaker_reset(command_context& ctx);

} // namespace vigil
