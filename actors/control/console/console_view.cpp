#include "actors/control/console/console_view.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>
#include <map>
#include <type_traits>

#include "messages/health_event.hpp"
#include "messages/wall_time.hpp"
#include "runtime/journal/fleet_view.hpp"

namespace vigil::console {

using json = nlohmann::json;

namespace {

constexpr std::array<std::string_view, 9> state_names{
  "fabric_incident",    "waiting_for_person", "remediating", "draining", "quarantined",
  "cordoned_by_others", "opted_out",          "healthy",     "unknown"};

std::string text_of(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

bool flag_of(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_boolean() && it->get<bool>();
}

std::size_t size_of(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_array() ? it->size() : 0;
}

std::string plural(std::size_t n, const char* one) {
  return std::to_string(n) + " " + one + (n == 1 ? "" : "s");
}

} // namespace

std::string_view to_string(tile_state state) {
  return state_names[static_cast<std::size_t>(state)];
}

node_tile tile_of(const json& summary) {
  node_tile tile;
  if (!summary.is_object())
    return tile;
  tile.name = text_of(summary, "node");
  tile.pool = text_of(summary, "pool");
  tile.active = size_of(summary, "active");
  const auto remediation = summary.value("remediation", json::object());
  const auto in_flight = text_of(remediation, "inFlight");
  const auto person = text_of(summary, "handedToOperator");
  const auto draining = text_of(summary, "draining");
  const auto active = plural(tile.active, "active event");
  if (auto ports = size_of(summary, "fabricPortsDown"); ports > 0) {
    tile.state = tile_state::fabric_incident;
    tile.detail = plural(ports, "NIC port") + " down in a fabric incident";
  } else if (!person.empty() && tile.active > 0) {
    tile.state = tile_state::waiting_for_person;
    tile.detail = person;
  } else if (!in_flight.empty()) {
    tile.state = tile_state::remediating;
    auto cr = text_of(remediation, "cr");
    tile.detail = text_of(remediation, "kind") + (cr.empty() ? "" : " " + cr) + ": "
                  + text_of(remediation, "step");
  } else if (!draining.empty()) {
    tile.state = tile_state::draining;
    tile.detail = "drain " + draining;
  } else if (tile.active > 0 && flag_of(summary, "cordonOwned")) {
    tile.state = tile_state::quarantined;
    tile.detail = active;
  } else if (flag_of(summary, "optedOut")) {
    tile.state = tile_state::opted_out;
    tile.detail = tile.active > 0 ? active + "; opted out of quarantine" : "opted out";
  } else if (flag_of(summary, "unschedulable") && !flag_of(summary, "cordonOwned")) {
    tile.state = tile_state::cordoned_by_others;
    tile.detail = "cordoned, not by vigil";
  } else if (!flag_of(summary, "observed")) {
    tile.state = tile_state::unknown;
    tile.detail = "no Node object seen";
  } else {
    tile.state = tile_state::healthy;
    tile.detail = tile.active > 0 ? active + ", none quarantining" : "";
  }
  return tile;
}

json fleet_page(const std::vector<node_tile>& tiles, const json& fleet,
                const json& breaker, const json& journal) {
  auto sorted = tiles;
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  json counts = json::object();
  for (auto name : state_names)
    counts[std::string(name)] = 0;
  json list = json::array();
  for (const auto& t : sorted) {
    const auto state = std::string(to_string(t.state));
    counts[state] = counts[state].get<int>() + 1;
    list.push_back({{"name", t.name},
                    {"pool", t.pool},
                    {"state", state},
                    {"detail", t.detail},
                    {"active", t.active}});
  }
  return {{"nodes", list},
          {"counts", counts},
          {"fleet", fleet},
          {"breaker", breaker},
          {"journal", journal}};
}

namespace {

// The columns of an actor's mailbox figures (message_stats' summary under
// "messages"): handled, per second, and its slowest message type by p99.
void add_message_columns(json& row, const json& summary) {
  const auto messages = summary.is_object() ? summary.find("messages") : summary.end();
  if (!summary.is_object() || messages == summary.end() || !messages->is_object())
    return;
  row["handled"] = messages->value("handled", std::uint64_t{0});
  row["perSecond"] = messages->value("perSecond", 0.0);
  row["messageTypes"] = messages->value("types", json::array());
  const json* slowest = nullptr;
  for (const auto& t : row["messageTypes"])
    if (t.is_object() && t.value("p99Micros", 0.0) > 0
        && (slowest == nullptr
            || t.value("p99Micros", 0.0) > slowest->value("p99Micros", 0.0)))
      slowest = &t;
  if (slowest != nullptr)
    row["slowest"] = {{"type", slowest->value("type", "")},
                      {"p99Micros", slowest->value("p99Micros", 0.0)}};
}

} // namespace

json actor_table(const std::vector<std::string>& names,
                 const std::vector<json>& summaries,
                 const std::vector<json>& node_summaries, const std::string& expanded,
                 const std::vector<json>& children) {
  std::vector<json> rows;
  auto depth = [](const json& s) {
    auto it = s.find("mailboxDepth");
    return it != s.end() && it->is_number_unsigned() ? it->get<std::uint64_t>() : 0u;
  };
  // The fleet restarts crashed node actors and says which, how often, and why.
  std::map<std::string, json> restarted;
  for (std::size_t i = 0; i < names.size() && i < summaries.size(); ++i) {
    json row = {{"name", names[i]},
                {"kind", names[i]},
                {"parent", "supervisor"},
                {"mailboxDepth", depth(summaries[i])},
                {"detail", summaries[i]}};
    add_message_columns(row, summaries[i]);
    if (names[i] == "fleet" && summaries[i].is_object())
      for (const auto& r : summaries[i].value("restartedNodes", json::array()))
        if (r.is_object() && r.contains("node") && r["node"].is_string())
          restarted[r["node"].get<std::string>()] = r;
    rows.push_back(std::move(row));
  }
  for (const auto& s : node_summaries) {
    if (!s.is_object())
      continue;
    const auto tile = tile_of(s);
    json row = {{"name", "node/" + tile.name},
                {"kind", "node"},
                {"parent", "fleet"},
                {"mailboxDepth", depth(s)},
                {"gpuActors", s.value("gpuActors", 0)},
                {"nicPortActors", s.value("nicPortActors", 0)},
                {"state", std::string(to_string(tile.state))},
                {"detail", tile.detail},
                {"restarts", 0}};
    add_message_columns(row, s);
    if (auto r = restarted.find(tile.name); r != restarted.end()) {
      row["restarts"] = r->second.value("restarts", 0);
      row["lastCrash"] = r->second.value("lastCrash", "");
    }
    rows.push_back(std::move(row));
  }
  for (const auto& c : children) {
    if (!c.is_object())
      continue;
    json row = {{"name", text_of(c, "name")},
                {"kind", text_of(c, "kind")},
                {"parent", "node/" + expanded},
                {"mailboxDepth", depth(c)}};
    json detail = json::object(); // what the actor said of its state
    for (const auto& [key, value] : c.items())
      if (key != "name" && key != "kind" && key != "mailboxDepth" && key != "messages")
        detail[key] = value;
    row["detail"] = std::move(detail);
    add_message_columns(row, c);
    rows.push_back(std::move(row));
  }
  std::stable_sort(rows.begin(), rows.end(), [](const json& a, const json& b) {
    return a["mailboxDepth"].get<std::uint64_t>()
           > b["mailboxDepth"].get<std::uint64_t>();
  });
  return {{"actors", rows}};
}

namespace {

// A decision row in one line: the fields a person reads first, in this
// order, then "…" for the rest (the whole body is in the row anyway).
std::string decision_summary(const json& body, const std::string& fallback) {
  static constexpr std::array<const char*, 12> keys{
    "phase",  "decision", "kind",    "group",   "cr",        "drain",
    "reason", "why",      "verdict", "outcome", "evictions", "activeEvents"};
  if (!body.is_object())
    return fallback.substr(0, 200);
  std::string out;
  for (const char* key : keys) {
    auto it = body.find(key);
    if (it == body.end() || it->is_null() || it->is_object() || it->is_array())
      continue;
    auto value = it->is_string() ? it->get<std::string>() : it->dump();
    if (value.empty())
      continue;
    out += (out.empty() ? "" : " ") + std::string(key) + "=" + value;
  }
  if (out.size() > 200)
    out = out.substr(0, 197) + "...";
  return out.empty() ? fallback.substr(0, 200) : out;
}

// Everything row_json shows of a row but its body (`body`, parsed).
json row_head(const journal_record& row, const json& body) {
  std::string problem;
  const auto summary =
    row.kind == "event" ? summarise_row(row, problem) : decision_summary(body, row.body);
  json out = {{"seq", row.seq},
              {"at", format_rfc3339(row.recorded_at)},
              {"node", row.node},
              {"kind", row.kind},
              {"summary", summary}};
  if (row.kind == "event" && body.is_object())
    out["check"] = body.value("checkName", "");
  return out;
}

} // namespace

json row_json(const journal_record& row) {
  auto body = json::parse(row.body, nullptr, false);
  auto out = row_head(row, body);
  out["body"] = body.is_discarded() ? json(row.body) : std::move(body);
  return out;
}

bool row_filter::matches(const journal_record& row) const {
  if (!node.empty() && row.node != node)
    return false;
  if (!kind.empty() && row.kind != kind)
    return false;
  if (check.empty())
    return true;
  if (row.kind != "event")
    return false;
  auto body = json::parse(row.body, nullptr, false);
  return body.is_object() && body.value("checkName", "") == check;
}

namespace {

struct query_param {
  std::string key;
  std::string value;
};

// The query's key=value pairs, decoded, in their order; empty pairs skipped.
std::vector<query_param> query_params(std::string_view query) {
  std::vector<query_param> out;
  while (!query.empty()) {
    auto amp = query.find('&');
    auto pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (pair.empty())
      continue;
    auto eq = pair.find('=');
    out.push_back({url_decode(pair.substr(0, eq)), eq == std::string_view::npos
                                                     ? std::string{}
                                                     : url_decode(pair.substr(eq + 1))});
  }
  return out;
}

// The parameter as a whole number from `min` to `max`; else a failure naming it.
template <class Int>
status read_number(const query_param& p, long long min, long long max, Int& into) {
  long long n = min - 1;
  auto [end, ec] = std::from_chars(p.value.data(), p.value.data() + p.value.size(), n);
  if (ec != std::errc{} || end != p.value.data() + p.value.size() || n < min || n > max)
    return failure{p.key, "expected a whole number from " + std::to_string(min) + " to "
                            + std::to_string(max)};
  into = static_cast<Int>(n);
  return ok();
}

} // namespace

expected<std::string> parse_actors_request(std::string_view query) {
  std::string node;
  for (const auto& p : query_params(query)) {
    if (p.key != "node")
      return failure{p.key, "is not a parameter here (node)"};
    node = p.value;
  }
  return node;
}

expected<trace_request> parse_trace_request(std::string_view query) {
  trace_request out;
  for (const auto& p : query_params(query)) {
    if (p.key == "node")
      out.node = p.value;
    else if (p.key == "seconds") {
      if (auto st = read_number(p, 1, 300, out.seconds); !st)
        return st.error();
    } else if (p.key == "max") {
      if (auto st = read_number(p, 1, 10000, out.max_messages); !st)
        return st.error();
    } else
      return failure{p.key, "is not a parameter here (node, seconds, max)"};
  }
  if (out.node.empty())
    return failure{"node", "name the node actor to trace"};
  return out;
}

expected<journal_request> parse_journal_request(std::string_view query) {
  journal_request out;
  for (const auto& p : query_params(query)) {
    if (p.key == "node")
      out.filter.node = p.value;
    else if (p.key == "kind")
      out.filter.kind = p.value;
    else if (p.key == "check")
      out.filter.check = p.value;
    else if (p.key == "since") {
      if (auto st =
            read_number(p, 0, std::numeric_limits<std::int64_t>::max(), out.after_seq);
          !st)
        return st.error();
    } else if (p.key == "limit") {
      if (auto st = read_number(p, 0, 10000, out.limit); !st)
        return st.error();
    } else if (p.key == "from" || p.key == "to" || p.key == "at") {
      auto t = parse_rfc3339(p.value);
      if (!t)
        return failure{p.key, "expected an RFC 3339 time (2026-11-26T04:00:00Z)"};
      (p.key == "from" ? out.from : out.to) = *t;
    } else
      return failure{p.key, "is not a parameter here (node, kind, check, since, from, "
                            "to, at, limit)"};
  }
  return out;
}

std::string sse_row(const journal_record& row) {
  auto body = json::parse(row.body, nullptr, false);
  auto out = row_head(row, body);
  // The body goes in as the journal holds it when that is one line of JSON
  // (vigil writes its bodies compact): not built and printed a second time.
  // Anything else is printed from the parse, invalid UTF-8 replaced.
  const auto printed = [](const json& j) {
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
  };
  std::string data;
  if (body.is_object() && row.body.find_first_of("\r\n") == std::string::npos) {
    data = printed(out);
    data.pop_back(); // its closing brace
    data += ",\"body\":" + row.body + "}";
  } else {
    out["body"] = body.is_discarded() ? json(row.body) : std::move(body);
    data = printed(out);
  }
  return "id: " + std::to_string(row.seq) + "\nevent: row\ndata: " + data + "\n\n";
}

std::string sse_skipped(std::uint64_t skipped) {
  return "event: skipped\ndata: " + json{{"skipped", skipped}}.dump() + "\n\n";
}

std::string url_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  auto hex = [](char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
      out += ' ';
    } else if (text[i] == '%' && i + 2 < text.size() && hex(text[i + 1]) >= 0
               && hex(text[i + 2]) >= 0) {
      out += static_cast<char>(hex(text[i + 1]) * 16 + hex(text[i + 2]));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

} // namespace vigil::console
