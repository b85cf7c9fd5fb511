// `vigil demo`: the real control plane, agents' parsers and janitor healing a
// simulated cluster. Without --serve, a scenario plays on a virtual clock
// (runtime/sim/scenario_run); --serve runs the cluster in real time
// (demo_serve); --fleet runs the fleet fault simulation.
#pragma once

#include <vector>

#include "runtime/cli/cli.hpp"

namespace vigil::demo {

std::vector<option_spec> demo_option_specs();

int run_demo(command_context& ctx);

} // namespace vigil::demo
