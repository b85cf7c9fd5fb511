#include "runtime/cli/agent_command.hpp"

#include <cstdlib>
#include <fstream>
#include <ostream>

#include <caf/all.hpp>

#include "actors/agent/agent_endpoints.hpp"
#include "actors/agent/dcgm/dcgm_monitor.hpp"
#include "actors/agent/fabric/fabric_monitor.hpp"
#include "actors/agent/forwarder/forwarder.hpp"
#include "actors/agent/logsource/journald_source.hpp"
#include "actors/agent/logsource/kmsg_source.hpp"
#include "actors/agent/logsource/syslog_file_source.hpp"
#include "actors/agent/nic/nic_monitor.hpp"
#include "actors/agent/podresources/allocation_monitor.hpp"
#include "actors/agent/topology/device_inventory.hpp"
#include "actors/agent/topology/topology_collector.hpp"
#include "actors/agent/xid/xid_monitor.hpp"
#include "actors/protocol/atoms.hpp"
#include "runtime/actor_clock.hpp"
#include "runtime/bootstrap.hpp"
#include "runtime/cli/command_support.hpp"
#include "runtime/http/http_host.hpp"
#include "runtime/logging.hpp"
#include "runtime/version.hpp"

namespace vigil {

namespace {

std::string option(const command_line& args, const char* name, std::string fallback) {
  return args.value(name).value_or(std::move(fallback));
}

// How long /healthz and /metrics wait for each component to answer: well
// inside the probes' timeoutSeconds (the DaemonSet of `vigil install`).
constexpr auto component_answer_timeout = std::chrono::seconds{2};

expected<std::uint16_t> port_flag(const command_line& args, const char* name,
                                  std::uint16_t fallback) {
  const auto text = args.value(name);
  if (!text)
    return fallback;
  char* end = nullptr;
  const auto port = std::strtoul(text->c_str(), &end, 10);
  if (text->empty() || *end != '\0' || port > 65535)
    return failure{std::string("--") + name, "'" + *text + "' is not a port (0-65535)"};
  return static_cast<std::uint16_t>(port);
}

bool file_exists(const std::string& path) {
  return std::ifstream(path).good();
}

// seed 002 §12.2: nvidia-smi writes gpu_metadata.json before the monitors
// start. When it fails or times out, an earlier file is used as it is; without
// one the NIC monitor cannot start (it needs nic_topology), so startup stops,
// while with --no-nic the XID monitor starts without it (PCI addresses only).
// Says whether the file now describes this boot's hardware, which the device
// inventory check needs, and why not when collecting it failed.
struct prepared_metadata {
  bool fresh = false;  ///< collected now
  std::string failure; ///< collecting failed: why ("" when not tried)
};

expected<prepared_metadata> prepare_gpu_metadata(const command_line& args,
                                                 const std::string& node,
                                                 const std::string& metadata_path,
                                                 std::chrono::milliseconds timeout,
                                                 std::ostream& err) {
  if (args.has("no-collect"))
    return prepared_metadata{};
  agent::topology_sources sources;
  sources.nvidia_smi = option(args, "nvidia-smi", sources.nvidia_smi);
  sources.topo_file = option(args, "topo-file", "");
  sources.gpus_file = option(args, "gpus-file", "");
  sources.nvlink_file = option(args, "nvlink-file", "");
  auto collected =
    agent::collect_gpu_metadata(node, sources, agent::timed_command_runner(timeout));
  if (collected) {
    if (auto written = agent::write_gpu_metadata(metadata_path, *collected); !written)
      return written.error();
    return prepared_metadata{true, ""};
  }
  const auto why = collected.error().to_string();
  if (file_exists(metadata_path)) {
    err << "vigil agent: topology not collected (" << why << "); using the earlier "
        << metadata_path << " as it is\n";
    return prepared_metadata{false, why};
  }
  if (!args.has("no-nic"))
    return failure{"", "topology not collected (" + why + ") and there is no earlier "
                         + metadata_path
                         + " to fall back on: the NIC monitor cannot start without it"};
  err << "vigil agent: topology not collected (" << why << "); no " << metadata_path
      << ": the XID monitor starts without GPU metadata\n";
  return prepared_metadata{false, why};
}

// A GPU or NIC this node had before a reboot and has not now is a fault, not
// a recovery (seed 000 §4): its event goes to the spool before the forwarder
// starts, and only then is this boot's inventory saved, so a crash between
// the two reports it again (under the same event id) rather than never.
// When the topology could not be collected after a reboot, that much is said
// (a non-fatal event) and the previous boot's inventory is kept.
void check_device_inventory(const std::string& node, const std::string& boot_id,
                            const prepared_metadata& prepared,
                            const std::string& metadata_path,
                            const std::string& inventory_path, agent::event_spool& spool,
                            std::ostream& err) {
  if (!prepared.fresh) {
    auto before = agent::load_device_inventory(inventory_path);
    if (prepared.failure.empty() || !before || !*before || (*before)->boot_id == boot_id)
      return;
    auto e = agent::inventory_unchecked(node, boot_id, prepared.failure, system_now());
    component_logger("agent")->warn("{}: {}", e.check_name, e.message);
    (void)spool.append({encode_health_event(e), false});
    return;
  }
  auto metadata = agent::load_gpu_metadata(metadata_path);
  if (!metadata) {
    err << "vigil agent: device inventory not checked: " << metadata.error().to_string()
        << "\n";
    return;
  }
  const auto now = agent::inventory_of(*metadata, boot_id);
  auto before = agent::load_device_inventory(inventory_path);
  if (!before)
    err << "vigil agent: " << before.error().to_string()
        << " (the devices of the previous boot are unknown)\n";
  std::vector<agent::spool_entry> missing;
  if (before && *before)
    for (const auto& e :
         agent::devices_missing_after_boot(**before, now, node, system_now())) {
      component_logger("agent")->error("{}: {}", e.check_name, e.message);
      missing.push_back({encode_health_event(e), true});
    }
  for (const auto& result : spool.append_all(missing))
    if (result.status != agent::spool_append_status::appended) {
      err << "vigil agent: a missing-device event could not be spooled"
          << (result.error ? ": " + result.error->to_string() : std::string{}) << "\n";
      return; // the old inventory stays: the next start reports it again
    }
  if (auto saved = agent::save_device_inventory(inventory_path, now); !saved)
    err << "vigil agent: " << saved.error().to_string() << "\n";
}

// The kernel-log reader named by --log-source, positioned from the state file.
expected<std::shared_ptr<xid_monitor_parts>>
make_xid_parts(const command_line& args, const std::string& state_dir,
               const std::string& metadata_path, const std::string& boot_id) {
  auto parts = std::make_shared<xid_monitor_parts>();
  auto catalog = agent::xid_catalog::load(agent::xid_catalog::default_dir());
  if (!catalog)
    return catalog.error();
  parts->catalog = std::make_unique<agent::xid_catalog>(std::move(*catalog));
  // mlx5_core's fault lines: a pattern file that does not read stops startup.
  auto patterns = agent::load_nic_driver_patterns(agent::xid_catalog::default_dir());
  if (!patterns)
    return patterns.error();
  auto check = agent::nic_driver_check::make(std::move(*patterns));
  if (!check)
    return check.error();
  parts->nic_check = std::make_shared<const agent::nic_driver_check>(std::move(*check));
  auto cancellations = agent::xid_cancellations::load(agent::xid_catalog::default_dir());
  if (!cancellations)
    return cancellations.error();
  parts->cancellations =
    std::make_shared<const agent::xid_cancellations>(std::move(*cancellations));
  parts->sysfs_root = option(args, "sysfs-root", "/sys");
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
    {"control-url", "URL",
     "the control plane's base URL, e.g. https://vigil-control:8443 (a trailing "
     "/v1/events is taken off)"},
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
    {"nvlink-file", "FILE", "saved `nvidia-smi nvlink -R` output instead of running it"},
    {"no-collect", "", "do not collect topology; use --metadata as it is"},
    {"nvidia-smi-timeout", "DURATION",
     "how long each nvidia-smi call may run before it is killed (default 30s); on "
     "failure an earlier --metadata file is used"},
    {"pod-resources-socket", "PATH",
     "the kubelet's PodResources socket, for which pod holds which GPU (default "
     "/var/lib/kubelet/pod-resources/kubelet.sock)"},
    {"pod-resources-interval", "DURATION",
     "how often the kubelet's GPU allocations are read (default 10s)"},
    {"gpu-resources", "LIST",
     "resource names that are GPUs, a trailing * a prefix (default "
     "nvidia.com/gpu,nvidia.com/mig-*)"},
    {"no-pod-resources", "", "do not read the kubelet's GPU allocations"},
    {"metrics-port", "PORT",
     "serves /metrics and /healthz (default 2112, seed 002 §12.1; 0 picks a free one)"},
    {"metrics-address", "ADDR", "address the metrics port listens on (default 0.0.0.0)"},
    {"heartbeat-interval", "DURATION",
     "POST /v1/heartbeat to the control plane this often (default 60s; 0: never)"},
    {"sysfs-root", "DIR", "the host's /sys (default /sys)"},
    {"proc-net-route", "FILE", "the host's routing table (default /proc/net/route)"},
    {"proc-root", "DIR",
     "the host's /proc, where Fabric Manager's process is looked for (default /proc)"},
    {"boot-id-path", "FILE",
     "the host's boot ID (default /proc/sys/kernel/random/boot_id)"},
    {"no-nic", "", "do not run the NIC monitor"},
    {"dcgm-url", "URL",
     "this node's dcgm-exporter page (default http://localhost:9400/metrics: a "
     "hostNetwork or hostPort exporter); thresholds from --config's dcgm: section"},
    {"dcgm-interval", "DURATION", "how often the DCGM page is read (default 30s)"},
    {"no-dcgm", "", "do not read dcgm-exporter"},
    {"fabric-interval", "DURATION",
     "how often each GPU's NVLink fabric state is read from nvidia-smi (default 60s)"},
    {"no-fabric", "", "do not check the NVLink fabric"},
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
  auto metrics_port = port_flag(ctx.args, "metrics-port", 2112);
  if (!metrics_port)
    return fail(metrics_port.error());
  agent::heartbeat_options heartbeat;
  auto heartbeat_interval =
    duration_flag(ctx.args, "heartbeat-interval", heartbeat.interval, true);
  if (!heartbeat_interval)
    return fail(heartbeat_interval.error());
  heartbeat.interval = *heartbeat_interval;
  heartbeat.node_name = node;
  heartbeat.agent_version = version_string();
  heartbeat.boot_id = *boot_id;
  auto nvidia_smi_timeout =
    duration_flag(ctx.args, "nvidia-smi-timeout", agent::default_command_timeout, false);
  if (!nvidia_smi_timeout)
    return fail(nvidia_smi_timeout.error());
  auto fresh_metadata =
    prepare_gpu_metadata(ctx.args, node, *metadata_path, *nvidia_smi_timeout, ctx.err);
  if (!fresh_metadata)
    return fail(fresh_metadata.error());
  if (auto metadata = agent::load_gpu_metadata(*metadata_path))
    heartbeat.gpus = agent::gpu_facts_of(*metadata);
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
  check_device_inventory(node, *boot_id, *fresh_metadata, *metadata_path,
                         state_dir + "/device-inventory.json", *spool, ctx.err);
  std::optional<allocation_monitor_config> allocations;
  if (!ctx.args.has("no-pod-resources")) {
    allocation_monitor_config config;
    config.node = node;
    if (ctx.args.has("gpu-resources")) {
      auto names = agent::parse_gpu_resource_names(option(ctx.args, "gpu-resources", ""));
      if (!names)
        return fail(names.error());
      config.resources = std::move(*names);
    }
    auto interval =
      duration_flag(ctx.args, "pod-resources-interval", config.poll_interval, false);
    if (!interval)
      return fail(interval.error());
    config.poll_interval = *interval;
    allocations = std::move(config);
  }
  std::optional<dcgm_monitor_config> dcgm;
  agent::dcgm_exporter_options dcgm_exporter;
  if (!ctx.args.has("no-dcgm")) {
    dcgm_monitor_config config;
    config.node = node;
    config.thresholds = ctx.config.dcgm.thresholds;
    auto interval = duration_flag(ctx.args, "dcgm-interval", config.interval, false);
    if (!interval)
      return fail(interval.error());
    config.interval = *interval;
    dcgm_exporter.url = option(ctx.args, "dcgm-url", dcgm_exporter.url);
    dcgm = std::move(config);
  }
  std::optional<fabric_monitor_config> fabric;
  if (!ctx.args.has("no-fabric")) {
    fabric_monitor_config config;
    config.node = node;
    config.nvidia_smi = option(ctx.args, "nvidia-smi", config.nvidia_smi);
    config.sysfs_root = option(ctx.args, "sysfs-root", config.sysfs_root);
    config.proc_root = option(ctx.args, "proc-root", config.proc_root);
    auto interval = duration_flag(ctx.args, "fabric-interval", config.interval, false);
    if (!interval)
      return fail(interval.error());
    config.interval = *interval;
    // Only this boot's: an earlier boot's list may name a GPU replaced since
    // (the device inventory check compares boots).
    if (auto metadata = agent::load_gpu_metadata(*metadata_path);
        metadata && fresh_metadata->fresh)
      for (const auto& gpu : metadata->gpus)
        config.known_gpus.push_back({gpu.uuid, gpu.pci_address});
    fabric = std::move(config);
  }
  // XID actions for the DCGM check's XIDs and for a GPU gone from nvidia-smi.
  std::shared_ptr<const agent::xid_catalog> catalog;
  if (dcgm || fabric)
    if (auto loaded = agent::xid_catalog::load(agent::xid_catalog::default_dir()))
      catalog = std::make_shared<const agent::xid_catalog>(std::move(*loaded));
  if (fabric)
    fabric->catalog = catalog;
  agent::http_poster_options post;
  post.url = *control;
  post.token_file = option(ctx.args, "token-file", "");
  post.ca_file = option(ctx.args, "ca-file", "");

  http::server_options metrics;
  metrics.address = option(ctx.args, "metrics-address", "0.0.0.0");
  metrics.port = *metrics_port;
  metrics.max_body_bytes = 64 * 1024; // GETs only

  return run_process(ctx.config, [&](process_context& p) -> status {
    auto wall = std::make_shared<caf_clock>(p.system.clock(), system_now());
    auto poster = p.system.spawn<caf::detached>(
      event_poster, std::make_shared<agent::http_event_poster>(post));
    auto rejected =
      std::make_shared<agent::rejected_event_log>(state_dir + "/rejected-events.ndjson");
    auto fwd = p.system.spawn<caf::detached>(
      forwarder, spool, rejected, agent::forwarder_options{}, heartbeat, poster, wall);
    auto adopt = [&](const char* name, const caf::actor& a) {
      caf::anon_send(p.root, adopt_atom::value, std::string(name), a);
    };
    adopt("poster", poster);
    adopt("forwarder", fwd);
    if (allocations) {
      auto metadata = agent::load_gpu_metadata(*metadata_path);
      if (!metadata)
        component_logger("agent")->warn(
          "GPU allocations: no gpu_metadata ({}); device index ids stay unresolved",
          metadata.error().to_string());
      auto monitor = p.system.spawn<caf::detached>(
        allocation_monitor, *allocations,
        std::make_shared<agent::pod_resources_client>(
          option(ctx.args, "pod-resources-socket", agent::default_pod_resources_socket)),
        metadata ? *metadata : agent::gpu_metadata{},
        std::make_shared<agent::http_event_poster>(post), wall);
      caf::anon_send(fwd, fault_watch_atom::value, monitor);
      adopt("allocation_monitor", monitor);
    }
    agent_components components;
    components.forwarder = fwd;
    components.xid_monitor = p.system.spawn<caf::detached>(
      xid_monitor, xid_monitor_config{node}, *xid_parts, fwd, wall);
    adopt("xid_monitor", components.xid_monitor);
    if (nic) {
      components.nic_monitor =
        p.system.spawn<caf::detached>(nic_monitor, std::move(*nic), fwd, wall);
      adopt("nic_monitor", components.nic_monitor);
    }
    if (dcgm) {
      components.dcgm_monitor = p.system.spawn<caf::detached>(
        dcgm_monitor, *dcgm, std::make_shared<agent::dcgm_exporter_client>(dcgm_exporter),
        catalog, fwd, wall);
      adopt("dcgm_monitor", components.dcgm_monitor);
    }
    if (fabric) {
      components.fabric_monitor = p.system.spawn<caf::detached>(
        fabric_monitor, *fabric, agent::timed_command_runner(*nvidia_smi_timeout), fwd,
        wall);
      adopt("fabric_monitor", components.fabric_monitor);
    }
    auto endpoints = p.system.spawn(agent_endpoints, components,
                                    caf::timespan{component_answer_timeout});
    adopt("endpoints", endpoints);
    auto server = http::server::start(metrics, make_agent_handler(endpoints));
    if (!server)
      return failure{"--metrics-port", server.error().to_string()};
    component_logger("agent")->info(
      "/metrics and /healthz on {}:{}; heartbeat {}", metrics.address, (*server)->port(),
      heartbeat.interval.count() > 0
        ? "every " + std::to_string(heartbeat.interval.count()) + " ms"
        : std::string("off"));
    adopt("http", spawn_http_host(p.system, std::move(*server)));
    return ok();
  });
}

} // namespace vigil
