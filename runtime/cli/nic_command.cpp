#include "runtime/cli/nic_command.hpp"

#include <ostream>
#include <thread>

#include "actors/agent/nic/nic_monitor_core.hpp"
#include "runtime/cli/command_support.hpp"
#include "runtime/clock.hpp"

namespace vigil {

int run_nic(command_context& ctx) {
  if (!check_verb(ctx, "nic", {"scan"}))
    return 2;
  return run_nic_scan(ctx);
}

std::vector<option_spec> nic_scan_option_specs() {
  std::vector<option_spec> specs{
    {"sysfs-root", "DIR", "directory that plays the role of /sys"},
    {"metadata", "FILE", "gpu_metadata.json with nic_topology"},
    {"metadata-path", "FILE", "the same (seed 002 §12.1's name)"},
    {"state-file", "FILE", "persisted port state"},
    {"boot-id-path", "FILE", "file holding the boot ID"},
    {"proc-net-route", "FILE", "routing table (default /proc/net/route)"},
    {"node-name", "NAME", "nodeName of the events"},
    {"once", "", "one poll cycle, then exit"}};
  for (auto& spec : agent::nic_monitor_tuning_specs())
    specs.push_back(std::move(spec));
  return specs;
}

int run_nic_scan(command_context& ctx) {
  agent::nic_monitor_options options;
  options.proc_net_route = "/proc/net/route";
  options.boot_id_path = "/proc/sys/kernel/random/boot_id";
  options.sysfs_root = "/sys";
  if (const char* node = std::getenv("NODE_NAME"))
    options.node_name = node;
  auto metadata_path = agent::metadata_path_flag(ctx.args, options.metadata_path);
  auto applied = metadata_path
                   ? agent::apply_nic_monitor_flags(ctx.args, options, {"metadata-path"})
                   : status{metadata_path.error()};
  if (!applied) {
    ctx.err << "vigil nic scan: " << applied.error().to_string() << "\n";
    return 2;
  }
  options.metadata_path = *metadata_path;
  auto report = [&](const std::vector<agent::nic_diagnostic>& diagnostics) {
    for (const auto& d : diagnostics)
      ctx.err << "vigil nic scan: " << d.to_string() << "\n";
  };
  for (const auto& name : options.unknown_checks)
    ctx.err << "vigil nic scan: --checks: unknown check '" << name << "' skipped\n";
  if (ctx.args.has("once")) {
    auto result = agent::run_nic_poll_once(options, system_now());
    if (!result) {
      ctx.err << "vigil nic scan: " << result.error().to_string() << "\n";
      return 1;
    }
    report(result->diagnostics);
    print_events(ctx.out, result->events);
    return 0;
  }
  // Keep polling, as the agent's monitor does (the debug loop may block).
  const bool override = !options.nic_inclusion_regex_override.empty();
  auto metadata = agent::load_nic_metadata(options.metadata_path, override);
  if (!metadata) {
    ctx.err << "vigil nic scan: " << metadata.error().to_string() << "\n";
    return 1;
  }
  auto loaded = agent::load_nic_state_file(options.state_file);
  if (loaded.problem)
    report({*loaded.problem});
  auto poller = agent::nic_poller::start(
    options, *metadata,
    agent::resolve_default_route_device(options.sysfs_root, options.proc_net_route),
    std::move(loaded.state));
  if (!poller) {
    ctx.err << "vigil nic scan: " << poller.error().to_string() << "\n";
    return 1;
  }
  agent::nic_sysfs_reader reader(options.sysfs_root);
  for (;;) {
    auto snapshot = reader.read();
    auto boot_id = agent::read_boot_id(options.boot_id_path);
    if (!boot_id)
      report({boot_id.error()});
    auto result = poller->poll(snapshot, boot_id ? *boot_id : "", system_now());
    agent::add_gid_diagnostics(result.events, options.sysfs_root, result.diagnostics);
    report(snapshot.diagnostics);
    report(result.diagnostics);
    print_events(ctx.out, result.events);
    if (poller->state())
      if (auto st = agent::save_nic_state_file(options.state_file, *poller->state()); !st)
        report({st.error()});
    std::this_thread::sleep_for(options.state_polling_interval);
  }
}

} // namespace vigil
