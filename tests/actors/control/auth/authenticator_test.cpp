// The authenticator actor: one TokenReview per token however many requests
// wait for it, answers remembered (a grant until the token expires, a
// refusal for 10 s), and an API server failure never remembered.
#define CAF_SUITE control_authenticator
#include <caf/test/dsl.hpp>

#include "actors/control/auth/authenticator.hpp"
#include "tests/actors/control/control_fixture.hpp"

using namespace caf;
using namespace vigil;
using namespace vigil::test;

namespace {

struct authenticator_fixture : control_fixture {
  actor auth;
  std::vector<vigil::expected<control::agent_identity>> answers;

  authenticator_fixture() {
    kube::service_account_token agent;
    agent.username = "system:serviceaccount:vigil:vigil-agent";
    agent.audiences = {"vigil"};
    agent.extra = {{control::node_name_extra, {"node-1"}}};
    store->token_reviews().add("agent-token", agent);
    auth = sys.spawn(authenticator, gateway, control::token_review_settings{}, time);
  }

  ~authenticator_fixture() { anon_send_exit(auth, exit_reason::user_shutdown); }

  void authenticate(const std::string& token) {
    authenticate_request request;
    request.token = token;
    request.done = [this](vigil::expected<control::agent_identity> who) {
      answers.push_back(std::move(who));
    };
    anon_send(auth, authenticate_atom::value, std::move(request));
  }

  size_t reviews() {
    size_t n = 0;
    for (const auto& r : deref<fake_gateway_actor>(gateway).state.seen)
      n += r.path == "/apis/authentication.k8s.io/v1/tokenreviews";
    return n;
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(control_authenticator_tests, authenticator_fixture)

CAF_TEST(requests_for_one_token_share_one_review_and_its_answer_is_remembered) {
  authenticate("agent-token");
  authenticate("agent-token");
  run();
  CAF_CHECK_EQUAL(reviews(), 1u);
  CAF_REQUIRE_EQUAL(answers.size(), 2u);
  for (const auto& who : answers) {
    CAF_REQUIRE(who.has_value());
    CAF_CHECK_EQUAL(who->node, "node-1");
  }
  // Revoked at the API server, remembered here until the token expires (an
  // opaque token: an hour at most).
  store->token_reviews().revoke("agent-token");
  authenticate("agent-token");
  run();
  CAF_CHECK_EQUAL(reviews(), 1u);
  CAF_CHECK(answers.back().has_value());
  advance(std::chrono::hours{1});
  authenticate("agent-token");
  run();
  CAF_CHECK_EQUAL(reviews(), 2u);
  CAF_CHECK(!answers.back().has_value());
}

CAF_TEST(a_refusal_is_remembered_for_ten_seconds) {
  authenticate("forged");
  run();
  CAF_REQUIRE(!answers.back().has_value());
  CAF_CHECK_EQUAL(answers.back().error().where, "bearer token");
  authenticate("forged");
  run();
  CAF_CHECK_EQUAL(reviews(), 1u);
  advance(std::chrono::seconds{11});
  authenticate("forged");
  run();
  CAF_CHECK_EQUAL(reviews(), 2u);
}

CAF_TEST(an_api_server_failure_is_not_the_tokens_fault_and_not_remembered) {
  deref<fake_gateway_actor>(gateway).state.fail_next = {503};
  authenticate("agent-token");
  run();
  CAF_REQUIRE(!answers.back().has_value());
  CAF_CHECK_EQUAL(answers.back().error().where, "TokenReview");
  authenticate("agent-token");
  run();
  CAF_CHECK_EQUAL(reviews(), 2u);
  CAF_CHECK(answers.back().has_value());
}

CAF_TEST_FIXTURE_SCOPE_END()
