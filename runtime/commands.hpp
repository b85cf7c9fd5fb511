// The subcommands of `vigil` and what each runs; runtime/cli.cpp dispatches.
#pragma once

#include <vector>

#include "runtime/cli.hpp"

namespace vigil {

std::vector<subcommand> command_table();

} // namespace vigil
