#include "actors/control/auth/agent_identity.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "runtime/kube/kube_config.hpp"

namespace vigil::control {

using json = nlohmann::json;

kube::kube_request token_review_request(const std::string& token,
                                        const std::vector<std::string>& audiences) {
  json spec = {{"token", token}};
  if (!audiences.empty())
    spec["audiences"] = audiences;
  json review = {
    {"apiVersion", "authentication.k8s.io/v1"}, {"kind", "TokenReview"}, {"spec", spec}};
  auto request = kube::make_request("POST", "/apis/authentication.k8s.io/v1/tokenreviews",
                                    review.dump());
  request.timeout = std::chrono::seconds{10};
  return request;
}

std::vector<std::string> audiences_for(token_use use,
                                       const token_review_settings& settings) {
  if (use == token_use::agent)
    return {settings.audience};
  return {};
}

namespace {

// status of an authenticated review, or why there is none.
expected<json> authenticated_status(std::string_view body) {
  const auto review = json::parse(body, nullptr, false);
  if (!review.is_object())
    return failure{"TokenReview", "the answer is not JSON"};
  const auto status = review.value("status", json::object());
  if (!status.is_object() || !status.value("authenticated", false)) {
    const auto why = status.is_object() ? status.value("error", "") : std::string{};
    return failure{"bearer token", why.empty() ? "not authenticated" : why};
  }
  return status;
}

std::string username_of(const json& status) {
  const auto user = status.value("user", json::object());
  return user.is_object() ? user.value("username", "") : "";
}

} // namespace

expected<agent_identity> reader_from_review(std::string_view body,
                                            const token_review_settings& settings) {
  auto status = authenticated_status(body);
  if (!status)
    return status.error();
  const auto name = username_of(*status);
  const auto& readers = settings.metrics_readers;
  if (std::find(readers.begin(), readers.end(), name) == readers.end())
    return failure{"bearer token", "'" + name + "' may not read /metrics"};
  return agent_identity{name, "", false};
}

expected<agent_identity> review_answer(token_use use, std::string_view body,
                                       const token_review_settings& settings) {
  return use == token_use::agent ? identity_from_review(body, settings)
                                 : reader_from_review(body, settings);
}

expected<agent_identity> identity_from_review(std::string_view body,
                                              const token_review_settings& settings) {
  auto authenticated = authenticated_status(body);
  if (!authenticated)
    return authenticated.error();
  const auto& status = *authenticated;
  const auto audiences = status.value("audiences", json::array());
  if (audiences.is_array() && !audiences.empty()
      && std::find(audiences.begin(), audiences.end(), settings.audience)
           == audiences.end())
    return failure{"bearer token", "not issued for the audience " + settings.audience};
  const auto user = status.value("user", json::object());
  agent_identity who;
  who.username = username_of(status);
  if (who.username != settings.agent_username)
    return failure{"bearer token", "'" + who.username + "' is not the agents' account "
                                     + settings.agent_username};
  const auto extra =
    user.is_object() ? user.value("extra", json::object()) : json::object();
  const auto nodes =
    extra.is_object() ? extra.value(node_name_extra, json::array()) : json::array();
  if (!nodes.is_array() || nodes.empty() || !nodes[0].is_string()
      || nodes[0].get<std::string>().empty())
    return failure{"bearer token",
                   "not bound to a node (a projected token of a pod is; the API server "
                   "must be Kubernetes 1.30 or later)"};
  who.node = nodes[0].get<std::string>();
  return who;
}

std::optional<std::int64_t> token_expiry(std::string_view token) {
  const auto first = token.find('.');
  const auto second = token.find('.', first == std::string_view::npos ? 0 : first + 1);
  if (first == std::string_view::npos || second == std::string_view::npos)
    return std::nullopt;
  std::string payload(token.substr(first + 1, second - first - 1));
  std::replace(payload.begin(), payload.end(), '-', '+');
  std::replace(payload.begin(), payload.end(), '_', '/');
  while (payload.size() % 4 != 0)
    payload += '=';
  auto decoded = kube::base64_decode(payload);
  if (!decoded)
    return std::nullopt;
  const auto claims = json::parse(*decoded, nullptr, false);
  if (!claims.is_object() || !claims.contains("exp") || !claims["exp"].is_number())
    return std::nullopt;
  return claims["exp"].get<std::int64_t>();
}

std::optional<std::string> foreign_node(const agent_identity& who,
                                        const std::vector<std::string>& nodes) {
  if (who.any_node)
    return std::nullopt;
  for (const auto& node : nodes)
    if (node != who.node)
      return node;
  return std::nullopt;
}

const expected<agent_identity>* token_cache::find(const std::string& token,
                                                  clock_seconds now) const {
  auto it = entries_.find(token);
  if (it == entries_.end() || it->second.until <= now)
    return nullptr;
  return &it->second.answer;
}

void token_cache::remember(const std::string& token, expected<agent_identity> answer,
                           clock_seconds now) {
  clock_seconds until = now + settings_.refused_for;
  if (answer) {
    until = now + settings_.max_granted;
    if (auto exp = token_expiry(token))
      until = std::min(until, *exp);
  }
  if (until <= now)
    return; // an expired token: nothing to remember
  if (entries_.size() >= settings_.capacity && entries_.count(token) == 0) {
    for (auto it = entries_.begin(); it != entries_.end();)
      it = it->second.until <= now ? entries_.erase(it) : std::next(it);
    if (entries_.size() >= settings_.capacity)
      entries_.clear();
  }
  entries_.insert_or_assign(token, entry{std::move(answer), until});
}

} // namespace vigil::control
