// `vigil replay`: print a journal's timeline, filtered by time and node;
// --at rebuilds the fleet at a moment, --what-if replays under another config.
#pragma once

#include "runtime/cli/cli.hpp"

namespace vigil {

std::vector<option_spec> replay_option_specs();

int run_replay(command_context& ctx);

} // namespace vigil
