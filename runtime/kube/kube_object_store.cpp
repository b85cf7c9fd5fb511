#include "runtime/kube/kube_object_store.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "runtime/kube/kube_selectors.hpp"
#include "runtime/kube/kube_store_support.hpp"

namespace vigil::kube {

using namespace detail;

namespace {

const std::string pods_resource = "pods";
const std::string namespaces_resource = "namespaces";
const char* const continue_token_version = "meta.k8s.io/v1";
const char* const base64url_alphabet =
  "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

std::uint64_t mix_bits(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::string base64url_encode(const std::string& bytes) {
  std::string out;
  std::uint32_t buffer = 0;
  int bits = 0;
  for (unsigned char c : bytes) {
    buffer = (buffer << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += base64url_alphabet[(buffer >> bits) & 0x3F];
    }
  }
  if (bits > 0)
    out += base64url_alphabet[(buffer << (6 - bits)) & 0x3F];
  return out;
}

std::optional<std::string> base64url_decode(const std::string& text) {
  std::string out;
  std::uint32_t buffer = 0;
  int bits = 0;
  for (char c : text) {
    const char* at = std::char_traits<char>::find(base64url_alphabet, 64, c);
    if (at == nullptr)
      return std::nullopt;
    buffer = (buffer << 6) | static_cast<std::uint32_t>(at - base64url_alphabet);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((buffer >> bits) & 0xFF);
    }
  }
  return out;
}

// Where the next list page starts: after (ns, name) in the snapshot at rv.
struct continue_token {
  std::uint64_t resource_version = 0;
  std::string ns;
  std::string name;
};

std::string encode_continue(const continue_token& token) {
  const json body = {{"v", continue_token_version},
                     {"rv", token.resource_version},
                     {"start", token.ns + "/" + token.name}};
  return base64url_encode(body.dump());
}

std::optional<continue_token> decode_continue(const std::string& text,
                                              api_status& error) {
  auto bytes = base64url_decode(text);
  const json body = bytes ? json::parse(*bytes, nullptr, false) : json();
  const auto start = body.is_object() ? body.value("start", json()) : json();
  if (!body.is_object() || body.value("v", json()) != continue_token_version
      || !body.value("rv", json()).is_number_unsigned() || !start.is_string()
      || start.get<std::string>().find('/') == std::string::npos) {
    error = bad_request("continue key is not valid: " + text);
    return std::nullopt;
  }
  const auto where = start.get<std::string>();
  const auto slash = where.find('/');
  return continue_token{body["rv"].get<std::uint64_t>(), where.substr(0, slash),
                        where.substr(slash + 1)};
}

std::uint64_t version_of(const json& object) {
  return std::strtoull(meta_string(object, "resourceVersion").c_str(), nullptr, 10);
}

std::optional<api_status> check_body(const resource_type& type, const json& object) {
  if (!object.is_object())
    return bad_request("the request body must be a JSON object");
  if (object.contains("kind") && !object["kind"].is_null() && object["kind"] != type.kind)
    return bad_request("the kind in the body (" + object["kind"].dump()
                       + ") does not match the resource's kind (" + type.kind + ")");
  if (object.contains("apiVersion") && !object["apiVersion"].is_null()) {
    const auto& version = object["apiVersion"];
    const auto text = version.is_string() ? version.get<std::string>() : version.dump();
    const auto slash = text.find('/');
    const auto group = slash == std::string::npos ? std::string{} : text.substr(0, slash);
    if (!version.is_string() || group != type.group)
      return bad_request("the apiVersion in the body (" + text
                         + ") does not match the resource's (" + type.api_version()
                         + ")");
  }
  if (object.contains("metadata") && !object["metadata"].is_object())
    return bad_request("metadata must be a JSON object");
  return std::nullopt;
}

bool is_lower_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

// RFC 1123: a label (namespaces) or a subdomain (most objects).
bool valid_dns_name(const std::string& name, bool label) {
  const std::size_t limit = label ? 63 : 253;
  if (name.empty() || name.size() > limit || !is_lower_alnum(name.front())
      || !is_lower_alnum(name.back()))
    return false;
  return std::all_of(name.begin(), name.end(), [label](char c) {
    return is_lower_alnum(c) || c == '-' || (!label && c == '.');
  });
}

// Custom resources only need names that fit in a URL path segment.
bool valid_path_segment(const std::string& name) {
  return !name.empty() && name != "." && name != ".."
         && name.find_first_of("/%") == std::string::npos;
}

// Sets metadata.namespace for a create at `ns` (dropping it for cluster-scoped
// types) and reports where the object goes; a 400 when they disagree.
std::optional<api_status> place_in_namespace(const resource_type& type,
                                             const std::string& ns, json& object,
                                             std::string& object_ns) {
  auto& metadata = metadata_of(object);
  object_ns = meta_string(object, "namespace");
  if (!type.namespaced) {
    object_ns.clear();
    metadata.erase("namespace");
    return std::nullopt;
  }
  if (!ns.empty() && !object_ns.empty() && ns != object_ns)
    return bad_request("the namespace of the provided object does not match the "
                       "namespace sent on the request");
  if (ns.empty() && object_ns.empty())
    return bad_request("a namespace is required to create " + type.plural);
  object_ns = ns.empty() ? object_ns : ns;
  metadata["namespace"] = object_ns;
  return std::nullopt;
}

std::optional<api_status> check_name(const resource_type& type, bool builtin,
                                     const std::string& name) {
  const bool name_ok = !builtin
                         ? valid_path_segment(name)
                         : valid_dns_name(name, type.plural == namespaces_resource);
  if (name_ok)
    return std::nullopt;
  return invalid(type, name, "metadata.name", "Invalid value",
                 "\"" + name
                   + "\": a lowercase RFC 1123 name must consist of lower case "
                     "alphanumeric characters, '-' or '.'");
}

void copy_field(json& to, const json& from, const std::string& field) {
  if (from.is_object() && from.contains(field))
    to[field] = from[field];
  else
    to.erase(field);
}

bool spec_changed(json before, json after) {
  for (auto* object : {&before, &after}) {
    object->erase("metadata");
    object->erase("status");
  }
  return before != after;
}

// The object a PUT leaves: the caller's fields, with what the server owns
// (identity, timestamps, resourceVersion, generation, and status or the rest
// depending on the subresource) kept from the stored object.
json merged_for_update(const resource_type& type, const json& existing, json incoming,
                       bool status_only) {
  json updated;
  if (status_only) {
    updated = existing;
    copy_field(updated, incoming, "status");
  } else {
    updated = std::move(incoming);
    if (type.has_status)
      copy_field(updated, existing, "status");
  }
  copy_field(updated, existing, "apiVersion");
  copy_field(updated, existing, "kind");
  auto& metadata = metadata_of(updated);
  for (const char* field :
       {"name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
        "deletionGracePeriodSeconds", "resourceVersion", "generation"})
    copy_field(metadata, existing["metadata"], field);
  if (spec_changed(existing, updated))
    metadata["generation"] = meta_integer(existing, "generation", 1) + 1;
  return updated;
}

std::optional<api_status> check_identity(const resource_type& type, const object_key& key,
                                         const json& existing, const json& incoming,
                                         bool require_version) {
  const auto name = meta_string(incoming, "name");
  if (!name.empty() && name != key.name)
    return bad_request("the name of the object (" + name
                       + ") does not match the name on the URL (" + key.name + ")");
  const auto ns = meta_string(incoming, "namespace");
  if (type.namespaced && !ns.empty() && ns != key.ns)
    return bad_request("the namespace of the provided object does not match the "
                       "namespace sent on the request");
  const auto uid = meta_string(incoming, "uid");
  if (!uid.empty() && uid != meta_string(existing, "uid"))
    return conflict(key, "Precondition failed: UID in precondition: " + uid
                           + ", UID in object meta: " + meta_string(existing, "uid"));
  const auto version = meta_string(incoming, "resourceVersion");
  if (!version.empty() && version != meta_string(existing, "resourceVersion"))
    return conflict(key, object_modified);
  if (version.empty() && require_version)
    return invalid(type, key.name, "metadata.resourceVersion", "Invalid value",
                   "0x0: must be specified for an update");
  return std::nullopt;
}

// The server refuses new finalizers on an object being deleted
// (ValidateObjectMetaUpdate): they could hold its deletion for ever. Removing
// finalizers, and keeping them, stays allowed.
std::optional<api_status> check_no_new_finalizers(const resource_type& type,
                                                  const object_key& key,
                                                  const json& existing,
                                                  const json& updated) {
  if (!being_deleted(existing))
    return std::nullopt;
  const auto before = finalizers_of(existing);
  std::set<std::string> added; // sorted, as the server lists them
  for (const auto& finalizer : finalizers_of(updated))
    if (finalizer.is_string()
        && std::find(before.begin(), before.end(), finalizer) == before.end())
      added.insert(finalizer.get<std::string>());
  if (added.empty())
    return std::nullopt;
  std::string listed;
  for (const auto& finalizer : added)
    listed += (listed.empty() ? "\"" : ", \"") + finalizer + "\"";
  return invalid(type, key.name, "metadata.finalizers", "Forbidden",
                 "no new finalizers can be added if the object is being deleted, found "
                 "new finalizers []string{"
                   + listed + "}");
}

// Status a type's create leaves: custom resources with a status subresource
// start without one; pods start Pending and namespaces Active.
void prepare_status(const resource_type& type, bool builtin, json& object) {
  if (!builtin && type.has_status)
    object.erase("status");
  const auto resource = plural_group_of(type);
  if (resource != pods_resource && resource != namespaces_resource)
    return;
  auto& status = object["status"];
  if (!status.is_object())
    status = json::object();
  if (!status.contains("phase"))
    status["phase"] = resource == pods_resource ? "Pending" : "Active";
}

// A watch event as a filtered watch sees it: an object moving into the
// selection is ADDED, one moving out is DELETED (as the watch cache does).
std::optional<std::pair<std::string, json>>
filtered_event(const std::string& type, const json& object, const json& previous,
               std::uint64_t version, const object_filter& filter) {
  const bool was_in = !previous.is_null() && filter.matches(previous);
  if (type == "DELETED")
    return was_in ? std::optional{std::pair{type, object}} : std::nullopt;
  const bool is_in = filter.matches(object);
  if (is_in)
    return std::pair{std::string{was_in ? "MODIFIED" : "ADDED"}, object};
  if (!was_in)
    return std::nullopt;
  json last = previous;
  metadata_of(last)["resourceVersion"] = std::to_string(version);
  return std::pair{std::string{"DELETED"}, std::move(last)};
}

} // namespace

json api_status::to_json() const {
  json status = {
    {"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object()},
    {"status", "Failure"}, {"message", message}, {"reason", reason},
    {"code", code}};
  if (!details.is_null())
    status["details"] = details;
  return status;
}

std::vector<resource_type> builtin_resource_types() {
  return {
    {"", "v1", "nodes", "Node", false, true, {"no"}},
    {"", "v1", "pods", "Pod", true, true, {"po"}},
    {"", "v1", "events", "Event", true, false, {"ev"}},
    {"", "v1", "namespaces", "Namespace", false, true, {"ns"}},
    {"", "v1", "configmaps", "ConfigMap", true, false, {"cm"}},
    {"", "v1", "secrets", "Secret", true, false, {}},
    {"policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", true, true, {"pdb"}},
    {"batch", "v1", "jobs", "Job", true, true, {}},
    {"coordination.k8s.io", "v1", "leases", "Lease", true, false, {}},
  };
}

object_store::object_store(size_t watch_window) : watch_window_(watch_window) {
  for (const auto& type : builtin_resource_types()) {
    register_type(type);
    builtin_plural_groups_.insert(plural_group_of(type));
  }
}

void object_store::register_type(const resource_type& type) {
  auto same = std::find_if(types_.begin(), types_.end(), [&](const resource_type& known) {
    return known.group == type.group && known.version == type.version
           && known.plural == type.plural;
  });
  if (same != types_.end())
    *same = type;
  else
    types_.push_back(type);
}

const resource_type* object_store::find_type(const std::string& group,
                                             const std::string& version,
                                             const std::string& plural) const {
  for (const auto& type : types_)
    if (type.group == group && type.version == version && type.plural == plural)
      return &type;
  return nullptr;
}

std::int64_t object_store::now() const {
  return clock_ ? clock_() : static_cast<std::int64_t>(std::time(nullptr));
}

object_key object_store::key_of(const resource_type& type, const std::string& ns,
                                const std::string& name) const {
  return {plural_group_of(type), type.namespaced ? ns : std::string{}, name};
}

const resource_type* object_store::type_of(const std::string& plural_group) const {
  for (const auto& type : types_)
    if (plural_group_of(type) == plural_group)
      return &type;
  return nullptr;
}

bool object_store::is_builtin(const resource_type& type) const {
  return builtin_plural_groups_.count(plural_group_of(type)) > 0;
}

const json* object_store::find(const object_key& key) const {
  auto it = objects_.find(key);
  return it == objects_.end() ? nullptr : &it->second;
}

bool object_store::uid_exists(const std::string& uid) const {
  return std::any_of(objects_.begin(), objects_.end(), [&](const auto& entry) {
    return meta_string(entry.second, "uid") == uid;
  });
}

std::string object_store::next_uid() {
  const auto high = mix_bits(++name_counter_);
  const auto low = mix_bits(++name_counter_);
  char text[48];
  std::snprintf(
    text, sizeof text, "%08x-%04x-4%03x-%04x-%012llx", static_cast<unsigned>(high >> 32),
    static_cast<unsigned>(high >> 16 & 0xFFFF), static_cast<unsigned>(high & 0xFFF),
    static_cast<unsigned>(0x8000 | (low >> 48 & 0x3FFF)),
    static_cast<unsigned long long>(low & 0xFFFFFFFFFFFFULL));
  return text;
}

std::string object_store::unique_name(const resource_type& type, const std::string& ns,
                                      const std::string& prefix) {
  static const std::string alphabet = "bcdfghjklmnpqrstvwxz2456789";
  const auto base = prefix.substr(0, 58);
  for (;;) {
    auto bits = mix_bits(++name_counter_);
    std::string name = base;
    for (int i = 0; i < 5; ++i, bits /= alphabet.size())
      name += alphabet[bits % alphabet.size()];
    if (find(key_of(type, ns, name)) == nullptr)
      return name;
  }
}

json object_store::commit(const object_key& key, json object, const std::string& event) {
  metadata_of(object)["resourceVersion"] = std::to_string(++resource_version_);
  auto& stored = objects_[key];
  json previous = std::move(stored);
  stored = std::move(object);
  record({key, event, stored, std::move(previous), resource_version_});
  return stored;
}

json object_store::commit_delete(const object_key& key) {
  auto it = objects_.find(key);
  json previous = std::move(it->second);
  objects_.erase(it);
  json last = previous;
  metadata_of(last)["resourceVersion"] = std::to_string(++resource_version_);
  record({key, "DELETED", last, std::move(previous), resource_version_});
  return last;
}

void object_store::record(history_entry entry) {
  history_.push_back(std::move(entry));
  while (history_.size() > watch_window_) {
    compacted_through_ = history_.front().resource_version;
    history_.pop_front();
  }
}

void object_store::compact(std::uint64_t resource_version) {
  resource_version = std::min(resource_version, resource_version_);
  while (!history_.empty() && history_.front().resource_version <= resource_version)
    history_.pop_front();
  compacted_through_ = std::max(compacted_through_, resource_version);
}

std::map<object_key, json> object_store::state_at(const std::string& plural_group,
                                                  std::uint64_t resource_version) const {
  std::map<object_key, json> state;
  for (auto it = objects_.lower_bound({plural_group, "", ""});
       it != objects_.end() && it->first.plural_group == plural_group; ++it)
    state.insert(*it);
  for (auto change = history_.rbegin();
       change != history_.rend() && change->resource_version > resource_version;
       ++change) {
    if (change->key.plural_group != plural_group)
      continue;
    if (change->previous.is_null())
      state.erase(change->key);
    else
      state[change->key] = change->previous;
  }
  return state;
}

store_result object_store::get(const resource_type& type, const std::string& ns,
                               const std::string& name) const {
  const auto key = key_of(type, ns, name);
  const json* object = find(key);
  return object ? success(present(type, *object)) : failure(not_found(key));
}

store_result object_store::list(const resource_type& type, const std::string& ns,
                                const list_options& options) const {
  api_status error;
  auto filter = object_filter::parse(options, error);
  if (!filter)
    return failure(error);
  std::optional<continue_token> start;
  if (!options.continue_token.empty()) {
    start = decode_continue(options.continue_token, error);
    if (!start)
      return failure(error);
    if (start->resource_version < compacted_through_)
      return failure(expired("The provided continue parameter is too old to display a "
                             "consistent list result. You can start a new list without "
                             "the continue parameter."));
  }
  const auto snapshot_version = start ? start->resource_version : resource_version_;
  const auto state = state_at(plural_group_of(type), snapshot_version);
  std::vector<std::pair<const object_key*, const json*>> selected;
  for (const auto& [key, object] : state) {
    if (type.namespaced && !ns.empty() && key.ns != ns)
      continue;
    if (start && std::tie(key.ns, key.name) <= std::tie(start->ns, start->name))
      continue;
    if (filter->matches(object))
      selected.emplace_back(&key, &object);
  }
  const auto limit = static_cast<std::size_t>(std::max<std::int64_t>(options.limit, 0));
  const auto count = limit > 0 ? std::min(limit, selected.size()) : selected.size();
  json items = json::array();
  for (std::size_t i = 0; i < count; ++i)
    items.push_back(present(type, *selected[i].second));
  json metadata = {{"resourceVersion", std::to_string(snapshot_version)}};
  if (count < selected.size()) {
    const auto& last = *selected[count - 1].first;
    metadata["continue"] = encode_continue({snapshot_version, last.ns, last.name});
    metadata["remainingItemCount"] = selected.size() - count;
  }
  return success({{"kind", type.kind + "List"},
                  {"apiVersion", type.api_version()},
                  {"metadata", std::move(metadata)},
                  {"items", std::move(items)}});
}

store_result object_store::create(const resource_type& type, const std::string& ns,
                                  json object) {
  change_notifier notify{*this};
  return create_object(type, ns, std::move(object));
}

store_result object_store::create_object(const resource_type& type, const std::string& ns,
                                         json object) {
  if (auto problem = check_body(type, object))
    return failure(*problem);
  std::string object_ns;
  if (auto problem = place_in_namespace(type, ns, object, object_ns))
    return failure(*problem);
  auto name = meta_string(object, "name");
  const auto prefix = meta_string(object, "generateName");
  if (name.empty() && prefix.empty())
    return failure(invalid(type, "", "metadata.name", "Required value",
                           "name or generateName is required"));
  if (name.empty())
    name = unique_name(type, object_ns, prefix);
  const bool builtin = is_builtin(type);
  if (auto problem = check_name(type, builtin, name))
    return failure(*problem);
  const auto key = key_of(type, object_ns, name);
  if (find(key) != nullptr)
    return failure(already_exists(key));
  auto& metadata = metadata_of(object);
  metadata["name"] = name;
  metadata["uid"] = next_uid();
  metadata["creationTimestamp"] = format_timestamp(now());
  metadata["generation"] = 1;
  for (const char* field : {"deletionTimestamp", "deletionGracePeriodSeconds"})
    metadata.erase(field);
  object["apiVersion"] = type.api_version();
  object["kind"] = type.kind;
  prepare_status(type, builtin, object);
  json created = commit(key, std::move(object), "ADDED");
  after_write(key);
  return success(present(type, std::move(created)));
}

store_result object_store::update(const resource_type& type, const std::string& ns,
                                  const std::string& name, json object,
                                  bool status_subresource) {
  change_notifier notify{*this};
  // Custom resources refuse unconditional updates, as the real server does.
  return update_object(type, key_of(type, ns, name), std::move(object),
                       status_subresource, !is_builtin(type));
}

store_result object_store::update_object(const resource_type& type, const object_key& key,
                                         json incoming, bool status_subresource,
                                         bool require_version) {
  const json* existing = find(key);
  if (existing == nullptr)
    return failure(not_found(key));
  if (status_subresource && !type.has_status)
    return failure(
      {404, "NotFound", "the server could not find the requested resource", nullptr});
  if (auto problem = check_body(type, incoming))
    return failure(*problem);
  if (auto problem = check_identity(type, key, *existing, incoming, require_version))
    return failure(*problem);
  auto updated =
    merged_for_update(type, *existing, std::move(incoming), status_subresource);
  if (auto problem = check_no_new_finalizers(type, key, *existing, updated))
    return failure(*problem);
  return write_update(type, key, std::move(updated));
}

store_result object_store::write_update(const resource_type& type, const object_key& key,
                                        json updated) {
  const json& existing = objects_.at(key);
  if (updated == existing)
    return success(present(type, existing));
  // The last finalizer of an object being deleted is gone: the object goes,
  // unless it is a pod still in its grace period, which its kubelet ends
  // (the server's ShouldDeleteDuringUpdate: no finalizers, grace 0).
  if (being_deleted(updated) && finalizers_of(updated).empty()
      && meta_integer(updated, "deletionGracePeriodSeconds", 0) == 0)
    return success(present(type, delete_for_good(key, propagation_policy::background)));
  json stored = commit(key, std::move(updated), "MODIFIED");
  after_write(key);
  return success(present(type, std::move(stored)));
}

store_result object_store::patch(const resource_type& type, const std::string& ns,
                                 const std::string& name, const json& patch,
                                 patch_type kind, bool status_subresource) {
  change_notifier notify{*this};
  if (kind == patch_type::strategic_merge && !is_builtin(type))
    return failure({415, "UnsupportedMediaType",
                    "the body of the request was in an unknown format - accepted media "
                    "types include: application/json-patch+json, "
                    "application/merge-patch+json, application/apply-patch+yaml",
                    nullptr});
  const auto key = key_of(type, ns, name);
  const json* existing = find(key);
  if (existing == nullptr)
    return failure(not_found(key));
  auto patched = apply_patch(*existing, patch, kind);
  if (!patched.ok())
    return patched;
  return update_object(type, key, std::move(*patched.value), status_subresource, false);
}

std::optional<std::vector<watch_event>>
object_store::changes_since(const resource_type& type, const std::string& ns,
                            std::uint64_t resource_version, const list_options& selectors,
                            api_status& error) const {
  auto filter = object_filter::parse(selectors, error);
  if (!filter)
    return std::nullopt;
  const auto resource = plural_group_of(type);
  auto in_scope = [&](const object_key& key) {
    return key.plural_group == resource
           && (!type.namespaced || ns.empty() || key.ns == ns);
  };
  std::vector<watch_event> events;
  if (resource_version == 0) {
    for (auto it = objects_.lower_bound({resource, "", ""});
         it != objects_.end() && it->first.plural_group == resource; ++it)
      if (in_scope(it->first) && filter->matches(it->second))
        events.push_back({"ADDED", present(type, it->second), version_of(it->second)});
    return events;
  }
  if (resource_version < compacted_through_) {
    error = expired("too old resource version: " + std::to_string(resource_version) + " ("
                    + std::to_string(compacted_through_) + ")");
    return std::nullopt;
  }
  auto first = std::partition_point(history_.begin(), history_.end(), [&](const auto& e) {
    return e.resource_version <= resource_version;
  });
  for (auto change = first; change != history_.end(); ++change) {
    if (!in_scope(change->key))
      continue;
    auto event = filtered_event(change->type, change->object, change->previous,
                                change->resource_version, *filter);
    if (event)
      events.push_back({event->first, present(type, std::move(event->second)),
                        change->resource_version});
  }
  return events;
}

void object_store::create_system_namespaces() {
  change_notifier notify{*this};
  const auto* namespaces = type_of(namespaces_resource);
  for (const char* name : {"default", "kube-system", "kube-public", "kube-node-lease"})
    if (find({namespaces_resource, "", name}) == nullptr)
      create_object(*namespaces, "", {{"metadata", {{"name", name}}}});
}

} // namespace vigil::kube
