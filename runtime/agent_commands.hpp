// The agent's debugging subcommands with a stable output contract: one
// HealthEvent JSON per line on stdout, problems on stderr.
#pragma once

#include <iosfwd>

#include "runtime/cli.hpp"

namespace vigil {

/// `vigil nic scan --sysfs-root DIR --metadata FILE --state-file FILE
/// --boot-id-path FILE [--proc-net-route FILE] [--node-name NAME] [--once]`,
/// and the NIC monitor's tuning flags of seed 002 §12.1.
int run_nic_scan(command_context& ctx);
std::vector<option_spec> nic_scan_option_specs();

/// `vigil parse kmsg [--metadata FILE] [--node NAME] [--boot-id ID]
/// [--boot-time TIME] < log`:
/// HealthEvents after burst grouping; a summary of counters on stderr.
int run_parse_kmsg(command_context& ctx, std::istream& in);

/// `vigil parse topo --topo FILE [--gpus FILE] [--node NAME]`: gpu_metadata.json.
int run_parse_topo(command_context& ctx);

} // namespace vigil
