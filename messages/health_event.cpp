#include "messages/health_event.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

namespace vigil {

using json = nlohmann::json;

namespace {

constexpr std::array<std::pair<recommended_action, std::string_view>, 10> action_names{{
  {recommended_action::none, "NONE"},
  {recommended_action::component_reset, "COMPONENT_RESET"},
  {recommended_action::contact_support, "CONTACT_SUPPORT"},
  {recommended_action::run_fielddiag, "RUN_FIELDDIAG"},
  {recommended_action::restart_vm, "RESTART_VM"},
  {recommended_action::restart_bm, "RESTART_BM"},
  {recommended_action::replace_vm, "REPLACE_VM"},
  {recommended_action::run_dcgmeud, "RUN_DCGMEUD"},
  {recommended_action::custom, "CUSTOM"},
  {recommended_action::unknown, "UNKNOWN"},
}};

constexpr std::array<std::pair<processing_strategy, std::string_view>, 3> strategy_names{{
  {processing_strategy::execute_remediation, "EXECUTE_REMEDIATION"},
  {processing_strategy::store_only, "STORE_ONLY"},
  {processing_strategy::store_and_analyse, "STORE_AND_ANALYSE"},
}};

// "nodeName", "node_name" and "nodename" all become "nodename".
std::string normalise_key(std::string_view key) {
  std::string out;
  out.reserve(key.size());
  for (char c : key)
    if (c != '_')
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view type_name(const json& j) {
  switch (j.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::binary: return "binary";
    case json::value_t::discarded: return "nothing";
    default: return "a number";
  }
}

failure wrong_type(std::string where, std::string_view wanted, const json& got) {
  return failure{std::move(where), "expected " + std::string(wanted) + ", got "
                                     + std::string(type_name(got))};
}

// Parsing state for one document: the limits and the first failure seen.
class event_reader {
public:
  explicit event_reader(const decode_limits& limits) : limits_(limits) {}

  status read(const json& doc, health_event& out);

private:
  status read_string(const json& j, const std::string& where, std::string& out,
                     size_t max_bytes) const {
    if (!j.is_string())
      return wrong_type(where, "a string", j);
    const auto& s = j.get_ref<const std::string&>();
    if (s.size() > max_bytes)
      return failure{where, "is " + std::to_string(s.size())
                              + " bytes, over the limit of " + std::to_string(max_bytes)};
    out = s;
    return ok();
  }

  status read_string(const json& j, const std::string& where, std::string& out) const {
    return read_string(j, where, out, limits_.max_string_bytes);
  }

  static status read_bool(const json& j, const std::string& where, bool& out) {
    if (!j.is_boolean())
      return wrong_type(where, "a boolean", j);
    out = j.get<bool>();
    return ok();
  }

  status read_action(const json& j, const std::string& where,
                     recommended_action& out) const;
  status read_strategy(const json& j, const std::string& where,
                       processing_strategy& out) const;
  status read_error_codes(const json& j, const std::string& where,
                          std::vector<std::string>& out) const;
  status read_entities(const json& j, const std::string& where,
                       std::vector<entity>& out) const;
  status read_metadata(const json& j, const std::string& where,
                       std::map<std::string, std::string>& out) const;
  static status read_timestamp(const json& j, const std::string& where,
                               std::optional<wall_time>& out);
  static status read_override(const json& j, const std::string& where,
                              std::optional<stage_override>& out);

  const decode_limits& limits_;
};

status event_reader::read_action(const json& j, const std::string& where,
                                 recommended_action& out) const {
  std::optional<recommended_action> parsed;
  if (j.is_number_integer())
    parsed = recommended_action_from_number(j.get<long long>());
  else if (j.is_string())
    parsed = parse_recommended_action(j.get_ref<const std::string&>());
  else
    return wrong_type(where, "an action name or number", j);
  if (!parsed)
    return failure{where, "unknown action " + j.dump()};
  out = *parsed;
  return ok();
}

status event_reader::read_strategy(const json& j, const std::string& where,
                                   processing_strategy& out) const {
  std::optional<processing_strategy> parsed;
  if (j.is_number_integer())
    parsed = processing_strategy_from_number(j.get<long long>());
  else if (j.is_string())
    parsed = parse_processing_strategy(j.get_ref<const std::string&>());
  else
    return wrong_type(where, "a strategy name or number", j);
  if (!parsed)
    return failure{where, "unknown processing strategy " + j.dump()};
  out = *parsed;
  return ok();
}

status event_reader::read_error_codes(const json& j, const std::string& where,
                                      std::vector<std::string>& out) const {
  if (j.is_null())
    return ok();
  if (!j.is_array())
    return wrong_type(where, "an array of strings", j);
  if (j.size() > limits_.max_error_codes)
    return failure{where, "has " + std::to_string(j.size()) + " codes, over the limit of "
                            + std::to_string(limits_.max_error_codes)};
  for (size_t i = 0; i < j.size(); ++i) {
    std::string code;
    if (auto st = read_string(j[i], where + "[" + std::to_string(i) + "]", code); !st)
      return st;
    out.push_back(std::move(code));
  }
  return ok();
}

status event_reader::read_entities(const json& j, const std::string& where,
                                   std::vector<entity>& out) const {
  if (j.is_null())
    return ok();
  if (!j.is_array())
    return wrong_type(where, "an array of entities", j);
  if (j.size() > limits_.max_entities)
    return failure{where, "has " + std::to_string(j.size())
                            + " entities, over the limit of "
                            + std::to_string(limits_.max_entities)};
  for (size_t i = 0; i < j.size(); ++i) {
    const auto path = where + "[" + std::to_string(i) + "]";
    const auto& item = j[i];
    if (!item.is_object())
      return wrong_type(path, "an object", item);
    entity e;
    bool has_type = false;
    bool has_value = false;
    for (const auto& [key, value] : item.items()) {
      const auto name = normalise_key(key);
      if (name == "entitytype") {
        if (auto st = read_string(value, path + ".entityType", e.type); !st)
          return st;
        has_type = true;
      } else if (name == "entityvalue") {
        if (auto st = read_string(value, path + ".entityValue", e.value); !st)
          return st;
        has_value = true;
      } else {
        return failure{path + "." + key, "unknown field"};
      }
    }
    if (!has_type || e.type.empty())
      return failure{path + ".entityType", "missing or empty"};
    if (!has_value || e.value.empty())
      return failure{path + ".entityValue", "missing or empty"};
    out.push_back(std::move(e));
  }
  return ok();
}

status event_reader::read_metadata(const json& j, const std::string& where,
                                   std::map<std::string, std::string>& out) const {
  if (j.is_null())
    return ok();
  if (!j.is_object())
    return wrong_type(where, "an object of strings", j);
  if (j.size() > limits_.max_metadata_entries)
    return failure{where, "has " + std::to_string(j.size())
                            + " entries, over the limit of "
                            + std::to_string(limits_.max_metadata_entries)};
  for (const auto& [key, value] : j.items()) {
    if (key.size() > limits_.max_string_bytes)
      return failure{where, "a key is over the limit of "
                              + std::to_string(limits_.max_string_bytes) + " bytes"};
    if (auto st = read_string(value, where + "." + key, out[key]); !st)
      return st;
  }
  return ok();
}

status event_reader::read_timestamp(const json& j, const std::string& where,
                                    std::optional<wall_time>& out) {
  if (j.is_null())
    return ok();
  if (j.is_string()) {
    auto parsed = parse_rfc3339(j.get_ref<const std::string&>());
    if (!parsed)
      return failure{where, parsed.error().what};
    out = *parsed;
    return ok();
  }
  if (!j.is_object())
    return wrong_type(where, "an RFC 3339 string or {seconds, nanos}", j);
  long long seconds = 0;
  long long nanos = 0;
  for (const auto& [key, value] : j.items()) {
    const auto name = normalise_key(key);
    // protobuf's JSON mapping writes int64 as a string; accept both.
    long long* target = name == "seconds" ? &seconds : name == "nanos" ? &nanos : nullptr;
    if (target == nullptr)
      return failure{where + "." + key, "unknown field"};
    if (value.is_number_integer()) {
      *target = value.get<long long>();
    } else if (value.is_string()) {
      const auto& s = value.get_ref<const std::string&>();
      auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *target);
      if (ec != std::errc{} || end != s.data() + s.size())
        return failure{where + "." + key, "not an integer: " + value.dump()};
    } else {
      return wrong_type(where + "." + key, "an integer", value);
    }
  }
  if (nanos < 0 || nanos >= 1'000'000'000)
    return failure{where + ".nanos", "must be in [0, 999999999]"};
  // 0001-01-01 .. 9999-12-31, protobuf Timestamp's range.
  if (seconds < -62135596800LL || seconds > 253402300799LL)
    return failure{where + ".seconds", "out of range"};
  out = from_unix(seconds, static_cast<std::int32_t>(nanos));
  return ok();
}

status event_reader::read_override(const json& j, const std::string& where,
                                   std::optional<stage_override>& out) {
  if (j.is_null())
    return ok();
  if (!j.is_object())
    return wrong_type(where, "an object {force, skip}", j);
  stage_override o;
  for (const auto& [key, value] : j.items()) {
    const auto name = normalise_key(key);
    bool* target = name == "force" ? &o.force : name == "skip" ? &o.skip : nullptr;
    if (target == nullptr)
      return failure{where + "." + key, "unknown field"};
    if (auto st = read_bool(value, where + "." + key, *target); !st)
      return st;
  }
  if (o.force && o.skip)
    return failure{where, "force and skip are both set"};
  out = o;
  return ok();
}

status event_reader::read(const json& doc, health_event& e) {
  if (!doc.is_object())
    return wrong_type("", "a JSON object", doc);
  std::set<std::string> seen;
  for (const auto& [key, value] : doc.items()) {
    const auto name = normalise_key(key);
    if (!seen.insert(name).second)
      return failure{key, "duplicate key (the same field under another spelling)"};
    status st = ok();
    if (name == "id")
      st = read_string(value, key, e.id);
    else if (name == "version")
      st = value.is_number_unsigned() ? ok() : wrong_type(key, "a version number", value);
    else if (name == "agent")
      st = read_string(value, key, e.agent);
    else if (name == "componentclass")
      st = read_string(value, key, e.component_class);
    else if (name == "checkname")
      st = read_string(value, key, e.check_name);
    else if (name == "isfatal")
      st = read_bool(value, key, e.is_fatal);
    else if (name == "ishealthy")
      st = read_bool(value, key, e.is_healthy);
    else if (name == "message")
      st = read_string(value, key, e.message, limits_.max_message_bytes);
    else if (name == "recommendedaction")
      st = read_action(value, key, e.action);
    else if (name == "customrecommendedaction")
      st = read_string(value, key, e.custom_action);
    else if (name == "errorcode")
      st = read_error_codes(value, key, e.error_codes);
    else if (name == "entitiesimpacted")
      st = read_entities(value, key, e.entities);
    else if (name == "metadata")
      st = read_metadata(value, key, e.metadata);
    else if (name == "generatedtimestamp")
      st = read_timestamp(value, key, e.generated);
    else if (name == "nodename")
      st = read_string(value, key, e.node_name);
    else if (name == "quarantineoverrides")
      st = read_override(value, key, e.quarantine_overrides);
    else if (name == "drainoverrides")
      st = read_override(value, key, e.drain_overrides);
    else if (name == "processingstrategy")
      st = read_strategy(value, key, e.strategy);
    else
      st = failure{key, "unknown field"};
    if (!st)
      return st;
  }
  if (e.node_name.empty())
    return failure{"nodeName", "missing or empty"};
  if (e.agent.empty())
    return failure{"agent", "missing or empty"};
  if (e.component_class.empty())
    return failure{"componentClass", "missing or empty"};
  if (e.check_name.empty())
    return failure{"checkName", "missing or empty"};
  return ok();
}

// Builds the DOM like json::parse and notes the first key that appears twice
// in one object, which nlohmann::json would otherwise overwrite silently.
// (json_sax_dom_parser is nlohmann's own DOM builder; the SAX route is about
// twice as fast as a parser callback.)
class duplicate_checking_parser : public nlohmann::detail::json_sax_dom_parser<json> {
public:
  using base = nlohmann::detail::json_sax_dom_parser<json>;

  explicit duplicate_checking_parser(json& result) : base(result, true) {}

  bool start_object(std::size_t n) {
    open_.emplace_back();
    return base::start_object(n);
  }

  bool end_object() {
    open_.pop_back();
    return base::end_object();
  }

  bool key(std::string& name) {
    auto& keys = open_.back();
    if (first_duplicate_.empty()
        && std::find(keys.begin(), keys.end(), name) != keys.end())
      first_duplicate_ = name;
    keys.push_back(name);
    return base::key(name);
  }

  const std::string& first_duplicate() const { return first_duplicate_; }

private:
  std::vector<std::vector<std::string>> open_; // keys of each open object
  std::string first_duplicate_;
};

std::string strip_exception_prefix(const std::string& what) {
  // "[json.exception.parse_error.101] parse error at line 1, …" → "parse error at …"
  auto pos = what.find("] ");
  return pos == std::string::npos ? what : what.substr(pos + 2);
}

json encode_override(const stage_override& o) {
  return json{{"force", o.force}, {"skip", o.skip}};
}

} // namespace

std::string_view to_string(recommended_action action) {
  for (const auto& [value, name] : action_names)
    if (value == action)
      return name;
  return "UNKNOWN";
}

std::optional<recommended_action> parse_recommended_action(std::string_view text) {
  for (const auto& [value, name] : action_names)
    if (name == text)
      return value;
  long long number = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (ec == std::errc{} && end == text.data() + text.size())
    return recommended_action_from_number(number);
  return std::nullopt;
}

std::optional<recommended_action> recommended_action_from_number(long long number) {
  for (const auto& [value, name] : action_names)
    if (static_cast<long long>(value) == number)
      return value;
  return std::nullopt;
}

std::string_view to_string(processing_strategy strategy) {
  for (const auto& [value, name] : strategy_names)
    if (value == strategy)
      return name;
  return "EXECUTE_REMEDIATION";
}

std::optional<processing_strategy> parse_processing_strategy(std::string_view text) {
  // protobuf's zero value means "not set", which is the default strategy.
  if (text == "UNSPECIFIED")
    return processing_strategy::execute_remediation;
  for (const auto& [value, name] : strategy_names)
    if (name == text)
      return value;
  long long number = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (ec == std::errc{} && end == text.data() + text.size())
    return processing_strategy_from_number(number);
  return std::nullopt;
}

std::optional<processing_strategy> processing_strategy_from_number(long long number) {
  switch (number) {
    case 0: // UNSPECIFIED: the platform connector's default
    case 1: return processing_strategy::execute_remediation;
    case 2: return processing_strategy::store_only;
    case 3: return processing_strategy::store_and_analyse;
    default: return std::nullopt;
  }
}

bool healthy_event_clears(const health_event& healthy, std::string_view agent,
                          std::string_view check, const entity& subject,
                          const std::vector<std::string>& codes) {
  if (healthy.agent != agent || healthy.check_name != check)
    return false;
  if (!healthy.entities.empty()
      && std::find(healthy.entities.begin(), healthy.entities.end(), subject)
           == healthy.entities.end())
    return false;
  if (healthy.error_codes.empty())
    return true;
  return std::any_of(codes.begin(), codes.end(), [&](const std::string& code) {
    return std::find(healthy.error_codes.begin(), healthy.error_codes.end(), code)
           != healthy.error_codes.end();
  });
}

bool operator==(const health_event& a, const health_event& b) {
  return a.id == b.id && a.agent == b.agent && a.component_class == b.component_class
         && a.check_name == b.check_name && a.is_fatal == b.is_fatal
         && a.is_healthy == b.is_healthy && a.message == b.message && a.action == b.action
         && a.custom_action == b.custom_action && a.error_codes == b.error_codes
         && a.entities == b.entities && a.metadata == b.metadata
         && a.generated == b.generated && a.node_name == b.node_name
         && a.quarantine_overrides == b.quarantine_overrides
         && a.drain_overrides == b.drain_overrides && a.strategy == b.strategy;
}

expected<health_event> decode_health_event(std::string_view text,
                                           const decode_limits& limits) {
  if (text.size() > limits.max_event_bytes)
    return failure{"", "event is " + std::to_string(text.size())
                         + " bytes, over the limit of "
                         + std::to_string(limits.max_event_bytes)};
  json doc;
  duplicate_checking_parser parser{doc};
  try {
    json::sax_parse(text.begin(), text.end(), &parser);
  } catch (const json::exception& e) {
    return failure{"", "invalid JSON: " + strip_exception_prefix(e.what())};
  }
  if (!parser.first_duplicate().empty())
    return failure{parser.first_duplicate(), "duplicate key"};
  health_event event;
  event_reader reader{limits};
  if (auto st = reader.read(doc, event); !st)
    return st.error();
  return event;
}

namespace {

// `text` as the encoder writes it (an invalid UTF-8 sequence becomes U+FFFD,
// three bytes), cut to at most `limit` bytes at a character boundary and
// ended with "…".
void fit_string(std::string& text, std::size_t limit) {
  if (std::any_of(text.begin(), text.end(),
                  [](char c) { return static_cast<unsigned char>(c) >= 0x80; }))
    text = json::parse(json(text).dump(-1, ' ', false, json::error_handler_t::replace))
             .get<std::string>();
  if (text.size() <= limit)
    return;
  static constexpr std::string_view ellipsis = "\xE2\x80\xA6";
  if (limit < ellipsis.size()) {
    text.clear();
    return;
  }
  std::size_t cut = limit - ellipsis.size();
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80)
    --cut; // not inside a multi-byte character
  text.resize(cut);
  text += ellipsis;
}

} // namespace

health_event fit_to_limits(health_event e, const decode_limits& limits) {
  fit_string(e.message, limits.max_message_bytes);
  for (auto* field : {&e.id, &e.agent, &e.component_class, &e.check_name,
                      &e.custom_action, &e.node_name})
    fit_string(*field, limits.max_string_bytes);
  if (e.error_codes.size() > limits.max_error_codes)
    e.error_codes.resize(limits.max_error_codes);
  for (auto& code : e.error_codes)
    fit_string(code, limits.max_string_bytes);
  if (e.entities.size() > limits.max_entities)
    e.entities.resize(limits.max_entities);
  for (auto& entity : e.entities) {
    fit_string(entity.type, limits.max_string_bytes);
    fit_string(entity.value, limits.max_string_bytes);
  }
  std::map<std::string, std::string> metadata;
  for (auto& [key, value] : e.metadata) {
    if (metadata.size() == limits.max_metadata_entries)
      break;
    auto k = key;
    auto v = value;
    fit_string(k, limits.max_string_bytes);
    fit_string(v, limits.max_string_bytes);
    metadata.emplace(std::move(k), std::move(v));
  }
  e.metadata = std::move(metadata);
  while (encode_health_event(e).size() > limits.max_event_bytes) {
    if (!e.metadata.empty())
      e.metadata.erase(std::prev(e.metadata.end()));
    else if (!e.message.empty())
      fit_string(e.message, e.message.size() / 2);
    else
      break;
  }
  return e;
}

std::string encode_health_event(const health_event& e) {
  json doc = json::object();
  if (!e.id.empty())
    doc["id"] = e.id;
  doc["agent"] = e.agent;
  doc["componentClass"] = e.component_class;
  doc["checkName"] = e.check_name;
  doc["isFatal"] = e.is_fatal;
  doc["isHealthy"] = e.is_healthy;
  doc["message"] = e.message;
  doc["recommendedAction"] = std::string(to_string(e.action));
  if (!e.custom_action.empty())
    doc["customRecommendedAction"] = e.custom_action;
  doc["errorCode"] = e.error_codes;
  auto entities = json::array();
  for (const auto& ent : e.entities)
    entities.push_back({{"entityType", ent.type}, {"entityValue", ent.value}});
  doc["entitiesImpacted"] = std::move(entities);
  doc["metadata"] = e.metadata;
  if (e.generated)
    doc["generatedTimestamp"] = format_rfc3339(*e.generated);
  doc["nodeName"] = e.node_name;
  if (e.quarantine_overrides)
    doc["quarantineOverrides"] = encode_override(*e.quarantine_overrides);
  if (e.drain_overrides)
    doc["drainOverrides"] = encode_override(*e.drain_overrides);
  doc["processingStrategy"] = std::string(to_string(e.strategy));
  // Invalid UTF-8 from a detector is replaced, never allowed to throw.
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

} // namespace vigil
