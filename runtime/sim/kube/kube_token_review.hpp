// TokenReview (authentication.k8s.io/v1) in the Kubernetes API test server:
// the ServiceAccount tokens it vouches for, with the user, audiences and
// extra fields a real server reports for a pod-bound projected token.
// Created and answered, never stored, as on a real server.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace vigil::kube {

struct service_account_token {
  std::string username; ///< system:serviceaccount:<namespace>:<name>
  std::string uid;
  std::vector<std::string> groups;
  std::vector<std::string> audiences; ///< the token's `aud`
  /// e.g. authentication.kubernetes.io/node-name: [node], pod-name: [pod]
  std::map<std::string, std::vector<std::string>> extra;
};

class token_reviews {
public:
  void add(std::string token, service_account_token who);
  void revoke(const std::string& token);
  /// The status of a TokenReview for `spec` ({token, audiences}): a known
  /// token whose audiences meet the requested ones (or the API server's
  /// default, "https://kubernetes.default.svc", when none are requested) is
  /// authenticated with its user; anything else gets `error`, as a real
  /// server answers.
  nlohmann::json review(const nlohmann::json& spec) const;

private:
  std::map<std::string, service_account_token> tokens_;
};

} // namespace vigil::kube
