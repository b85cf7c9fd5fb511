// The object store's read side: get, list pages that stay one consistent
// snapshot across continue tokens, and the watch changes replayed from the
// history, both filtered by label and field selectors.
#include "runtime/sim/kube/kube_object_store.hpp"

#include <algorithm>
#include <cstdlib>
#include <tuple>

#include "runtime/sim/kube/kube_selectors.hpp"
#include "runtime/sim/kube/kube_store_support.hpp"

namespace vigil::kube {

using namespace detail;

namespace {

const char* const continue_token_version = "meta.k8s.io/v1";
const char* const base64url_alphabet =
  "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

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

// Where the next list page starts: after (ns, name) in the snapshot at rv;
// how many items the pages before it returned and, for a list without
// selectors, how many the whole list has (counted once, on its first page:
// counting the rest on every page made listing 100,000 Nodes quadratic).
struct continue_token {
  std::uint64_t resource_version = 0;
  std::string ns;
  std::string name;
  std::uint64_t listed = 0;
  std::optional<std::uint64_t> total;
};

std::string encode_continue(const continue_token& token) {
  json body = {{"v", continue_token_version},
               {"rv", token.resource_version},
               {"start", token.ns + "/" + token.name},
               {"listed", token.listed}};
  if (token.total)
    body["total"] = *token.total;
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
  continue_token token{body["rv"].get<std::uint64_t>(), where.substr(0, slash),
                       where.substr(slash + 1), 0, std::nullopt};
  if (auto listed = body.value("listed", json()); listed.is_number_unsigned())
    token.listed = listed.get<std::uint64_t>();
  if (auto total = body.value("total", json()); total.is_number_unsigned())
    token.total = total.get<std::uint64_t>();
  return token;
}

std::uint64_t version_of(const json& object) {
  return std::strtoull(meta_string(object, "resourceVersion").c_str(), nullptr, 10);
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
  const auto group = plural_group_of(type);
  // The objects as they were at the snapshot: the live map with the changes
  // made since undone (key → the object then; null: it did not exist). A
  // list's pages walk the live map rather than a copy of it: copying 100,000
  // Nodes for every 500-item page made listing them quadratic (issue 22).
  std::map<object_key, const json*> undone;
  for (auto change = history_.rbegin();
       change != history_.rend() && change->resource_version > snapshot_version; ++change)
    if (change->key.plural_group == group) // the oldest change's `previous` wins
      undone[change->key] = change->previous.is_null() ? nullptr : &change->previous;
  const object_key first{group, start ? start->ns : "", start ? start->name : ""};
  auto live = objects_.lower_bound(first);
  auto old = undone.lower_bound(first);
  auto in_group = [&](const object_key& key) { return key.plural_group == group; };
  // The next object of the snapshot in key order, or false when none is left.
  auto next = [&](const object_key*& key, const json*& object) {
    for (;;) {
      const bool live_left = live != objects_.end() && in_group(live->first);
      const bool old_left = old != undone.end();
      if (!live_left && !old_left)
        return false;
      if (old_left && (!live_left || !(live->first < old->first))) {
        if (live_left && !(old->first < live->first))
          ++live; // changed since: the snapshot's version stands in for it
        key = &old->first;
        object = old->second;
        ++old;
      } else {
        key = &live->first;
        object = &live->second;
        ++live;
      }
      if (object == nullptr) // created after the snapshot
        continue;
      if (start && std::tie(key->ns, key->name) <= std::tie(start->ns, start->name))
        continue;
      if (type.namespaced && !ns.empty() && key->ns != ns)
        continue;
      if (filter->matches(*object))
        return true;
    }
  };
  const auto limit = static_cast<std::size_t>(std::max<std::int64_t>(options.limit, 0));
  json items = json::array();
  const object_key* key = nullptr;
  const json* object = nullptr;
  const object_key* last = nullptr;
  bool more = false;
  while (next(key, object)) {
    if (limit > 0 && items.size() == limit) {
      more = true;
      break;
    }
    items.push_back(present_listed(type, *object));
    last = key;
  }
  json metadata = {{"resourceVersion", std::to_string(snapshot_version)}};
  if (more) {
    const std::uint64_t listed = (start ? start->listed : 0) + items.size();
    auto total = start ? start->total : std::nullopt;
    // As the API server: the count is given only for a list without
    // selectors ("the number of remaining items is unknown" with them).
    if (options.label_selector.empty() && options.field_selector.empty()) {
      if (!total) {
        std::uint64_t remaining = 1; // the item this page stopped before
        while (next(key, object))
          ++remaining;
        total = listed + remaining;
      }
      metadata["remainingItemCount"] = *total - listed;
    }
    metadata["continue"] =
      encode_continue({snapshot_version, last->ns, last->name, listed, total});
  }
  return success({{"kind", type.kind + "List"},
                  {"apiVersion", type.api_version()},
                  {"metadata", std::move(metadata)},
                  {"items", std::move(items)}});
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

} // namespace vigil::kube
