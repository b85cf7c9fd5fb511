// `vigil janitor`: the GPUReset and RebootNode controllers (seed 001) alone,
// with their metrics on janitor.listen.
#pragma once

#include <vector>

#include "runtime/cli/cli.hpp"

namespace vigil {

std::vector<option_spec> janitor_option_specs();

/// One replica; set janitor.in_process: false for the control plane then.
int run_janitor(command_context& ctx);

} // namespace vigil
