#include "runtime/cli/replay_command.hpp"

#include <algorithm>
#include <cstdio>
#include <ostream>

#include <nlohmann/json.hpp>

#include "runtime/config.hpp"
#include "runtime/control_plane.hpp"
#include "runtime/journal/journal_store.hpp"
#include "runtime/replay/replay_analysis.hpp"

namespace vigil {

std::vector<option_spec> replay_option_specs() {
  return {{"journal", "URL", "sqlite:PATH or postgresql://…"},
          {"since", "TIME", "RFC 3339; rows before it are skipped"},
          {"until", "TIME", "RFC 3339; rows after it are skipped"},
          {"node", "NAME", "only rows about this node"},
          {"at", "TIME",
           "RFC 3339: the fleet's state at that moment, and each node's timeline"},
          {"what-if", "FILE",
           "replay the events under the configuration in FILE; list the "
           "decisions that would differ"},
          {"by-namespace", "",
           "GPU-hours each namespace's pods lost to faults (from the gpu_holders rows: "
           "every GPU a pod held, from the fault until its node's quarantine was "
           "released, or until --until / the last row)"},
          {"json", "", "JSON output"}};
}

namespace {

std::string json_line(const journal_record& row, const std::string& problem) {
  nlohmann::json line{{"seq", row.seq},
                      {"recordedAt", format_rfc3339(row.recorded_at)},
                      {"node", row.node},
                      {"kind", row.kind}};
  auto body = nlohmann::json::parse(row.body, nullptr, false);
  line["body"] = body.is_discarded() ? nlohmann::json(row.body) : body;
  if (!problem.empty())
    line["error"] = problem;
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

expected<std::optional<wall_time>> time_option(const command_line& args,
                                               const char* name) {
  auto text = args.value(name);
  if (!text)
    return std::optional<wall_time>{};
  auto t = parse_rfc3339(*text);
  if (!t)
    return failure{std::string("--") + name, t.error().what};
  return std::optional<wall_time>{*t};
}

expected<std::vector<journal_record>> read_all(journal_store& store,
                                               journal_query query) {
  std::vector<journal_record> all;
  for (;;) {
    auto rows = store.read(query);
    if (!rows)
      return rows.error();
    all.insert(all.end(), rows->begin(), rows->end());
    if (rows->size() < query.limit)
      return all;
    query.after_seq = rows->back().seq;
  }
}

std::string describe_active(const nlohmann::json& e) {
  return e.value("checkName", "") + " " + e.value("entityType", "") + "="
         + e.value("entityValue", "") + " " + e.value("recommendedAction", "");
}

// --at: every node with rows, its state at the moment and its timeline.
int print_fleet_at(command_context& ctx, const std::vector<journal_record>& rows,
                   wall_time at) {
  auto fleet = fleet_at(rows, at);
  if (auto only = ctx.args.value("node")) {
    auto& nodes = fleet["nodes"];
    nodes.erase(
      std::remove_if(nodes.begin(), nodes.end(),
                     [&](const nlohmann::json& n) { return n["name"] != *only; }),
      nodes.end());
  }
  if (ctx.args.has("json")) {
    ctx.out << fleet.dump(2) << "\n";
    return 0;
  }
  ctx.out << "fleet at " << fleet["at"].get<std::string>() << " (" << rows.size()
          << " rows)\n";
  for (const auto& node : fleet["nodes"]) {
    const auto& active = node["activeEvents"];
    ctx.out << "\n"
            << node["name"].get<std::string>() << ": "
            << (active.empty()
                  ? std::string("healthy")
                  : "quarantined, " + std::to_string(active.size()) + " active event(s)")
            << "\n";
    for (const auto& e : active)
      ctx.out << "  active: " << describe_active(e) << "\n";
    if (node.contains("drain"))
      ctx.out << "  drain: " << node["drain"].value("drain", "") << " "
              << node["drain"].value("phase", "") << "\n";
    if (node.contains("remediation"))
      ctx.out << "  remediation: " << node["remediation"].value("kind", "") << " "
              << node["remediation"].value("phase", "") << "\n";
    for (const auto& line : node["timeline"])
      ctx.out << "    " << line.get<std::string>() << "\n";
  }
  for (const auto& incident : fleet["fabricIncidents"])
    ctx.out << "\nfabric incident: " << incident.dump() << "\n";
  return 0;
}

// What --what-if replays, and what it does not: the breaker's budgets and the
// escalation caps depend on the timing of the cluster's answers (CRs, Jobs,
// boot IDs) that a replay of the events alone cannot know.
const char* const what_if_compares[] = {"correlation", "quarantine", "drain scope",
                                        "remediation plan"};
const char* const what_if_not_replayed[] = {"breaker", "escalation caps and cooldowns",
                                            "drain modes"};

// --what-if: the same events under another configuration.
int print_what_if(command_context& ctx, const std::vector<journal_record>& rows,
                  const std::string& file) {
  auto other = load_config_file(file);
  if (!other) {
    ctx.err << "vigil replay: --what-if " << file << ": " << other.error().to_string()
            << "\n";
    return 2;
  }
  auto differences = compare_policies(rows, decision_policy_from(ctx.config),
                                      decision_policy_from(*other));
  if (auto only = ctx.args.value("node"))
    differences.erase(std::remove_if(differences.begin(), differences.end(),
                                     [&](const auto& d) { return d.node != *only; }),
                      differences.end());
  std::size_t events = 0;
  for (const auto& r : rows)
    events += r.kind == "event" ? 1 : 0;
  if (ctx.args.has("json")) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& d : differences)
      out.push_back({{"seq", d.seq},
                     {"node", d.node},
                     {"event", d.event},
                     {"now", d.now},
                     {"whatIf", d.what_if}});
    ctx.out << nlohmann::json{{"events", events},
                              {"compared", what_if_compares},
                              {"notReplayed", what_if_not_replayed},
                              {"differences", out}}
                 .dump(2)
            << "\n";
    return 0;
  }
  for (const auto& d : differences)
    ctx.out << "#" << d.seq << "  " << d.node << "  " << d.event << "\n"
            << "    now:     " << d.now << "\n"
            << "    what-if: " << d.what_if << "\n";
  ctx.out << differences.size() << " of " << events
          << " events would be decided differently under " << file << "\n";
  auto join = [](const auto& parts) {
    std::string out;
    for (const char* part : parts)
      out += (out.empty() ? "" : ", ") + std::string(part);
    return out;
  };
  ctx.out << "compared: " << join(what_if_compares)
          << "; not replayed: " << join(what_if_not_replayed) << "\n";
  return 0;
}

int print_by_namespace(command_context& ctx, const std::vector<journal_record>& rows,
                       std::optional<wall_time> until) {
  const wall_time end = until          ? *until
                        : rows.empty() ? wall_time{}
                                       : rows.back().recorded_at;
  const auto losses = losses_by_namespace(rows, end);
  if (ctx.args.has("json")) {
    auto list = nlohmann::json::array();
    for (const auto& l : losses)
      list.push_back({{"namespace", l.ns},
                      {"gpuHours", l.gpu_hours},
                      {"pods", l.pods},
                      {"faults", l.faults},
                      {"stillQuarantined", l.open}});
    ctx.out << nlohmann::json{{"end", format_rfc3339(end)}, {"namespaces", list}}.dump(2)
            << "\n";
    return 0;
  }
  char line[256];
  std::snprintf(line, sizeof line, "%-32s %10s %6s %7s %s\n", "NAMESPACE", "GPU-HOURS",
                "PODS", "FAULTS", "STILL-QUARANTINED");
  ctx.out << line;
  for (const auto& l : losses) {
    std::snprintf(line, sizeof line, "%-32s %10.2f %6zu %7zu %zu\n", l.ns.c_str(),
                  l.gpu_hours, l.pods, l.faults, l.open);
    ctx.out << line;
  }
  if (losses.empty())
    ctx.out << "no gpu_holders rows: the agents reported no GPU allocations for the "
               "faults in this range\n";
  return 0;
}

} // namespace

int run_replay(command_context& ctx) {
  const auto url = ctx.args.value("journal");
  if (!url) {
    ctx.err << "vigil replay: --journal is required (sqlite:PATH or postgresql://…)\n";
    return 2;
  }
  journal_query query;
  for (auto [name, target] :
       {std::pair{"since", &query.since}, {"until", &query.until}}) {
    auto t = time_option(ctx.args, name);
    if (!t) {
      ctx.err << "vigil replay: " << t.error().to_string() << "\n";
      return 2;
    }
    *target = *t;
  }
  query.node = ctx.args.value("node").value_or("");
  auto store = make_journal_store(*url);
  if (!store) {
    ctx.err << "vigil replay: " << store.error().to_string() << "\n";
    return 2;
  }
  if (auto opened = (*store)->open(); !opened) {
    ctx.err << "vigil replay: " << opened.error().to_string() << "\n";
    return 1;
  }
  const bool as_json = ctx.args.has("json");
  if (ctx.args.has("by-namespace")) {
    auto rows = read_all(**store, query);
    if (!rows) {
      ctx.err << "vigil replay: " << rows.error().to_string() << "\n";
      return 1;
    }
    return print_by_namespace(ctx, *rows, query.until);
  }
  if (ctx.args.has("at") || ctx.args.has("what-if")) {
    // State needs every row before the moment, of every node (fabric
    // incidents are fleet-wide rows): --node filters what is printed.
    const char* clash = query.since                                   ? "--since"
                        : ctx.args.has("at") && ctx.args.has("until") ? "--until"
                                                                      : nullptr;
    if (clash != nullptr) {
      ctx.err << "vigil replay: " << clash << " cannot be combined with "
              << (ctx.args.has("at") ? "--at" : "--what-if")
              << ": the state needs every earlier row\n";
      return 2;
    }
    auto at = time_option(ctx.args, "at");
    if (!at) {
      ctx.err << "vigil replay: " << at.error().to_string() << "\n";
      return 2;
    }
    if (*at)
      query.until = **at;
    query.node.clear();
    auto rows = read_all(**store, query);
    if (!rows) {
      ctx.err << "vigil replay: " << rows.error().to_string() << "\n";
      return 1;
    }
    if (auto file = ctx.args.value("what-if"))
      return print_what_if(ctx, *rows, *file);
    return print_fleet_at(ctx, *rows, **at);
  }
  std::vector<std::int64_t> undecodable;
  std::uint64_t count = 0;
  for (;;) {
    auto rows = (*store)->read(query);
    if (!rows) {
      ctx.err << "vigil replay: " << rows.error().to_string() << "\n";
      return 1;
    }
    for (const auto& row : *rows) {
      std::string problem;
      const auto summary = summarise_row(row, problem);
      if (!problem.empty())
        undecodable.push_back(row.seq);
      ++count;
      if (as_json)
        ctx.out << json_line(row, problem) << "\n";
      else
        ctx.out << "#" << row.seq << "  " << format_rfc3339(row.recorded_at) << "  "
                << (row.node.empty() ? "-" : row.node) << "  " << row.kind << "  "
                << summary << "\n";
    }
    if (rows->size() < query.limit)
      break;
    query.after_seq = rows->back().seq;
  }
  ctx.err << "replay: " << count << " rows";
  if (!undecodable.empty()) {
    ctx.err << ", " << undecodable.size() << " undecodable (seq";
    for (auto seq : undecodable)
      ctx.err << " " << seq;
    ctx.err << ")";
  }
  ctx.err << "\n";
  return 0;
}

} // namespace vigil
