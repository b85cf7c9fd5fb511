#include "runtime/sim/kube/kube_store_support.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace vigil::kube::detail {

namespace {

json details_of(const object_key& key) {
  const auto dot = key.plural_group.find('.');
  json details = {{"name", key.name}, {"kind", key.plural_group.substr(0, dot)}};
  if (dot != std::string::npos)
    details["group"] = key.plural_group.substr(dot + 1);
  return details;
}

std::string describe(const object_key& key) {
  return key.plural_group + " \"" + key.name + "\"";
}

// Days since 1970-01-01 for a proleptic Gregorian date (Hinnant's algorithm).
std::int64_t days_from_civil(std::int64_t year, std::int64_t month, std::int64_t day) {
  year -= month <= 2 ? 1 : 0;
  const std::int64_t era = (year >= 0 ? year : year - 399) / 400;
  const std::int64_t year_of_era = year - era * 400;
  const std::int64_t day_of_year =
    (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1;
  const std::int64_t day_of_era =
    year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
  return era * 146097 + day_of_era - 719468;
}

} // namespace

const char* const object_modified =
  "the object has been modified; please apply your changes to the latest version and "
  "try again";

std::string plural_group_of(const resource_type& type) {
  return type.group.empty() ? type.plural : type.plural + "." + type.group;
}

store_result failure(api_status status) {
  store_result result;
  result.error = std::move(status);
  return result;
}

store_result success(json value) {
  return store_result{std::move(value), {}};
}

api_status not_found(const object_key& key) {
  return {404, "NotFound", describe(key) + " not found", details_of(key)};
}

api_status already_exists(const object_key& key) {
  return {409, "AlreadyExists", describe(key) + " already exists", details_of(key)};
}

api_status conflict(const object_key& key, const std::string& why) {
  return {409, "Conflict",
          "Operation cannot be fulfilled on " + describe(key) + ": " + why,
          details_of(key)};
}

api_status bad_request(std::string message) {
  return {400, "BadRequest", std::move(message), nullptr};
}

api_status invalid(const resource_type& type, const std::string& name,
                   const std::string& field, const std::string& what,
                   const std::string& detail) {
  const std::string cause_reason = what == "Required value" ? "FieldValueRequired"
                                   : what == "Forbidden"    ? "FieldValueForbidden"
                                                            : "FieldValueInvalid";
  const std::string message = what + ": " + detail;
  // The server names the kind qualified by its group: `Job.batch "x" is invalid`.
  const std::string qualified_kind =
    type.group.empty() ? type.kind : type.kind + "." + type.group;
  json details = {
    {"name", name},
    {"kind", type.kind},
    {"causes",
     json::array({{{"reason", cause_reason}, {"message", message}, {"field", field}}})}};
  if (!type.group.empty())
    details["group"] = type.group;
  return {422, "Invalid",
          qualified_kind + " \"" + name + "\" is invalid: " + field + ": " + message,
          std::move(details)};
}

api_status expired(std::string message) {
  return {410, "Expired", std::move(message), nullptr};
}

json& metadata_of(json& object) {
  auto& metadata = object["metadata"];
  if (!metadata.is_object())
    metadata = json::object();
  return metadata;
}

std::string meta_string(const json& object, const std::string& field) {
  auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object())
    return {};
  auto value = metadata->find(field);
  return value != metadata->end() && value->is_string() ? value->get<std::string>()
                                                        : std::string{};
}

std::int64_t meta_integer(const json& object, const std::string& field,
                          std::int64_t fallback) {
  auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object())
    return fallback;
  auto value = metadata->find(field);
  return value != metadata->end() && value->is_number_integer()
           ? value->get<std::int64_t>()
           : fallback;
}

bool being_deleted(const json& object) {
  return !meta_string(object, "deletionTimestamp").empty();
}

json finalizers_of(const json& object) {
  auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object())
    return json::array();
  auto finalizers = metadata->find("finalizers");
  return finalizers != metadata->end() && finalizers->is_array() ? *finalizers
                                                                 : json::array();
}

bool has_finalizer(const json& object, const std::string& finalizer) {
  const auto finalizers = finalizers_of(object);
  return std::find(finalizers.begin(), finalizers.end(), finalizer) != finalizers.end();
}

bool owned_by(const json& object, const std::string& uid, bool blocking_only) {
  auto metadata = object.find("metadata");
  if (uid.empty() || metadata == object.end() || !metadata->is_object())
    return false;
  auto refs = metadata->find("ownerReferences");
  if (refs == metadata->end() || !refs->is_array())
    return false;
  for (const auto& ref : *refs)
    if (ref.is_object() && ref.value("uid", json()) == uid
        && (!blocking_only || ref.value("blockOwnerDeletion", json()) == true))
      return true;
  return false;
}

json present(const resource_type& type, json object) {
  object["apiVersion"] = type.api_version();
  object["kind"] = type.kind;
  return object;
}

json present_listed(const resource_type& type, json object) {
  if (type.custom)
    return present(type, std::move(object));
  object.erase("apiVersion");
  object.erase("kind");
  return object;
}

std::string format_timestamp(std::int64_t unix_seconds) {
  std::int64_t days = unix_seconds / 86400;
  std::int64_t seconds = unix_seconds % 86400;
  if (seconds < 0) {
    seconds += 86400;
    --days;
  }
  days += 719468;
  const std::int64_t era = (days >= 0 ? days : days - 146096) / 146097;
  const std::int64_t day_of_era = days - era * 146097;
  const std::int64_t year_of_era =
    (day_of_era - day_of_era / 1460 + day_of_era / 36524 - day_of_era / 146096) / 365;
  const std::int64_t day_of_year =
    day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
  const std::int64_t shifted_month = (5 * day_of_year + 2) / 153;
  const std::int64_t day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
  const std::int64_t month = shifted_month < 10 ? shifted_month + 3 : shifted_month - 9;
  const std::int64_t year = year_of_era + era * 400 + (month <= 2 ? 1 : 0);
  char text[64];
  std::snprintf(text, sizeof text, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lldZ",
                static_cast<long long>(year), static_cast<long long>(month),
                static_cast<long long>(day), static_cast<long long>(seconds / 3600),
                static_cast<long long>(seconds / 60 % 60),
                static_cast<long long>(seconds % 60));
  return text;
}

std::optional<std::int64_t> parse_timestamp(const std::string& text) {
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0, used = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &year, &month, &day, &hour,
                  &minute, &second, &used)
        != 6
      || month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59
      || second > 60)
    return std::nullopt;
  std::size_t rest = static_cast<std::size_t>(used);
  while (rest < text.size()
         && (text[rest] == '.' || std::isdigit(static_cast<unsigned char>(text[rest]))))
    ++rest;
  std::int64_t offset = 0;
  if (rest < text.size() && (text[rest] == '+' || text[rest] == '-')) {
    int offset_hours = 0, offset_minutes = 0;
    if (std::sscanf(text.c_str() + rest + 1, "%2d:%2d", &offset_hours, &offset_minutes)
        != 2)
      return std::nullopt;
    offset = (text[rest] == '+' ? 1 : -1) * (offset_hours * 3600 + offset_minutes * 60);
  } else if (rest >= text.size() || (text[rest] != 'Z' && text[rest] != 'z')) {
    return std::nullopt;
  }
  return days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second
         - offset;
}

} // namespace vigil::kube::detail
