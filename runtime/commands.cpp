#include "runtime/commands.hpp"

#include <iostream>

#include "runtime/agent_command.hpp"
#include "runtime/agent_commands.hpp"
#include "runtime/breaker_command.hpp"
#include "runtime/control_command.hpp"
#include "runtime/demo/demo_command.hpp"
#include "runtime/replay_command.hpp"
#include "runtime/version.hpp"

namespace vigil {

namespace {

// Sub-verbs such as `parse kmsg`: exactly one, from the allowed list.
bool check_verb(command_context& ctx, const char* command,
                std::initializer_list<const char*> verbs) {
  const auto& pos = ctx.args.positional;
  std::string list;
  for (const char* v : verbs)
    list += list.empty() ? v : std::string("|") + v;
  if (pos.empty()) {
    ctx.err << "vigil " << command << ": missing what to run (" << list << ")\n";
    return false;
  }
  for (const char* v : verbs)
    if (pos.front() == v)
      return true;
  ctx.err << "vigil " << command << ": unknown '" << pos.front() << "' (expected " << list
          << ")\n";
  return false;
}

int run_version(command_context& ctx) {
  ctx.out << "vigil " << version_string() << "\n";
  return 0;
}

int run_parse(command_context& ctx) {
  if (!check_verb(ctx, "parse", {"kmsg", "topo"}))
    return 2;
  if (ctx.args.positional.front() == "topo")
    return run_parse_topo(ctx);
  return run_parse_kmsg(ctx, std::cin);
}

int run_nic(command_context& ctx) {
  if (!check_verb(ctx, "nic", {"scan"}))
    return 2;
  return run_nic_scan(ctx);
}

} // namespace

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
    {"demo", "a simulated GPU cluster healed end to end (virtual time)", "[options]",
     demo::demo_option_specs(), demo::run_demo},
    {"replay",
     "print a journal's timeline; rebuild state at a moment",
     "[options]",
     {{"journal", "URL", "sqlite:PATH or postgresql://…"},
      {"since", "TIME", "RFC 3339; rows before it are skipped"},
      {"until", "TIME", "RFC 3339; rows after it are skipped"},
      {"node", "NAME", "only rows about this node"},
      {"at", "TIME",
       "RFC 3339: the fleet's state at that moment, and each node's timeline"},
      {"what-if", "FILE",
       "replay the events under the configuration in FILE; list the "
       "decisions that would differ"},
      {"json", "", "JSON output"}},
     run_replay},
    {"parse",
     "run the kernel-log or topology parser on a file, print its events",
     "kmsg|topo [options] [< input]",
     {{"metadata", "FILE", "gpu_metadata.json for PCI -> GPU UUID (kmsg)"},
      {"node", "NAME", "nodeName of the events and metadata"},
      {"boot-id", "ID", "boot ID mixed into event ids (kmsg)"},
      {"boot-time", "TIME",
       "RFC 3339 boot time for dmesg offsets (default: this host's)"},
      {"topo", "FILE", "output of `nvidia-smi topo -m` (topo)"},
      {"gpus", "FILE", "output of `nvidia-smi --query-gpu=...` (topo)"}},
     run_parse},
    {"nic", "run the NIC link-state monitor over a sysfs tree, print its events",
     "scan [options]", nic_scan_option_specs(), run_nic},
    {"version", "print the version", "", {}, run_version},
  };
}

} // namespace vigil
