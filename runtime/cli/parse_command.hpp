// `vigil parse kmsg|topo|dcgm`: the agent's parsers on a file, with a stable
// output contract: one HealthEvent JSON per line (kmsg, dcgm) or
// gpu_metadata.json (topo) on stdout, problems on stderr.
#pragma once

#include <iosfwd>
#include <vector>

#include "runtime/cli/cli.hpp"

namespace vigil {

std::vector<option_spec> parse_option_specs();

/// Dispatches on the sub-verb: kmsg reads `in`, topo its --topo file.
int run_parse(command_context& ctx, std::istream& in);

/// `vigil parse kmsg [--metadata FILE] [--node NAME] [--boot-id ID]
/// [--boot-time TIME] < log`:
/// HealthEvents after burst grouping; a summary of counters on stderr.
int run_parse_kmsg(command_context& ctx, std::istream& in);

/// `vigil parse dcgm [--node NAME] [--time TIME] [--interval D] < metrics.txt`:
/// the DCGM check over dcgm-exporter pages (several pages concatenated are
/// successive scrapes, --interval apart: counters need two), thresholds from
/// --config's `dcgm:` section; HealthEvents on stdout, a summary on stderr.
int run_parse_dcgm(command_context& ctx, std::istream& in);

/// `vigil parse topo --topo FILE [--gpus FILE] [--node NAME]`: gpu_metadata.json.
int run_parse_topo(command_context& ctx);

} // namespace vigil
