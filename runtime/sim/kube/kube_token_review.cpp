#include "runtime/sim/kube/kube_token_review.hpp"

#include <algorithm>

namespace vigil::kube {

using json = nlohmann::json;

void token_reviews::add(std::string token, service_account_token who) {
  tokens_.insert_or_assign(std::move(token), std::move(who));
}

void token_reviews::revoke(const std::string& token) {
  tokens_.erase(token);
}

json token_reviews::review(const json& spec) const {
  const auto token = spec.value("token", "");
  std::vector<std::string> wanted;
  for (const auto& a : spec.value("audiences", json::array()))
    if (a.is_string())
      wanted.push_back(a.get<std::string>());
  if (wanted.empty())
    wanted.push_back("https://kubernetes.default.svc");
  auto refused = [](const std::string& why) {
    return json{{"user", json::object()}, {"error", why}};
  };
  auto known = tokens_.find(token);
  if (known == tokens_.end())
    return refused("[invalid bearer token, service account token is not valid]");
  const auto& who = known->second;
  json matched = json::array();
  for (const auto& a : wanted)
    if (std::find(who.audiences.begin(), who.audiences.end(), a) != who.audiences.end())
      matched.push_back(a);
  if (matched.empty())
    return refused("[invalid bearer token, token audiences " + json(who.audiences).dump()
                   + " is invalid for the target audiences " + json(wanted).dump() + "]");
  json user = {{"username", who.username}, {"uid", who.uid}, {"groups", who.groups}};
  if (!who.extra.empty())
    user["extra"] = who.extra;
  return {{"authenticated", true}, {"user", user}, {"audiences", matched}};
}

} // namespace vigil::kube
