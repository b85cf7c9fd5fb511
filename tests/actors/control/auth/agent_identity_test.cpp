// Agents' identities: the bearer header, what a TokenReview answer grants,
// the token's expiry, the own-node rule and the cache of answers.
#include "actors/control/auth/agent_identity.hpp"

#include "actors/control/ingest/ingest_logic.hpp"

#include <cstdint>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace vigil::control {
namespace {

using json = nlohmann::json;

std::string base64url(const std::string& in) {
  static const char* table =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  std::uint32_t value = 0;
  int bits = -6;
  for (unsigned char c : in) {
    value = ((value << 8) | c) & 0xFFFFFFu;
    bits += 8;
    while (bits >= 0) {
      out += table[(value >> bits) & 0x3F];
      bits -= 6;
    }
  }
  if (bits > -6)
    out += table[((value << 8) >> (bits + 8)) & 0x3F];
  return out; // no padding, as in a JWT
}

std::string jwt(const json& claims) {
  return base64url(R"({"alg":"RS256"})") + "." + base64url(claims.dump()) + ".signature";
}

json review(const std::string& user, const json& extra, bool authenticated = true,
            const json& audiences = json::array({"vigil"})) {
  json status = {{"authenticated", authenticated},
                 {"user", {{"username", user}, {"extra", extra}}},
                 {"audiences", audiences}};
  return {{"kind", "TokenReview"}, {"status", status}};
}

const token_review_settings settings{};
const std::string agent = "system:serviceaccount:vigil:vigil-agent";
const json on_node_7 = {{node_name_extra, {"gpu-node-7"}}};

TEST(agent_identity, bearer_header) {
  EXPECT_EQ(bearer_token("Bearer abc"), "abc");
  EXPECT_EQ(bearer_token("  bearer   abc  "), "abc");
  EXPECT_EQ(bearer_token("Basic abc"), std::nullopt);
  EXPECT_EQ(bearer_token("Bearer "), std::nullopt);
  EXPECT_EQ(bearer_token(""), std::nullopt);
}

TEST(agent_identity, the_review_request_names_the_audience) {
  auto request = token_review_request("tok", audiences_for(token_use::agent, settings));
  EXPECT_EQ(request.verb, "POST");
  EXPECT_EQ(request.path, "/apis/authentication.k8s.io/v1/tokenreviews");
  auto body = json::parse(request.body);
  EXPECT_EQ(body["kind"], "TokenReview");
  EXPECT_EQ(body["spec"]["token"], "tok");
  EXPECT_EQ(body["spec"]["audiences"], json::array({"vigil"}));
  // A reader's token is the API server's own audience: none is named.
  auto reader = json::parse(
    token_review_request("tok", audiences_for(token_use::metrics_reader, settings)).body);
  EXPECT_FALSE(reader["spec"].contains("audiences"));
}

TEST(agent_identity, only_listed_accounts_read_metrics) {
  token_review_settings readers;
  readers.metrics_readers = {"system:serviceaccount:monitoring:prometheus-k8s"};
  auto prometheus =
    review("system:serviceaccount:monitoring:prometheus-k8s", json::object(), true,
           json::array({"https://kubernetes.default.svc"}));
  auto ok = review_answer(token_use::metrics_reader, prometheus.dump(), readers);
  ASSERT_TRUE(ok.has_value()) << ok.error().to_string();
  EXPECT_EQ(ok->username, "system:serviceaccount:monitoring:prometheus-k8s");
  auto agent_token =
    review_answer(token_use::metrics_reader, review(agent, on_node_7).dump(), readers);
  ASSERT_FALSE(agent_token.has_value());
  EXPECT_NE(agent_token.error().what.find("may not read /metrics"), std::string::npos);
  // The same answer read for an agent's post names the account it is not.
  EXPECT_FALSE(review_answer(token_use::agent, prometheus.dump(), readers).has_value());
}

TEST(agent_identity, an_agent_bound_to_a_node_is_granted_that_node) {
  auto who = identity_from_review(review(agent, on_node_7).dump(), settings);
  ASSERT_TRUE(who.has_value()) << who.error().to_string();
  EXPECT_EQ(who->node, "gpu-node-7");
  EXPECT_EQ(who->username, agent);
  EXPECT_FALSE(who->any_node);
}

TEST(agent_identity, every_refusal_says_why) {
  auto refused = json{{"status", {{"user", json::object()}, {"error", "token expired"}}}};
  auto expired = identity_from_review(refused.dump(), settings);
  ASSERT_FALSE(expired.has_value());
  EXPECT_EQ(expired.error().what, "token expired");
  auto other = identity_from_review(
    review("system:serviceaccount:default:builder", on_node_7).dump(), settings);
  ASSERT_FALSE(other.has_value());
  EXPECT_NE(other.error().what.find("builder"), std::string::npos);
  auto unbound = identity_from_review(review(agent, json::object()).dump(), settings);
  ASSERT_FALSE(unbound.has_value());
  EXPECT_NE(unbound.error().what.find("not bound to a node"), std::string::npos);
  auto audience = identity_from_review(
    review(agent, on_node_7, true, json::array({"https://kubernetes.default.svc"}))
      .dump(),
    settings);
  ASSERT_FALSE(audience.has_value());
  EXPECT_NE(audience.error().what.find("audience vigil"), std::string::npos);
  auto garbage = identity_from_review("<html>", settings);
  ASSERT_FALSE(garbage.has_value());
  EXPECT_EQ(garbage.error().where, "TokenReview"); // not the token's fault
}

TEST(agent_identity, a_token_reports_for_its_node_only) {
  agent_identity who{agent, "gpu-node-7", false};
  EXPECT_EQ(foreign_node(who, {"gpu-node-7", "gpu-node-7"}), std::nullopt);
  EXPECT_EQ(foreign_node(who, {"gpu-node-7", "gpu-node-8"}), "gpu-node-8");
  EXPECT_EQ(foreign_node({"static token", "", true}, {"any"}), std::nullopt);
}

TEST(agent_identity, expiry_comes_from_the_jwt) {
  EXPECT_EQ(token_expiry(jwt({{"exp", 1700000000}, {"aud", {"vigil"}}})), 1700000000);
  EXPECT_EQ(token_expiry(jwt({{"aud", "vigil"}})), std::nullopt);
  EXPECT_EQ(token_expiry("static-token"), std::nullopt);
  EXPECT_EQ(token_expiry("a.%%%.c"), std::nullopt);
}

TEST(agent_identity, answers_are_remembered_for_the_token_lifetime) {
  token_cache cache({3600, 10, 3});
  const auto token = jwt({{"exp", 1000 + 600}});
  cache.remember(token, agent_identity{agent, "n1", false}, 1000);
  ASSERT_NE(cache.find(token, 1599), nullptr);
  EXPECT_EQ(cache.find(token, 1600), nullptr); // the token expired
  cache.remember("opaque", agent_identity{agent, "n1", false}, 1000);
  EXPECT_NE(cache.find("opaque", 1000 + 3599), nullptr);
  EXPECT_EQ(cache.find("opaque", 1000 + 3600), nullptr);
  cache.remember("bad", failure{"bearer token", "no"}, 1000);
  ASSERT_NE(cache.find("bad", 1009), nullptr);
  EXPECT_FALSE(cache.find("bad", 1009)->has_value());
  EXPECT_EQ(cache.find("bad", 1010), nullptr);
  // Bounded: a full cache drops expired answers first, then everything.
  cache.remember("x", failure{"bearer token", "no"}, 5000);
  EXPECT_LE(cache.size(), 3u);
  EXPECT_NE(cache.find("x", 5000), nullptr);
}

} // namespace
} // namespace vigil::control
