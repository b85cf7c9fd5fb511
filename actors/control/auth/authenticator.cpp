#include "actors/control/auth/authenticator.hpp"

#include <caf/all.hpp>

#include "actors/gateway/kube_gateway_messages.hpp"
#include "runtime/logging.hpp"

namespace vigil {

namespace {

// A token is reviewed once per use: an agent's token is not a reader's. The
// prefix holds no '.', so a JWT's claims (its expiry) stay its second part.
std::string cache_key(control::token_use use, const std::string& token) {
  return (use == control::token_use::agent ? "agent:" : "metrics:") + token;
}

void answer_waiting(authenticator_actor* self, const std::string& key,
                    const expected<control::agent_identity>& answer) {
  auto& st = self->state;
  auto waiting = std::move(st.waiting[key]);
  st.waiting.erase(key);
  for (auto& done : waiting)
    done(answer);
}

void review(authenticator_actor* self, control::token_use use, const std::string& token) {
  auto& st = self->state;
  const auto key = cache_key(use, token);
  self
    ->request(
      st.gateway, caf::infinite,
      control::token_review_request(token, control::audiences_for(use, st.settings)))
    .then(
      [=](const kube::kube_result& result) {
        auto& st = self->state;
        if (!result.ok()) {
          // Not the token's fault: nothing is remembered, the agent retries.
          component_logger("ingest")->warn("TokenReview failed: {}",
                                           result.error().to_string());
          answer_waiting(self, key,
                         failure{"TokenReview", "the API server could not check the "
                                                "token: "
                                                  + result.error().to_string()});
          return;
        }
        auto answer = control::review_answer(use, result.response().body, st.settings);
        // An answer that could not be read is not remembered either.
        const bool unreadable = !answer && answer.error().where == "TokenReview";
        if (!unreadable)
          st.cache.remember(key, answer, unix_seconds(st.time->wall_now()));
        answer_waiting(self, key, answer);
      },
      [=](const caf::error& e) {
        answer_waiting(
          self, key,
          failure{"TokenReview", "the gateway did not answer: " + caf::to_string(e)});
      });
}

} // namespace

caf::behavior authenticator(authenticator_actor* self, kube_gateway_handle gateway,
                            control::token_review_settings settings,
                            std::shared_ptr<const clock> time) {
  auto& st = self->state;
  st.gateway = std::move(gateway);
  st.settings = std::move(settings);
  st.time = std::move(time);
  return {
    [=](authenticate_atom, authenticate_request& request) {
      auto& st = self->state;
      const auto key = cache_key(request.use, request.token);
      if (const auto* known = st.cache.find(key, unix_seconds(st.time->wall_now()))) {
        request.done(*known);
        return;
      }
      auto& waiting = st.waiting[key];
      waiting.push_back(std::move(request.done));
      if (waiting.size() == 1)
        review(self, request.use, request.token);
    },
  };
}

} // namespace vigil
