#include "runtime/cli/demo_command.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "actors/agent/xid/xid_catalog.hpp"
#include "runtime/cli/demo_serve.hpp"
#include "runtime/control_plane.hpp"
#include "runtime/sim/fleet_simulation.hpp"
#include "runtime/sim/scenario_run.hpp"

namespace vigil::demo {

namespace {

using json = nlohmann::json;

void print_summary(const json& summary, std::ostream& out) {
  out << "\nSummary (" << summary["virtualSeconds"].get<long long>() / 60
      << " virtual minutes, journal " << summary["journal"].get<std::string>() << ")\n";
  out << "\n  step                                                                    "
         "result\n";
  for (const auto& s : summary["steps"]) {
    auto name = s["name"].get<std::string>();
    if (name.size() > 72)
      name = name.substr(0, 69) + "...";
    char line[160];
    std::snprintf(line, sizeof line, "  %-72s %s\n", name.c_str(),
                  s["passed"].get<bool>() ? "passed" : "FAILED");
    out << line;
  }
  out << "\n  remediation     node          GPU                                       "
         "outcome\n";
  for (const auto& r : summary["remediations"]) {
    char line[200];
    std::snprintf(
      line, sizeof line, "  %-15s %-13s %-41s %s\n", r["kind"].get<std::string>().c_str(),
      r["node"].get<std::string>().c_str(),
      r["gpuUUID"].get<std::string>().empty() ? "-"
                                              : r["gpuUUID"].get<std::string>().c_str(),
      r["outcome"].get<std::string>().c_str());
    out << line;
  }
  out << "\n  evicted pods: " << summary["evictions"].size() << "\n";
  for (const auto& e : summary["evictions"])
    out << "    " << e["namespace"].get<std::string>() << "/"
        << e["pod"].get<std::string>() << " on " << e["node"].get<std::string>() << "\n";
  int cordoned = 0;
  for (const auto& n : summary["nodes"])
    if (n["cordoned"].get<bool>()) {
      ++cordoned;
      out << "  still cordoned: " << n["name"].get<std::string>()
          << (n["cordonedByVigil"].get<bool>() ? " (by vigil)" : "") << "\n";
    }
  out << "  nodes: " << summary["nodes"].size() << ", cordoned: " << cordoned << "\n";
  out << "  HealthEvents sent by the simulated agents: "
      << summary["events"]["sent"].get<std::uint64_t>()
      << ", acknowledged: " << summary["events"]["acknowledged"].get<std::uint64_t>()
      << "\n";
  out << "\n"
      << (summary["passed"].get<bool>() ? "All steps passed." : "Some steps FAILED.")
      << "\n";
}

} // namespace

std::vector<option_spec> demo_option_specs() {
  return {
    {"json", "", "print the summary as JSON (no timeline)"},
    {"scenario", "FILE", "run the scenario in FILE (YAML) instead of the built-in one"},
    {"print-scenario", "", "print the built-in scenario's YAML and exit"},
    {"journal", "URL", "sqlite:PATH (default: a temporary file) or postgresql://…"},
    {"serve", "", "keep the simulated cluster running until interrupted"},
    {"fleet", "", "fleet fault simulation: vigil against reboot-every-fault"},
    {"nodes", "N", "nodes of 8 GPUs (default: the scenario's nodes:, 16; --fleet: 2048)"},
    {"days", "N", "--fleet: days simulated (default 54)"},
    {"model", "FILE",
     "--fleet: YAML over the fault model's defaults (fleet_model's field names)"},
    {"seed", "S", "the simulator's dice (default: the scenario's seed:; --fleet: 1)"}};
}

namespace {

// --nodes 2048: a whole number within [low, high], else a failure naming it.
expected<long long> whole_number(const command_context& ctx, const char* name,
                                 long long fallback, long long low, long long high) {
  auto text = ctx.args.value(name);
  if (!text)
    return fallback;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text->c_str(), &end, 10);
  if (text->empty() || *end != '\0' || errno != 0 || v < low || v > high)
    return failure{std::string("--") + name, "'" + *text + "' is not a whole number in "
                                               + std::to_string(low) + ".."
                                               + std::to_string(high)};
  return v;
}

// One fault trace, vigil's rules against reboot-every-fault.
int run_fleet(command_context& ctx) {
  fleet_options options;
  // vigil's side of the comparison runs the thresholds of --config (the
  // compiled-in defaults are config/vigil.yaml's).
  options.model.correlation = correlation_config_from(ctx.config.correlation);
  options.model.escalation = remediation_settings_from(ctx.config.remediation).escalation;
  options.model.breaker = breaker_config_from(ctx.config.breaker);
  auto nodes = whole_number(ctx, "nodes", options.nodes, 1, 100000);
  auto days = whole_number(ctx, "days", options.days, 1, 3650);
  auto seed = whole_number(ctx, "seed", 1, 0, std::numeric_limits<long long>::max());
  for (const auto* bad : {&nodes, &days, &seed})
    if (!*bad) {
      ctx.err << "vigil demo: " << bad->error().to_string() << "\n";
      return 2;
    }
  options.nodes = static_cast<int>(*nodes);
  options.days = static_cast<int>(*days);
  options.seed = static_cast<std::uint64_t>(*seed);
  if (auto file = ctx.args.value("model")) {
    std::ifstream in(*file);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in) {
      ctx.err << "vigil demo: --model: cannot read " << *file << "\n";
      return 2;
    }
    auto model = read_fleet_model(text.str(), options.model);
    if (!model) {
      ctx.err << "vigil demo: --model " << *file << ": " << model.error().to_string()
              << "\n";
      return 2;
    }
    options.model = std::move(*model);
  }
  auto catalog = agent::xid_catalog::load(agent::xid_catalog::default_dir());
  if (!catalog) {
    ctx.err << "vigil demo: " << catalog.error().to_string() << "\n";
    return 1;
  }
  auto result = simulate_fleet(options, *catalog);
  if (!result) {
    ctx.err << "vigil demo: " << result.error().to_string() << "\n";
    return 2;
  }
  if (ctx.args.has("json"))
    ctx.out << to_json(*result).dump(2) << "\n";
  else
    ctx.out << to_table(*result);
  return 0;
}

// An option the chosen mode would ignore is a usage error, not a surprise.
std::optional<std::string> misplaced_option(const command_line& args) {
  const bool fleet = args.has("fleet");
  const bool serve = args.has("serve");
  if (fleet && serve)
    return "--fleet and --serve are different demos";
  for (const char* name : {"days", "model"})
    if (!fleet && args.has(name))
      return "--" + std::string(name) + " belongs to --fleet";
  for (const char* name : {"scenario", "journal", "print-scenario"})
    if (fleet && args.has(name))
      return "--" + std::string(name) + " does not apply to --fleet";
  if (serve && args.has("json"))
    return "--json does not apply to --serve (its introspection API answers JSON)";
  return std::nullopt;
}

} // namespace

int run_demo(command_context& ctx) {
  if (auto misplaced = misplaced_option(ctx.args)) {
    ctx.err << "vigil demo: " << *misplaced << "\n";
    return 2;
  }
  if (ctx.args.has("fleet"))
    return run_fleet(ctx);
  if (ctx.args.has("print-scenario")) {
    ctx.out << builtin_scenario_yaml();
    return 0;
  }
  demo_options options;
  options.json_output = ctx.args.has("json");
  options.journal_url = ctx.args.value("journal").value_or("");
  std::string text = builtin_scenario_yaml();
  if (auto file = ctx.args.value("scenario")) {
    std::ifstream in(*file);
    if (!in) {
      ctx.err << "vigil demo: --scenario: cannot read " << *file << "\n";
      return 2;
    }
    std::ostringstream all;
    all << in.rdbuf();
    text = all.str();
  }
  // --nodes and --seed size and seed the scenario's cluster too; --serve
  // takes up to 10,000 nodes (the console's benchmark fleet).
  scenario_overrides overrides;
  const long long most_nodes = ctx.args.has("serve") ? 10000 : 4096;
  for (auto [name, high] : {std::pair<const char*, long long>{"nodes", most_nodes},
                            {"seed", std::numeric_limits<long long>::max()}}) {
    if (!ctx.args.has(name))
      continue;
    auto value = whole_number(ctx, name, 0, name == std::string("nodes") ? 1 : 0, high);
    if (!value) {
      ctx.err << "vigil demo: " << value.error().to_string() << "\n";
      return 2;
    }
    if (name == std::string("nodes"))
      overrides.nodes = static_cast<int>(*value);
    else
      overrides.seed = static_cast<std::uint64_t>(*value);
  }
  auto plan = parse_scenario(text, overrides);
  if (!plan) {
    ctx.err << "vigil demo: " << plan.error().to_string() << "\n";
    return 2;
  }
  if (ctx.args.has("serve"))
    return run_demo_serve(ctx, *plan, options.journal_url);
  if (!options.json_output)
    ctx.out << "vigil demo: " << plan->name << " (" << plan->nodes
            << " nodes of 8 GPUs; virtual time)\n";
  auto summary = run_virtual(ctx.config, *plan, options, ctx.out);
  if (!summary) {
    ctx.err << "vigil demo: " << summary.error().to_string() << "\n";
    return 1;
  }
  if (options.json_output)
    ctx.out << summary->dump(2) << "\n";
  else
    print_summary(*summary, ctx.out);
  return (*summary)["passed"].get<bool>() ? 0 : 1;
}

} // namespace vigil::demo
