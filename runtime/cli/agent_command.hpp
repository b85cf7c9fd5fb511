// `vigil agent`: the node agent (DaemonSet) — xid_monitor and nic_monitor
// feeding the forwarder, which posts to the control plane or spools to disk.
#pragma once

#include "runtime/cli/cli.hpp"

namespace vigil {

/// The options `vigil agent` accepts, for the command table.
std::vector<option_spec> agent_option_specs();

int run_agent(command_context& ctx);

} // namespace vigil
