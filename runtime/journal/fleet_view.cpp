#include "runtime/journal/fleet_view.hpp"

#include <nlohmann/json.hpp>

namespace vigil {

namespace {

using json = nlohmann::json;

// quarantine_rules' record key: one per agent, check, entity and error code.
std::string key_of(const std::string& agent, const std::string& check, const entity& e,
                   const std::string& code) {
  return agent + "|" + check + "|" + e.type + "|" + e.value + "|" + code;
}

} // namespace

status fleet_view::apply(const journal_record& row) {
  last_seq_ = std::max(last_seq_, row.seq);
  if (row.kind != "event")
    return ok();
  auto event = decode_health_event(row.body);
  if (!event)
    return event.error();
  apply_event(*event, row.seq);
  return ok();
}

void fleet_view::apply_event(const health_event& e, std::int64_t seq) {
  if (e.strategy == processing_strategy::store_only)
    return;
  auto& active = nodes_[e.node_name];
  if (e.is_healthy) {
    for (auto i = active.begin(); i != active.end();)
      i = healthy_event_clears(e, i->second.agent, i->second.check_name,
                               i->second.subject, {i->second.error_code})
            ? active.erase(i)
            : std::next(i);
  } else {
    const auto code = e.error_codes.empty() ? std::string() : e.error_codes.front();
    auto subjects = e.entities.empty() ? std::vector<entity>{{}} : e.entities;
    for (const auto& ent : subjects)
      active[key_of(e.agent, e.check_name, ent, code)] =
        active_event{e.agent, e.check_name, ent, code, e.message, e.action, seq};
  }
  if (active.empty())
    nodes_.erase(e.node_name);
}

std::vector<active_event> fleet_view::active(const std::string& node) const {
  std::vector<active_event> out;
  auto i = nodes_.find(node);
  if (i != nodes_.end())
    for (const auto& [key, event] : i->second)
      out.push_back(event);
  return out;
}

std::vector<std::string> fleet_view::nodes() const {
  std::vector<std::string> out;
  for (const auto& [node, events] : nodes_)
    out.push_back(node);
  return out;
}

std::string fleet_view::save() const {
  json nodes = json::object();
  for (const auto& [node, events] : nodes_) {
    auto list = json::array();
    for (const auto& [key, e] : events)
      list.push_back({{"agent", e.agent},
                      {"checkName", e.check_name},
                      {"entityType", e.subject.type},
                      {"entityValue", e.subject.value},
                      {"errorCode", e.error_code},
                      {"message", e.message},
                      {"recommendedAction", std::string(to_string(e.action))},
                      {"seq", e.seq}});
    nodes[node] = std::move(list);
  }
  return json{{"lastSeq", last_seq_}, {"nodes", std::move(nodes)}}.dump();
}

expected<fleet_view> fleet_view::load(const std::string& text) {
  try {
    auto doc = json::parse(text);
    fleet_view view;
    view.last_seq_ = doc.at("lastSeq").get<std::int64_t>();
    for (const auto& [node, list] : doc.at("nodes").items())
      for (const auto& item : list) {
        active_event e;
        e.agent = item.at("agent").get<std::string>();
        e.check_name = item.at("checkName").get<std::string>();
        e.subject = {item.at("entityType").get<std::string>(),
                     item.at("entityValue").get<std::string>()};
        e.error_code = item.at("errorCode").get<std::string>();
        e.message = item.at("message").get<std::string>();
        auto action =
          parse_recommended_action(item.at("recommendedAction").get<std::string>());
        if (!action)
          return failure{"snapshot", "unknown recommendedAction"};
        e.action = *action;
        e.seq = item.at("seq").get<std::int64_t>();
        view.nodes_[node][key_of(e.agent, e.check_name, e.subject, e.error_code)] = e;
      }
    return view;
  } catch (const json::exception& e) {
    return failure{"snapshot", std::string("does not decode: ") + e.what()};
  }
}

expected<rebuild_result>
rebuild_fleet_view(journal_store& store, std::optional<wall_time> at, bool use_snapshot) {
  rebuild_result result;
  if (use_snapshot) {
    auto snapshot = store.latest_snapshot();
    if (!snapshot)
      return snapshot.error();
    if (*snapshot && (!at || (*snapshot)->taken_at <= *at)) {
      auto loaded = fleet_view::load((*snapshot)->body);
      if (!loaded)
        return failure{"snapshot at seq " + std::to_string((*snapshot)->seq),
                       loaded.error().what};
      result.view = std::move(*loaded);
      result.snapshot_seq = (*snapshot)->seq;
    }
  }
  journal_query query;
  query.after_seq = result.snapshot_seq;
  query.until = at;
  query.limit = 10000;
  for (;;) {
    auto rows = store.read(query);
    if (!rows)
      return rows.error();
    for (const auto& row : *rows) {
      if (auto st = result.view.apply(row); !st)
        result.undecodable.push_back({row.seq, st.error().to_string()});
      ++result.rows_applied;
    }
    if (rows->size() < query.limit)
      break;
    query.after_seq = rows->back().seq;
  }
  return result;
}

std::string summarise_row(const journal_record& row, std::string& problem) {
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

} // namespace vigil
