#include "actors/control/remediation/remediation_state.hpp"

#include <utility>

#include <nlohmann/json.hpp>

namespace vigil::control {

namespace {

using json = nlohmann::json;

constexpr const char* groups_key = "equivalenceGroups";

expected<std::string> string_field(const json& obj, const char* key,
                                   const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end())
    return failure{where + "." + key, "missing"};
  if (!it->is_string())
    return failure{where + "." + key, "must be a string"};
  return it->get<std::string>();
}

expected<remediation_record> decode_record(const json& entry, const std::string& where) {
  if (!entry.is_object())
    return failure{where, "must be an object"};
  auto kind_text = string_field(entry, "kind", where);
  if (!kind_text)
    return kind_text.error();
  auto kind = parse_remediation_kind(*kind_text);
  if (!kind)
    return failure{where + ".kind", "unknown kind \"" + *kind_text + "\""};
  auto cr = string_field(entry, "maintenanceCR", where);
  if (!cr)
    return cr.error();
  auto created_text = string_field(entry, "createdAt", where);
  if (!created_text)
    return created_text.error();
  auto created = parse_rfc3339(*created_text);
  if (!created)
    return failure{where + ".createdAt", created.error().what};
  return remediation_record{*kind, std::move(*cr), *created};
}

} // namespace

std::string encode_remediation_state(const remediation_state& state) {
  json groups = json::object();
  for (const auto& [group, record] : state.groups)
    groups[group] = json{{"kind", to_string(record.kind)},
                         {"maintenanceCR", record.maintenance_cr},
                         {"createdAt", format_rfc3339(record.created_at)}};
  json doc;
  doc[groups_key] = std::move(groups);
  return doc.dump();
}

expected<remediation_state> decode_remediation_state(std::string_view text) {
  remediation_state state;
  if (text.empty())
    return state;
  auto doc = json::parse(text, nullptr, false);
  if (doc.is_discarded())
    return failure{std::string{remediation_state_annotation}, "not valid JSON"};
  if (!doc.is_object())
    return failure{std::string{remediation_state_annotation}, "must be a JSON object"};
  auto it = doc.find(groups_key);
  if (it == doc.end())
    return state;
  if (!it->is_object())
    return failure{std::string{groups_key}, "must be an object"};
  for (const auto& [group, entry] : it->items()) {
    if (group.empty())
      return failure{std::string{groups_key}, "empty group name"};
    auto record = decode_record(entry, std::string{groups_key} + "." + group);
    if (!record)
      return record.error();
    state.groups.emplace(group, std::move(*record));
  }
  return state;
}

void remember(remediation_state& state, const std::string& group,
              remediation_record record) {
  state.groups[group] = std::move(record);
}

const remediation_record* find_group(const remediation_state& state,
                                     std::string_view group) {
  auto it = state.groups.find(std::string{group});
  return it == state.groups.end() ? nullptr : &it->second;
}

} // namespace vigil::control
