#include "runtime/cli/cli.hpp"

#include <algorithm>
#include <iostream>
#include <ostream>

#include "runtime/cli/agent_command.hpp"
#include "runtime/cli/breaker_command.hpp"
#include "runtime/cli/control_command.hpp"
#include "runtime/cli/demo_command.hpp"
#include "runtime/cli/install_command.hpp"
#include "runtime/cli/janitor_command.hpp"
#include "runtime/cli/nic_command.hpp"
#include "runtime/cli/parse_command.hpp"
#include "runtime/cli/replay_command.hpp"
#include "runtime/logging.hpp"
#include "runtime/version.hpp"

namespace vigil {

namespace {

// Every subcommand, in the order `vigil --help` lists them; each lives in its
// own file of runtime/cli/.
std::vector<subcommand> command_table() {
  return {
    {"agent", "node agent: XID/SXid and NIC monitors, topology, forwarder (DaemonSet)",
     "[options]", agent_option_specs(), run_agent},
    {"control", "control plane: ingest, journal, node actors, quarantine, breaker",
     "[options]", control_option_specs(), run_control},
    {"breaker", "reset the control plane's circuit breaker after a trip",
     "reset [options]", breaker_option_specs(), run_breaker_reset},
    {"janitor", "GPUReset and RebootNode controllers on their own", "[options]",
     janitor_option_specs(), run_janitor},
    {"install", "print every manifest a cluster needs (kubectl apply -f -)", "[options]",
     install_option_specs(), run_install},
    {"demo", "a simulated GPU cluster healed end to end (virtual time)", "[options]",
     demo::demo_option_specs(), demo::run_demo},
    {"replay", "print a journal's timeline; rebuild state at a moment", "[options]",
     replay_option_specs(), run_replay},
    {"parse", "run the kernel-log, DCGM or topology parser on a file, print its events",
     "kmsg|dcgm|topo [options] [< input]", parse_option_specs(),
     [](command_context& ctx) { return run_parse(ctx, std::cin); }},
    {"nic", "run the NIC link-state monitor over a sysfs tree, print its events",
     "scan [options]", nic_scan_option_specs(), run_nic},
    {"version",
     "print the version",
     "",
     {},
     [](command_context& ctx) {
       ctx.out << "vigil " << version_string() << "\n";
       return 0;
     }},
  };
}

const std::vector<option_spec>& global_options() {
  static const std::vector<option_spec> options{
    {"config", "FILE",
     "YAML configuration (see config/vigil.yaml); defaults when absent"},
    {"log-format", "json|text", "log lines as JSON (default) or text for people"},
    {"log-level", "LEVEL", "trace, debug, info, warn, error, critical, off"},
    {"help", "", "print this help"},
  };
  return options;
}

void print_overview(std::ostream& out) {
  out << "vigil " << version_string()
      << " - GPU and NIC fault detection and self-healing for Kubernetes\n\n"
         "Usage: vigil <command> [options]\n\nCommands:\n";
  for (const auto& cmd : subcommands()) {
    std::string name = "  " + cmd.name;
    name.resize(12, ' ');
    out << name << cmd.summary << "\n";
  }
  out << "\nRun 'vigil <command> --help' for a command's options.\n";
}

void print_help(const subcommand& cmd, std::ostream& out) {
  out << "Usage: vigil " << cmd.name << " " << cmd.usage << "\n\n"
      << cmd.summary << "\n\n";
  auto all = cmd.options;
  all.insert(all.end(), global_options().begin(), global_options().end());
  out << format_options(all);
}

// The config file first, then command-line overrides.
expected<vigil_config> effective_config(const command_line& args) {
  vigil_config config;
  if (auto path = args.value("config")) {
    auto loaded = load_config_file(*path);
    if (!loaded)
      return loaded.error();
    config = *loaded;
  }
  if (auto format = args.value("log-format")) {
    if (*format != "json" && *format != "text")
      return failure{"--log-format", "'" + *format + "' is not json or text"};
    config.log.format = *format == "text" ? log_format::text : log_format::json;
  }
  if (auto level = args.value("log-level")) {
    static const char* levels[] = {"trace", "debug",    "info", "warn",
                                   "error", "critical", "off"};
    if (std::find(std::begin(levels), std::end(levels), *level) == std::end(levels))
      return failure{"--log-level", "'" + *level + "' is not a log level"};
    config.log.level = *level;
  }
  return config;
}

} // namespace

const std::vector<subcommand>& subcommands() {
  static const std::vector<subcommand> table = command_table();
  return table;
}

int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty()) {
    print_overview(err);
    return 2;
  }
  const auto& first = args.front();
  if (first == "--help" || first == "-h" || first == "help") {
    print_overview(out);
    return 0;
  }
  if (first == "--version") {
    out << "vigil " << version_string() << "\n";
    return 0;
  }
  auto cmd = std::find_if(subcommands().begin(), subcommands().end(),
                          [&](const subcommand& c) { return c.name == first; });
  if (cmd == subcommands().end()) {
    err << "vigil: unknown command '" << first << "' (see 'vigil --help')\n";
    return 2;
  }
  auto specs = cmd->options;
  specs.insert(specs.end(), global_options().begin(), global_options().end());
  auto parsed = parse_command_line(specs, {args.begin() + 1, args.end()});
  if (!parsed) {
    err << "vigil " << cmd->name << ": " << parsed.error().to_string() << " (see 'vigil "
        << cmd->name << " --help')\n";
    return 2;
  }
  if (parsed->has("help")) {
    print_help(*cmd, out);
    return 0;
  }
  auto config = effective_config(*parsed);
  if (!config) {
    err << "vigil " << cmd->name << ": " << config.error().to_string() << "\n";
    return 2;
  }
  setup_logging(config->log);
  command_context ctx{*parsed, *config, out, err};
  return cmd->run(ctx);
}

} // namespace vigil
