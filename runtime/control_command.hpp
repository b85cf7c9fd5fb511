// `vigil control`: the control plane (Deployment) — ingest, journal, fleet of
// node actors, breaker and the Kubernetes gateway, behind one HTTP(S) port.
#pragma once

#include "actors/control/drain/drain_actor.hpp"
#include "actors/control/node/node_actor.hpp"
#include "actors/control/rules/circuit_breaker.hpp"
#include "actors/control/rules/correlation_rules.hpp"
#include "actors/control/rules/quarantine_rules.hpp"
#include "actors/janitor/janitor_actor.hpp"
#include "runtime/cli.hpp"
#include "runtime/config.hpp"

namespace vigil {

std::vector<option_spec> control_option_specs();

int run_control(command_context& ctx);

std::vector<option_spec> janitor_option_specs();

/// `vigil janitor`: the GPUReset and RebootNode controllers alone (one replica;
/// set janitor.in_process: false for the control plane then).
int run_janitor(command_context& ctx);

/// Configuration (already validated) to the rules' own types.
control::quarantine_policy quarantine_policy_from(const quarantine_config& config);
control::breaker_config breaker_config_from(const breaker_settings& settings);
control::correlation_config correlation_config_from(const correlation_section& section);
/// The drain section as the drain actors read it; `dry_run` is the global one.
drain_settings drain_settings_from(const drain_section& section, bool dry_run);
remediation_settings remediation_settings_from(const remediation_section& section);
janitor_settings janitor_settings_from(const janitor_section& section);

} // namespace vigil
