#include "actors/control/ingest/alertmanager.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace vigil::control {

namespace {

using json = nlohmann::json;

// Labels kept as metadata, at most: the event's own bound is 64 entries.
constexpr std::size_t max_label_metadata = 48;

std::string lowercase(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

const std::string* string_at(const json& object, const char* key) {
  if (!object.is_object())
    return nullptr;
  auto i = object.find(key);
  return i != object.end() && i->is_string() ? &i->get_ref<const std::string&>()
                                             : nullptr;
}

const std::string* first_label(const json& labels, const std::vector<std::string>& keys) {
  for (const auto& key : keys)
    if (const auto* value = string_at(labels, key.c_str()); value && !value->empty())
      return value;
  return nullptr;
}

std::string names(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys)
    out += (out.empty() ? "" : ", ") + k;
  return out;
}

// One alert → one event, or why not.
expected<health_event> alert_event(const json& alert, const alertmanager_mapping& mapping,
                                   const decode_limits& limits) {
  if (!alert.is_object())
    return failure{"alert", "not an object"};
  const auto& labels = alert.contains("labels") ? alert["labels"] : json::object();
  const auto& annotations =
    alert.contains("annotations") ? alert["annotations"] : json::object();
  if (!labels.is_object())
    return failure{"labels", "not an object"};
  const auto* status = string_at(alert, "status");
  if (status == nullptr || (*status != "firing" && *status != "resolved"))
    return failure{"status", "must be \"firing\" or \"resolved\""};
  const auto* alertname = string_at(labels, "alertname");
  if (alertname == nullptr || alertname->empty())
    return failure{"labels.alertname", "missing or empty"};
  const auto* node = first_label(labels, mapping.node_labels);
  if (node == nullptr)
    return failure{"labels", "no node label (" + names(mapping.node_labels) + ")"};

  health_event e;
  e.agent = mapping.agent;
  const auto* component = string_at(labels, "component_class");
  e.component_class = component != nullptr ? *component : mapping.component_class;
  e.check_name = *alertname;
  e.node_name = *node;
  e.is_healthy = *status == "resolved";
  if (const auto* gpu = first_label(labels, mapping.gpu_labels))
    e.entities.push_back({"GPU_UUID", *gpu});
  if (const auto* pci = first_label(labels, mapping.pci_labels))
    e.entities.push_back({"PCI", lowercase(*pci)});
  for (const char* key : {"summary", "description", "message"})
    if (const auto* text = string_at(annotations, key); text && !text->empty()) {
      e.message = *text;
      break;
    }
  const char* time_key = e.is_healthy ? "endsAt" : "startsAt";
  if (const auto* at = string_at(alert, time_key)) {
    auto t = parse_rfc3339(*at);
    if (!t)
      return failure{time_key, t.error().what};
    e.generated = *t;
  }
  if (!e.is_healthy) {
    e.error_codes = {*alertname};
    e.action = mapping.default_action;
    const auto* named = string_at(labels, "vigil_recommended_action");
    if (named == nullptr)
      named = string_at(annotations, "vigil_recommended_action");
    if (named != nullptr) {
      auto action = parse_recommended_action(*named);
      if (!action)
        return failure{"vigil_recommended_action", "unknown action \"" + *named + "\""};
      e.action = *action;
    }
    const auto* severity = string_at(labels, "severity");
    e.is_fatal = e.action != recommended_action::none
                 || (severity != nullptr
                     && std::find(mapping.fatal_severities.begin(),
                                  mapping.fatal_severities.end(), *severity)
                          != mapping.fatal_severities.end());
  }
  std::size_t kept = 0;
  for (const auto& [key, value] : labels.items())
    if (value.is_string() && kept++ < max_label_metadata)
      e.metadata[key] = value.get<std::string>();
  const auto* fingerprint = string_at(alert, "fingerprint");
  if (fingerprint != nullptr && !fingerprint->empty()) {
    const auto* starts = string_at(alert, "startsAt");
    e.id = "alertmanager-" + *fingerprint + "-" + *status + "-"
           + (starts != nullptr ? *starts : "");
  }
  // The event's own bounds and checks, exactly as a POSTed event gets them.
  auto checked = decode_health_event(encode_health_event(e), limits);
  if (!checked)
    return checked.error();
  if (checked->id.empty())
    checked->id = derive_event_id(*checked);
  return checked;
}

} // namespace

expected<std::vector<ingest_item>>
parse_alertmanager_body(std::string_view body, std::string_view content_type,
                        const alertmanager_mapping& mapping,
                        const ingest_limits& limits) {
  if (body.size() > limits.max_body_bytes)
    return failure{std::string(body_size_where),
                   std::to_string(body.size()) + " bytes, over the limit of "
                     + std::to_string(limits.max_body_bytes)};
  const auto media = lowercase(content_type.substr(0, content_type.find(';')));
  if (media.find_first_not_of(' ') != std::string::npos
      && media.find("application/json") == std::string::npos)
    return failure{std::string(content_type_where),
                   "Alertmanager sends application/json, not \"" + media + "\""};
  auto doc = json::parse(body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    return failure{std::string(body_where),
                   "not an Alertmanager webhook payload (JSON object)"};
  auto alerts = doc.find("alerts");
  if (alerts == doc.end() || !alerts->is_array())
    return failure{std::string(body_where), "alerts: missing or not a list"};
  if (alerts->empty())
    return failure{std::string(body_where), "no alerts"};
  if (alerts->size() > limits.max_events_per_request)
    return failure{std::string(event_count_where),
                   "over the limit of " + std::to_string(limits.max_events_per_request)
                     + " events per request"};
  std::vector<ingest_item> items;
  for (const auto& alert : *alerts) {
    ingest_item item;
    item.line = items.size() + 1;
    auto event = alert_event(alert, mapping, limits.event);
    if (event) {
      item.event = std::move(*event);
    } else {
      const auto* name = alert.is_object() && alert.contains("labels")
                           ? string_at(alert["labels"], "alertname")
                           : nullptr;
      item.error = "alert " + std::to_string(item.line)
                   + (name != nullptr ? " (" + *name + ")" : std::string()) + ": "
                   + event.error().to_string();
    }
    items.push_back(std::move(item));
  }
  return items;
}

} // namespace vigil::control
