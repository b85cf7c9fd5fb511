// `vigil nic scan`: the NIC link-state monitor (seed 002) over a sysfs tree,
// one HealthEvent JSON per line per poll on stdout, problems on stderr.
#pragma once

#include <vector>

#include "runtime/cli/cli.hpp"

namespace vigil {

/// `vigil nic scan --sysfs-root DIR --metadata FILE --state-file FILE
/// --boot-id-path FILE [--proc-net-route FILE] [--node-name NAME] [--once]`,
/// and the NIC monitor's tuning flags of seed 002 §12.1.
std::vector<option_spec> nic_scan_option_specs();

/// Dispatches on the sub-verb (only `scan`).
int run_nic(command_context& ctx);

int run_nic_scan(command_context& ctx);

} // namespace vigil
