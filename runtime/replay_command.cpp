#include "runtime/replay_command.hpp"

#include <ostream>

#include <nlohmann/json.hpp>

#include "runtime/journal/journal_store.hpp"

namespace vigil {

namespace {

// One line a person can read: what the event says, or the row's raw body.
std::string summarise(const journal_record& row, std::string& problem) {
  if (row.kind != "event")
    return row.body;
  auto event = decode_health_event(row.body);
  if (!event) {
    problem = event.error().to_string();
    return "(undecodable: " + problem + ")";
  }
  std::string out = event->component_class + " " + event->check_name + " "
                    + (event->is_healthy ? "healthy" : "unhealthy")
                    + (event->is_fatal ? " fatal" : "");
  for (const auto& code : event->error_codes)
    out += " code=" + code;
  if (!event->is_healthy)
    out += " action=" + std::string(to_string(event->action));
  for (const auto& e : event->entities)
    out += " " + e.type + "=" + e.value;
  if (!event->message.empty())
    out += " \"" + event->message + "\"";
  return out;
}

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
      const auto summary = summarise(row, problem);
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
