#include "actors/control/auth/authenticator.hpp"

#include <caf/all.hpp>

#include "actors/gateway/kube_gateway_messages.hpp"
#include "runtime/logging.hpp"

namespace vigil {

namespace {

using authenticator_actor = caf::stateful_actor<authenticator_state>;

void answer_waiting(authenticator_actor* self, const std::string& token,
                    const expected<control::agent_identity>& answer) {
  auto& st = self->state;
  auto waiting = std::move(st.waiting[token]);
  st.waiting.erase(token);
  for (auto& done : waiting)
    done(answer);
}

void review(authenticator_actor* self, const std::string& token) {
  auto& st = self->state;
  ++st.reviews;
  self
    ->request(st.gateway, caf::infinite,
              control::token_review_request(token, st.settings.audience))
    .then(
      [=](const kube::kube_result& result) {
        auto& st = self->state;
        if (!result.ok()) {
          // Not the token's fault: nothing is remembered, the agent retries.
          component_logger("ingest")->warn("TokenReview failed: {}",
                                           result.error().to_string());
          answer_waiting(self, token,
                         failure{"TokenReview", "the API server could not check the "
                                                "token: "
                                                  + result.error().to_string()});
          return;
        }
        auto answer = control::identity_from_review(result.response().body, st.settings);
        // An answer that could not be read is not remembered either.
        const bool unreadable = !answer && answer.error().where == "TokenReview";
        if (!unreadable)
          st.cache.remember(token, answer, unix_seconds(st.time->wall_now()));
        answer_waiting(self, token, answer);
      },
      [=](const caf::error& e) {
        answer_waiting(
          self, token,
          failure{"TokenReview", "the gateway did not answer: " + caf::to_string(e)});
      });
}

} // namespace

caf::behavior authenticator(caf::stateful_actor<authenticator_state>* self,
                            caf::actor gateway, control::token_review_settings settings,
                            std::shared_ptr<const clock> time) {
  auto& st = self->state;
  st.gateway = std::move(gateway);
  st.settings = std::move(settings);
  st.time = std::move(time);
  return {
    [=](authenticate_atom, authenticate_request& request) {
      auto& st = self->state;
      if (const auto* known =
            st.cache.find(request.token, unix_seconds(st.time->wall_now()))) {
        request.done(*known);
        return;
      }
      auto& waiting = st.waiting[request.token];
      waiting.push_back(std::move(request.done));
      if (waiting.size() == 1)
        review(self, request.token);
    },
  };
}

} // namespace vigil
