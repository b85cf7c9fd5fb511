#include "runtime/agent_commands.hpp"

#include <cstdlib>
#include <fstream>
#include <optional>
#include <ostream>
#include <sstream>
#include <thread>

#include "actors/agent/nic/nic_monitor_core.hpp"
#include "actors/agent/topology/topo_parser.hpp"
#include "actors/agent/xid/parse_kernel_log.hpp"

namespace vigil {

namespace {

void print_events(std::ostream& out, const std::vector<health_event>& events) {
  for (const auto& e : events)
    out << encode_health_event(e) << "\n";
  out.flush();
}

// The debugging CLIs run outside any actor: the system clock is theirs.
wall_time wall_clock_now() {
  return std::chrono::time_point_cast<wall_time::duration>(
    std::chrono::system_clock::now());
}

std::string config_dir() {
  const char* dir = std::getenv("VIGIL_CONFIG_DIR");
  return dir != nullptr && *dir != '\0' ? dir : VIGIL_DEFAULT_CONFIG_DIR;
}

expected<std::string> read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return failure{path, "cannot be read"};
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The host's boot time (btime of /proc/stat): dmesg offsets count from it.
std::optional<wall_time> host_boot_time() {
  std::ifstream in("/proc/stat");
  for (std::string key; in >> key;) {
    if (key == "btime") {
      std::int64_t seconds = 0;
      if (in >> seconds)
        return from_unix(seconds, 0);
      return std::nullopt;
    }
    in.ignore(1 << 20, '\n');
  }
  return std::nullopt;
}

} // namespace

int run_parse_kmsg(command_context& ctx, std::istream& in) {
  auto fail = [&](const failure& f) {
    ctx.err << "vigil parse kmsg: " << f.to_string() << "\n";
    return 1;
  };
  auto catalog = agent::xid_catalog::load(config_dir());
  if (!catalog)
    return fail(catalog.error());
  agent::parse_options options;
  options.catalog = std::move(*catalog);
  options.node_name = ctx.args.value("node").value_or("");
  options.boot_id = ctx.args.value("boot-id").value_or("");
  if (auto text = ctx.args.value("boot-time")) {
    auto t = parse_rfc3339(*text);
    if (!t)
      return fail({"--boot-time", t.error().to_string()});
    options.boot_time = *t;
  } else if (auto t = host_boot_time()) {
    options.boot_time = *t;
  }
  if (auto path = ctx.args.value("metadata")) {
    auto metadata = agent::load_gpu_metadata(*path);
    if (!metadata)
      return fail(metadata.error());
    options.metadata = std::move(*metadata);
  }
  auto result = agent::parse_kernel_log(in, options);
  print_events(ctx.out, result.events);
  const auto& c = result.counters;
  ctx.err << "vigil parse kmsg: " << c.lines << " lines, " << c.nvidia_lines
          << " NVIDIA lines, " << c.events_before_grouping << " events before grouping, "
          << result.events.size() << " after, " << c.malformed.total() << " malformed\n";
  for (const auto& [kind, line] : c.malformed.first_lines())
    ctx.err << "  malformed " << kind << " (" << c.malformed.counts().at(kind)
            << "), first: " << line << "\n";
  return 0;
}

int run_parse_topo(command_context& ctx) {
  auto fail = [&](const failure& f) {
    ctx.err << "vigil parse topo: " << f.to_string() << "\n";
    return 1;
  };
  auto topo_path = ctx.args.value("topo");
  if (!topo_path)
    return fail({"--topo", "is required (the output of `nvidia-smi topo -m`)"});
  auto topo_text = read_text(*topo_path);
  if (!topo_text)
    return fail(topo_text.error());
  auto matrix = agent::parse_topo_matrix(*topo_text);
  if (!matrix)
    return fail({*topo_path, matrix.error().to_string()});
  std::vector<agent::gpu_query_row> gpus;
  if (auto gpus_path = ctx.args.value("gpus")) {
    auto csv = read_text(*gpus_path);
    if (!csv)
      return fail(csv.error());
    auto rows = agent::parse_gpu_query_csv(*csv);
    if (!rows)
      return fail({*gpus_path, rows.error().to_string()});
    gpus = std::move(*rows);
  }
  auto metadata =
    agent::build_gpu_metadata(ctx.args.value("node").value_or(""), gpus, *matrix);
  if (!metadata)
    return fail(metadata.error());
  ctx.out << agent::encode_gpu_metadata(*metadata);
  return 0;
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
    auto result = agent::run_nic_poll_once(options, wall_clock_now());
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
    auto result = poller->poll(snapshot, boot_id ? *boot_id : "", wall_clock_now());
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
