#include "runtime/agent_command.hpp"

#include <cstdlib>
#include <ostream>

#include <caf/all.hpp>

#include "actors/agent/forwarder/forwarder.hpp"
#include "actors/agent/logsource/journald_source.hpp"
#include "actors/agent/logsource/kmsg_source.hpp"
#include "actors/agent/logsource/syslog_file_source.hpp"
#include "actors/agent/nic/nic_monitor.hpp"
#include "actors/agent/topology/topology_collector.hpp"
#include "actors/agent/xid/xid_monitor.hpp"
#include "messages/atoms.hpp"
#include "runtime/actor_clock.hpp"
#include "runtime/bootstrap.hpp"

namespace vigil {

namespace {

std::string option(const command_line& args, const char* name, std::string fallback) {
  return args.value(name).value_or(std::move(fallback));
}

std::string config_dir() {
  const char* dir = std::getenv("VIGIL_CONFIG_DIR");
  return dir != nullptr && *dir != '\0' ? dir : VIGIL_DEFAULT_CONFIG_DIR;
}

wall_time system_now() {
  return std::chrono::time_point_cast<wall_time::duration>(
    std::chrono::system_clock::now());
}

// The kernel-log reader named by --log-source, positioned from the state file.
expected<std::shared_ptr<xid_monitor_parts>>
make_xid_parts(const command_line& args, const std::string& state_dir,
               const std::string& metadata_path, const std::string& boot_id) {
  auto parts = std::make_shared<xid_monitor_parts>();
  auto catalog = agent::xid_catalog::load(config_dir());
  if (!catalog)
    return catalog.error();
  parts->catalog = std::make_unique<agent::xid_catalog>(std::move(*catalog));
  // Optional here: without it, XID events name the PCI address only until a
  // "GPU at PCI" line teaches the UUID.
  if (auto metadata = agent::load_gpu_metadata(metadata_path))
    parts->metadata = std::move(*metadata);
  parts->positions =
    std::make_unique<agent::log_position_store>(state_dir + "/kernel-log-position.json");
  auto loaded = parts->positions->load();
  agent::log_source_options options;
  options.boot_id = boot_id;
  options.saved = loaded.position;
  options.now = system_now();
  options.since_boot = agent::monotonic_since_boot();
  const auto kind = option(args, "log-source", "kmsg");
  if (kind == "kmsg") {
    options.path = option(args, "log-path", "/dev/kmsg");
    parts->source = std::make_unique<agent::kmsg_source>(options);
  } else if (kind == "journald") {
    options.path = option(args, "log-path", "");
    parts->source = std::make_unique<agent::journald_source>(options);
  } else if (kind == "syslog") {
    options.path = option(args, "log-path", "/var/log/syslog");
    parts->source = std::make_unique<agent::syslog_file_source>(options);
  } else {
    return failure{"--log-source", "'" + kind + "' is not kmsg, journald or syslog"};
  }
  return parts;
}

// The NIC monitor's poller with the flags of seed 002 §12.1;
// gpu_metadata.json with nic_topology is required (§12.2), so a missing or
// incomplete file stops startup. Problems that do not (unknown --checks
// names, a corrupt state file: a fresh boot) are written to `err`.
expected<agent::nic_poller> make_nic_poller(const command_line& args,
                                            const std::string& node,
                                            const std::string& state_dir,
                                            const std::string& metadata_path,
                                            std::ostream& err) {
  agent::nic_monitor_options options;
  options.node_name = node;
  options.sysfs_root = "/sys";
  options.proc_net_route = "/proc/net/route";
  options.boot_id_path = "/proc/sys/kernel/random/boot_id";
  options.metadata_path = metadata_path;
  options.state_file = state_dir + "/nic-state.json";
  if (auto applied = agent::apply_nic_monitor_flags(args, options, {"metadata-path"});
      !applied)
    return applied.error();
  for (const auto& name : options.unknown_checks)
    err << "vigil agent: --checks: unknown check '" << name << "' skipped\n";
  const bool override = !options.nic_inclusion_regex_override.empty();
  auto metadata = agent::load_nic_metadata(options.metadata_path, override);
  if (!metadata)
    return metadata.error();
  auto loaded = agent::load_nic_state_file(options.state_file);
  if (loaded.problem)
    err << "vigil agent: NIC state: " << loaded.problem->to_string()
        << " (starting as after a fresh boot)\n";
  return agent::nic_poller::start(
    options, *metadata,
    agent::resolve_default_route_device(options.sysfs_root, options.proc_net_route),
    std::move(loaded.state));
}

} // namespace

std::vector<option_spec> agent_option_specs() {
  std::vector<option_spec> specs{
    {"node-name", "NAME", "this node's Kubernetes name (default: $NODE_NAME)"},
    {"control-url", "URL", "the control plane, e.g. https://vigil-control:8443"},
    {"token-file", "FILE", "bearer token for the control plane (re-read on change)"},
    {"ca-file", "FILE", "CA bundle for the control plane's certificate"},
    {"state-dir", "DIR", "log position and NIC state (default /var/lib/vigil)"},
    {"spool-dir", "DIR",
     "events waiting for the control plane (default STATE-DIR/spool)"},
    {"log-source", "KIND", "kmsg (default), journald or syslog"},
    {"log-path", "PATH", "/dev/kmsg, a journal directory, or the syslog file"},
    {"metadata", "FILE",
     "gpu_metadata.json: written by the topology collector, read by the monitors "
     "(default STATE-DIR/gpu_metadata.json)"},
    {"metadata-path", "FILE", "the same as --metadata (seed 002 §12.1's name)"},
    {"nvidia-smi", "PATH",
     "the nvidia-smi the topology collector runs (default on PATH)"},
    {"topo-file", "FILE", "saved `nvidia-smi topo -m` output instead of running it"},
    {"gpus-file", "FILE", "saved `nvidia-smi --query-gpu=...` CSV instead of running it"},
    {"no-collect", "", "do not collect topology; use --metadata as it is"},
    {"sysfs-root", "DIR", "the host's /sys (default /sys)"},
    {"proc-net-route", "FILE", "the host's routing table (default /proc/net/route)"},
    {"boot-id-path", "FILE",
     "the host's boot ID (default /proc/sys/kernel/random/boot_id)"},
    {"no-nic", "", "do not run the NIC monitor"},
    {"state-file", "FILE", "NIC monitor state (default STATE-DIR/nic-state.json)"},
  };
  for (auto& spec : agent::nic_monitor_tuning_specs()) // seed 002 §12.1
    specs.push_back(std::move(spec));
  return specs;
}

int run_agent(command_context& ctx) {
  const char* env_node = std::getenv("NODE_NAME");
  const auto node = option(ctx.args, "node-name", env_node != nullptr ? env_node : "");
  auto fail = [&](const failure& f) {
    ctx.err << "vigil agent: " << f.to_string() << "\n";
    return 1;
  };
  if (node.empty())
    return fail({"--node-name", "not set (nor $NODE_NAME)"});
  const auto control = ctx.args.value("control-url");
  if (!control)
    return fail({"--control-url", "is required"});
  const auto state_dir = option(ctx.args, "state-dir", "/var/lib/vigil");
  auto boot_id = agent::read_boot_id_file(
    option(ctx.args, "boot-id-path", "/proc/sys/kernel/random/boot_id"));
  if (!boot_id)
    return fail(boot_id.error());
  const auto metadata_path =
    agent::metadata_path_flag(ctx.args, state_dir + "/gpu_metadata.json");
  if (!metadata_path)
    return fail(metadata_path.error());
  if (!ctx.args.has("no-collect")) {
    agent::topology_sources sources;
    sources.nvidia_smi = option(ctx.args, "nvidia-smi", sources.nvidia_smi);
    sources.topo_file = option(ctx.args, "topo-file", "");
    sources.gpus_file = option(ctx.args, "gpus-file", "");
    auto collected = agent::collect_gpu_metadata(node, sources, agent::run_command);
    if (collected) {
      if (auto written = agent::write_gpu_metadata(*metadata_path, *collected); !written)
        return fail(written.error());
    } else {
      ctx.err << "vigil agent: topology not collected (" << collected.error().to_string()
              << "); using " << *metadata_path << " as it is\n";
    }
  }
  auto xid_parts = make_xid_parts(ctx.args, state_dir, *metadata_path, *boot_id);
  if (!xid_parts)
    return fail(xid_parts.error());
  std::optional<agent::nic_poller> nic;
  if (!ctx.args.has("no-nic")) {
    auto poller = make_nic_poller(ctx.args, node, state_dir, *metadata_path, ctx.err);
    if (!poller)
      return fail(poller.error());
    nic.emplace(std::move(*poller));
  }
  auto spool = std::make_shared<agent::event_spool>(
    agent::spool_options{option(ctx.args, "spool-dir", state_dir + "/spool")});
  if (auto opened = spool->open(); !opened)
    return fail(opened.error());
  if (auto problem = spool->recovery_problem())
    ctx.err << "vigil agent: spool: " << problem->to_string() << "\n";
  agent::http_poster_options post;
  post.url = *control;
  post.token_file = option(ctx.args, "token-file", "");
  post.ca_file = option(ctx.args, "ca-file", "");

  return run_process(ctx.config, [&](process_context& p) -> status {
    auto wall = std::make_shared<caf_clock>(p.system.clock(), system_now());
    auto poster = p.system.spawn<caf::detached>(
      event_poster, std::make_shared<agent::http_event_poster>(post));
    auto fwd =
      p.system.spawn<caf::detached>(forwarder, spool, agent::forwarder_options{}, poster);
    auto adopt = [&](const char* name, const caf::actor& a) {
      caf::anon_send(p.root, adopt_atom::value, std::string(name), a);
    };
    adopt("poster", poster);
    adopt("forwarder", fwd);
    adopt("xid_monitor", p.system.spawn<caf::detached>(
                           xid_monitor, xid_monitor_config{node}, *xid_parts, fwd, wall));
    if (nic)
      adopt("nic_monitor",
            p.system.spawn<caf::detached>(nic_monitor, std::move(*nic), fwd, wall));
    return ok();
  });
}

} // namespace vigil
