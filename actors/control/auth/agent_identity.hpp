// Who is posting to the control plane: the operator's static token (any
// node), or an agent whose projected ServiceAccount token (audience `vigil`)
// the API server vouches for by TokenReview, bound to the node its pod runs
// on. An agent may report only for its own node.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "messages/expected.hpp"
#include "runtime/kube/kube_api.hpp"

namespace vigil::control {

struct agent_identity {
  std::string username;  ///< "system:serviceaccount:vigil:vigil-agent", or "static token"
  std::string node;      ///< the node the token is bound to; "" with any_node
  bool any_node = false; ///< the operator's static token (or no authentication)
};

/// What a token is presented for: an agent's post (audience `vigil`, bound
/// to a node) or a scrape of /metrics (the API server's own audience: the
/// scraper sends its ServiceAccount's token).
enum class token_use { agent, metrics_reader };

struct token_review_settings {
  std::string audience = "vigil";
  /// The agents' ServiceAccount as TokenReview names it:
  /// system:serviceaccount:<namespace>:<name>.
  std::string agent_username = "system:serviceaccount:vigil:vigil-agent";
  /// The accounts that may read /metrics, named the same way.
  std::vector<std::string> metrics_readers;
};

/// The Kubernetes extra key naming the node of a pod-bound token (1.30+,
/// ServiceAccountTokenPodNodeInfo).
inline constexpr const char* node_name_extra = "authentication.kubernetes.io/node-name";

/// POST /apis/authentication.k8s.io/v1/tokenreviews for `token`, asking for
/// `audiences` (none: the API server's own).
kube::kube_request token_review_request(const std::string& token,
                                        const std::vector<std::string>& audiences);

/// The audiences a token presented for `use` must carry.
std::vector<std::string> audiences_for(token_use use,
                                       const token_review_settings& settings);

/// The identity a TokenReview answer grants: authenticated, for the agents'
/// account, with the audience, bound to a node. A failure says which of these
/// is missing (the error the API server gave, the other account's name …).
expected<agent_identity> identity_from_review(std::string_view body,
                                              const token_review_settings& settings);

/// The reader a TokenReview answer names, when it is one of the accounts
/// allowed to read /metrics.
expected<agent_identity> reader_from_review(std::string_view body,
                                            const token_review_settings& settings);

/// identity_from_review or reader_from_review, by `use`.
expected<agent_identity> review_answer(token_use use, std::string_view body,
                                       const token_review_settings& settings);

/// The `exp` claim (seconds since the epoch) of a JWT; nullopt for a token
/// that is not one, or without the claim.
std::optional<std::int64_t> token_expiry(std::string_view token);

/// The first of `nodes` that `who` may not report for.
std::optional<std::string> foreign_node(const agent_identity& who,
                                        const std::vector<std::string>& nodes);

/// TokenReview answers remembered per token: a granted identity until the
/// token expires (at most `max_granted`), a refusal for `refused_for`, so a
/// busy agent costs one review per token and a bad token cannot flood the
/// API server. Bounded: expired entries go first, then everything.
class token_cache {
public:
  using clock_seconds = std::int64_t; ///< unix seconds

  struct settings {
    std::int64_t max_granted = 3600;
    std::int64_t refused_for = 10;
    std::size_t capacity = 20000;
  };

  token_cache() = default;
  explicit token_cache(settings s) : settings_(s) {}

  /// The remembered answer, if still fresh at `now`.
  const expected<agent_identity>* find(const std::string& token, clock_seconds now) const;
  void remember(const std::string& token, expected<agent_identity> answer,
                clock_seconds now);
  std::size_t size() const { return entries_.size(); }

private:
  struct entry {
    expected<agent_identity> answer;
    clock_seconds until;
  };
  settings settings_;
  std::unordered_map<std::string, entry> entries_;
};

} // namespace vigil::control
