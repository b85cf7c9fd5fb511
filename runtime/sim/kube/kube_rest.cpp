#include "runtime/sim/kube/kube_rest.hpp"

#include <cstdlib>

#include "runtime/sim/kube/kube_discovery.hpp"

namespace vigil::kube {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

// "%2F" → "/", '+' → ' '; a '%' without two hex digits stays as it is.
std::string percent_decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex_digit(s[i + 1]) >= 0
        && hex_digit(s[i + 2]) >= 0) {
      out += static_cast<char>(hex_digit(s[i + 1]) * 16 + hex_digit(s[i + 2]));
      i += 2;
    } else {
      out += s[i] == '+' ? ' ' : s[i];
    }
  }
  return out;
}

std::vector<std::string> split_path(std::string_view path) {
  std::vector<std::string> out;
  while (!path.empty()) {
    auto slash = path.find('/');
    auto seg = path.substr(0, slash);
    if (!seg.empty())
      out.emplace_back(seg);
    path = slash == std::string_view::npos ? "" : path.substr(slash + 1);
  }
  return out;
}

bool truthy(const std::map<std::string, std::string>& q, const char* key) {
  auto it = q.find(key);
  return it != q.end() && (it->second == "true" || it->second == "1");
}

// What a URL addresses: a resource collection, an object, or a subresource.
struct route {
  const resource_type* type = nullptr;
  std::string ns;
  std::string name;
  std::string sub;
};

// Resolves /api/v1/… and /apis/<group>/<version>/… to a type and object.
std::optional<route> resolve(const object_store& store,
                             const std::vector<std::string>& seg) {
  std::string group, version;
  size_t rest;
  if (seg.size() >= 3 && seg[0] == "api") {
    version = seg[1];
    rest = 2;
  } else if (seg.size() >= 4 && seg[0] == "apis") {
    group = seg[1];
    version = seg[2];
    rest = 3;
  } else {
    return std::nullopt;
  }
  route r;
  const size_t n = seg.size() - rest;
  if (n >= 3 && seg[rest] == "namespaces") {
    if (auto* t = store.find_type(group, version, seg[rest + 2]); t && t->namespaced) {
      r.type = t;
      r.ns = seg[rest + 1];
      r.name = n >= 4 ? seg[rest + 3] : "";
      r.sub = n >= 5 ? seg[rest + 4] : "";
      return n <= 5 ? std::optional<route>{r} : std::nullopt;
    }
  }
  r.type = store.find_type(group, version, seg[rest]);
  if (r.type == nullptr || n > 3)
    return std::nullopt;
  r.name = n >= 2 ? seg[rest + 1] : "";
  r.sub = n >= 3 ? seg[rest + 2] : "";
  return r;
}

std::optional<rest_reply> discovery(const object_store& store,
                                    const std::vector<std::string>& seg) {
  if (seg.size() == 1 && seg[0] == "version")
    return rest_reply{200, version_document().dump(), ""};
  if (seg.size() == 1 && seg[0] == "api")
    return rest_reply{200, api_versions_document().dump(), ""};
  if (seg.size() == 1 && seg[0] == "apis")
    return rest_reply{200, api_group_list(store.types()).dump(), ""};
  if (seg.size() == 2 && seg[0] == "api")
    return rest_reply{200, api_resource_list(store.types(), "", seg[1]).dump(), ""};
  if (seg.size() == 3 && seg[0] == "apis")
    return rest_reply{200, api_resource_list(store.types(), seg[1], seg[2]).dump(), ""};
  return std::nullopt;
}

list_options list_options_of(const std::map<std::string, std::string>& q) {
  list_options o;
  if (auto it = q.find("labelSelector"); it != q.end())
    o.label_selector = it->second;
  if (auto it = q.find("fieldSelector"); it != q.end())
    o.field_selector = it->second;
  if (auto it = q.find("limit"); it != q.end())
    o.limit = std::strtoll(it->second.c_str(), nullptr, 10);
  if (auto it = q.find("continue"); it != q.end())
    o.continue_token = it->second;
  return o;
}

std::optional<patch_type> patch_type_of(const std::string& content_type) {
  if (content_type.rfind("application/merge-patch+json", 0) == 0)
    return patch_type::merge;
  if (content_type.rfind("application/json-patch+json", 0) == 0)
    return patch_type::json_patch;
  if (content_type.rfind("application/strategic-merge-patch+json", 0) == 0)
    return patch_type::strategic_merge;
  return std::nullopt;
}

delete_options delete_options_of(const json& body,
                                 const std::map<std::string, std::string>& q) {
  delete_options o;
  auto policy = [&](const std::string& p) {
    if (p == "Orphan")
      o.propagation = propagation_policy::orphan;
    else if (p == "Foreground")
      o.propagation = propagation_policy::foreground;
    else if (p == "Background")
      o.propagation = propagation_policy::background;
  };
  if (body.is_object()) {
    if (auto g = body.find("gracePeriodSeconds"); g != body.end() && g->is_number())
      o.grace_period_seconds = g->get<std::int64_t>();
    if (auto p = body.find("propagationPolicy"); p != body.end() && p->is_string())
      policy(p->get<std::string>());
    if (auto pre = body.find("preconditions"); pre != body.end() && pre->is_object())
      if (auto rv = pre->find("resourceVersion"); rv != pre->end() && rv->is_string())
        o.precondition_resource_version = rv->get<std::string>();
  }
  if (auto it = q.find("gracePeriodSeconds"); it != q.end())
    o.grace_period_seconds = std::strtoll(it->second.c_str(), nullptr, 10);
  if (auto it = q.find("propagationPolicy"); it != q.end())
    policy(it->second);
  return o;
}

} // namespace

rest_reply status_reply(const api_status& s) {
  rest_reply r{s.code, s.to_json().dump(), ""};
  if (s.code == 429)
    r.retry_after = "1";
  return r;
}

rest_reply error_reply(int code, const std::string& reason, const std::string& message) {
  return status_reply(api_status{code, reason, message, {}});
}

std::string watch_event_line(std::string_view type, const json& object) {
  return R"({"type":)" + json(type).dump() + R"(,"object":)" + object.dump() + "}";
}

std::map<std::string, std::string> parse_query(std::string_view query) {
  std::map<std::string, std::string> out;
  while (!query.empty()) {
    auto amp = query.find('&');
    auto pair = query.substr(0, amp);
    auto eq = pair.find('=');
    if (eq == std::string_view::npos)
      out[percent_decode(pair)] = "";
    else
      out[percent_decode(pair.substr(0, eq))] = percent_decode(pair.substr(eq + 1));
    query = amp == std::string_view::npos ? "" : query.substr(amp + 1);
  }
  return out;
}

bool is_watch(const std::map<std::string, std::string>& query) {
  return truthy(query, "watch");
}

// POST /apis/authentication.k8s.io/v1/tokenreviews: answered, not stored.
std::optional<rest_reply> token_review(const object_store& store,
                                       const rest_request& req) {
  if (req.path != "/apis/authentication.k8s.io/v1/tokenreviews")
    return std::nullopt;
  if (req.verb != "POST")
    return error_reply(405, "MethodNotAllowed", "tokenreviews can only be created");
  auto body = json::parse(req.body, nullptr, false);
  if (!body.is_object() || body.value("kind", "") != "TokenReview")
    return error_reply(400, "BadRequest", "the request body is not a TokenReview");
  const auto spec = body.value("spec", json::object());
  json answer = {{"kind", "TokenReview"},
                 {"apiVersion", "authentication.k8s.io/v1"},
                 {"metadata", {{"creationTimestamp", nullptr}}},
                 {"spec", spec},
                 {"status", store.token_reviews().review(spec)}};
  return rest_reply{201, answer.dump(), ""};
}

rest_reply serve_rest(object_store& store, const rest_request& req) {
  const auto seg = split_path(req.path);
  const auto& q = req.query;
  if (auto review = token_review(store, req))
    return *review;
  if (req.verb == "GET")
    if (auto d = discovery(store, seg))
      return *d;
  auto r = resolve(store, seg);
  if (!r)
    return error_reply(404, "NotFound",
                       "the server could not find the requested resource");
  json body;
  if (!req.body.empty()) {
    body = json::parse(req.body, nullptr, false);
    if (body.is_discarded())
      return error_reply(400, "BadRequest", "the request body is not valid JSON");
  }
  const bool status_sub = r->sub == "status";
  if (!r->sub.empty() && !status_sub && r->sub != "eviction")
    return error_reply(404, "NotFound", "no subresource " + r->sub);
  store_result result;
  int ok_code = 200;
  if (req.verb == "GET") {
    result = r->name.empty() ? store.list(*r->type, r->ns, list_options_of(q))
                             : store.get(*r->type, r->ns, r->name);
    if (result.ok() && req.accept.find("as=Table") != std::string::npos)
      result.value = to_table(*r->type, *result.value);
  } else if (req.verb == "POST") {
    if (r->sub == "eviction" && r->type->plural == "pods") {
      result = store.evict(r->ns, r->name, body);
      ok_code = 201;
    } else if (r->name.empty()) {
      result = store.create(*r->type, r->ns, body);
      ok_code = 201;
    } else {
      return error_reply(405, "MethodNotAllowed", "POST is not allowed here");
    }
  } else if (req.verb == "PUT") {
    result = store.update(*r->type, r->ns, r->name, body, status_sub);
  } else if (req.verb == "PATCH") {
    auto kind = patch_type_of(req.content_type);
    if (!kind)
      return error_reply(415, "UnsupportedMediaType",
                         "the body of the request was in an unknown format");
    result = store.patch(*r->type, r->ns, r->name, body, *kind, status_sub);
  } else if (req.verb == "DELETE") {
    result = store.remove(*r->type, r->ns, r->name, delete_options_of(body, q));
  } else {
    return error_reply(405, "MethodNotAllowed", "method not allowed");
  }
  if (!result.ok())
    return status_reply(result.error);
  return rest_reply{ok_code, result.value->dump(), ""};
}

std::optional<watch_target> resolve_watch(const object_store& store,
                                          const std::string& path,
                                          const std::map<std::string, std::string>& q,
                                          api_status& error) {
  auto r = resolve(store, split_path(path));
  if (!r || !r->name.empty()) {
    error = api_status{404, "NotFound", "cannot watch " + path, {}};
    return std::nullopt;
  }
  watch_target w;
  w.type = r->type;
  w.ns = r->ns;
  w.selectors = list_options_of(q);
  if (auto it = q.find("resourceVersion"); it != q.end())
    w.resource_version = std::strtoull(it->second.c_str(), nullptr, 10);
  w.bookmarks = truthy(q, "allowWatchBookmarks");
  if (auto it = q.find("timeoutSeconds"); it != q.end())
    w.timeout_seconds = std::strtoll(it->second.c_str(), nullptr, 10);
  return w;
}

} // namespace vigil::kube
