#include "runtime/cli/parse_command.hpp"

#include <fstream>
#include <optional>
#include <ostream>

#include "actors/agent/dcgm/dcgm_health.hpp"
#include "actors/agent/topology/topo_parser.hpp"
#include "actors/agent/xid/parse_kernel_log.hpp"
#include "runtime/cli/command_support.hpp"
#include "runtime/clock.hpp"

namespace vigil {

namespace {

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

std::vector<option_spec> parse_option_specs() {
  return {
    {"metadata", "FILE", "gpu_metadata.json for PCI -> GPU UUID (kmsg)"},
    {"node", "NAME", "nodeName of the events and metadata"},
    {"boot-id", "ID", "boot ID mixed into event ids (kmsg)"},
    {"boot-time", "TIME", "RFC 3339 boot time for dmesg offsets (default: this host's)"},
    {"topo", "FILE", "output of `nvidia-smi topo -m` (topo)"},
    {"gpus", "FILE", "output of `nvidia-smi --query-gpu=...` (topo)"},
    {"nvlinks", "FILE", "output of `nvidia-smi nvlink -R` (topo)"},
    {"sysfs-root", "DIR",
     "where a NIC driver line's PCI address is looked up (kmsg; /sys)"},
    {"time", "TIME", "RFC 3339 time of the first page (dcgm; default now)"},
    {"interval", "DURATION", "time between concatenated pages (dcgm; default 30s)"}};
}

int run_parse(command_context& ctx, std::istream& in) {
  if (!check_verb(ctx, "parse", {"kmsg", "topo", "dcgm"}))
    return 2;
  if (ctx.args.positional.front() == "topo")
    return run_parse_topo(ctx);
  if (ctx.args.positional.front() == "dcgm")
    return run_parse_dcgm(ctx, in);
  return run_parse_kmsg(ctx, in);
}

int run_parse_kmsg(command_context& ctx, std::istream& in) {
  auto fail = [&](const failure& f) {
    ctx.err << "vigil parse kmsg: " << f.to_string() << "\n";
    return 1;
  };
  auto catalog = agent::xid_catalog::load(agent::xid_catalog::default_dir());
  if (!catalog)
    return fail(catalog.error());
  agent::parse_options options;
  options.catalog = std::move(*catalog);
  auto patterns = agent::load_nic_driver_patterns(agent::xid_catalog::default_dir());
  if (!patterns)
    return fail(patterns.error());
  auto check = agent::nic_driver_check::make(std::move(*patterns));
  if (!check)
    return fail(check.error());
  options.nic_check = std::make_shared<const agent::nic_driver_check>(std::move(*check));
  auto cancellations = agent::xid_cancellations::load(agent::xid_catalog::default_dir());
  if (!cancellations)
    return fail(cancellations.error());
  options.cancellations =
    std::make_shared<const agent::xid_cancellations>(std::move(*cancellations));
  options.sysfs_root = ctx.args.value("sysfs-root").value_or("/sys");
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
          << " NVIDIA lines, " << c.nic_driver_lines << " NIC driver lines, "
          << c.events_before_grouping << " events before grouping, "
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
  if (auto nvlinks_path = ctx.args.value("nvlinks")) {
    auto text = read_text(*nvlinks_path);
    if (!text)
      return fail(text.error());
    agent::attach_nvlinks(*metadata, agent::parse_nvlink_remotes(*text));
  }
  ctx.out << agent::encode_gpu_metadata(*metadata);
  return 0;
}

int run_parse_dcgm(command_context& ctx, std::istream& in) {
  auto fail = [&](const failure& f) {
    ctx.err << "vigil parse dcgm: " << f.to_string() << "\n";
    return 1;
  };
  wall_time at = system_now();
  if (auto text = ctx.args.value("time")) {
    auto t = parse_rfc3339(*text);
    if (!t)
      return fail({"--time", t.error().to_string()});
    at = *t;
  }
  auto interval =
    duration_flag(ctx.args, "interval", std::chrono::milliseconds(30000), false);
  if (!interval)
    return fail(interval.error());
  auto catalog = agent::xid_catalog::load(agent::xid_catalog::default_dir());
  if (!catalog)
    return fail(catalog.error());
  std::ostringstream text;
  text << in.rdbuf();
  auto page = agent::parse_prometheus_text(text.str());
  const auto skipped = page.skipped_lines;
  for (const auto& problem : page.problems)
    ctx.err << "vigil parse dcgm: skipped " << problem.to_string() << "\n";
  agent::dcgm_health health(ctx.args.value("node").value_or(""),
                            ctx.config.dcgm.thresholds, &*catalog);
  auto pages = agent::split_concatenated_pages(std::move(page));
  std::size_t samples = 0;
  std::vector<health_event> events;
  for (const auto& p : pages) {
    samples += p.samples.size();
    for (auto& e : health.observe(p, at))
      events.push_back(std::move(e));
    at += *interval;
  }
  print_events(ctx.out, events);
  if (!pages.empty())
    if (auto blind = agent::describe(agent::dcgm_blind_checks(pages.back()));
        !blind.empty())
      ctx.err << "vigil parse dcgm: no data for " << blind << "\n";
  ctx.err << "vigil parse dcgm: " << pages.size()
          << (pages.size() == 1 ? " page, " : " pages, ") << samples << " samples, "
          << health.gpus() << " GPUs, " << skipped << " lines skipped, " << events.size()
          << " events\n";
  return 0;
}

} // namespace vigil
