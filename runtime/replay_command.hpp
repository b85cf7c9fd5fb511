// `vigil replay`: print a journal's timeline, filtered by time and node.
#pragma once

#include "runtime/cli.hpp"

namespace vigil {

int run_replay(command_context& ctx);

} // namespace vigil
