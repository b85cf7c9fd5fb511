// The authenticator actor: turns a bearer token into the identity the API
// server vouches for (TokenReview through the gateway): an agent's, bound to
// its node, or a /metrics reader's. Each answer is remembered for the token's
// lifetime (agent_identity.hpp's token_cache); concurrent requests for one
// token wait for a single review.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/control/auth/agent_identity.hpp"
#include "actors/gateway/kube_gateway_messages.hpp"
#include "actors/supervisor/message_stats.hpp"
#include "runtime/clock.hpp"

namespace vigil {

/// (authenticate_atom, authenticate_request): `done` is called once, from the
/// authenticator, with the identity or why there is none; a failure whose
/// `where` is "TokenReview" means the API server could not be asked (answer
/// 503 and let the agent retry), any other means the token is refused (401).
using authenticate_atom = caf::atom_constant<caf::atom("authn")>;

using authenticated = std::function<void(expected<control::agent_identity>)>;

struct authenticate_request {
  std::string token;
  control::token_use use = control::token_use::agent;
  authenticated done;
};

struct authenticator_state {
  kube_gateway_handle gateway;
  std::shared_ptr<const clock> time;
  control::token_review_settings settings;
  control::token_cache cache;
  /// By use and token (cache_key): one review for all who wait on it.
  std::unordered_map<std::string, std::vector<authenticated>> waiting;
  static inline const char* name = "authenticator";
};

using authenticator_actor =
  caf::stateful_actor<authenticator_state, observed<caf::event_based_actor>>;

caf::behavior authenticator(authenticator_actor* self, kube_gateway_handle gateway,
                            control::token_review_settings settings,
                            std::shared_ptr<const clock> time);

} // namespace vigil

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(vigil::authenticate_request)
