#include "actors/control/leader/lease_election.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace vigil::control {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

const wall_time now = from_unix(1'800'000'000, 123'456'789);

lease_config config() {
  lease_config c;
  c.identity = "replica-a";
  return c;
}

lease_record held_by(const std::string& holder, wall_time renewed) {
  lease_record r;
  r.holder = holder;
  r.duration = 15s;
  r.renewed = renewed;
  r.acquired = renewed - 1h;
  r.transitions = 4;
  r.resource_version = "42";
  return r;
}

TEST(lease_election, no_lease_is_created_holding_it) {
  auto step = next_lease_step(std::nullopt, config(), now);
  ASSERT_EQ(step.what, lease_step::kind::create);
  auto body = json::parse(step.body);
  EXPECT_EQ(body["kind"], "Lease");
  EXPECT_EQ(body["metadata"]["namespace"], "vigil");
  EXPECT_EQ(body["spec"]["holderIdentity"], "replica-a");
  EXPECT_EQ(body["spec"]["leaseDurationSeconds"], 15);
  EXPECT_EQ(body["spec"]["renewTime"], "2027-01-15T08:00:00.123456Z"); // MicroTime
  auto request = lease_write_request(config(), step);
  EXPECT_EQ(request.verb, "POST");
  EXPECT_EQ(request.path, "/apis/coordination.k8s.io/v1/namespaces/vigil/leases");
}

TEST(lease_election, our_lease_is_renewed_with_its_resource_version) {
  auto step = next_lease_step(held_by("replica-a", now - 2s), config(), now);
  ASSERT_EQ(step.what, lease_step::kind::update);
  EXPECT_FALSE(step.takeover);
  auto body = json::parse(step.body);
  EXPECT_EQ(body["metadata"]["resourceVersion"], "42");
  EXPECT_EQ(body["spec"]["leaseTransitions"], 4);
  EXPECT_EQ(lease_write_request(config(), step).verb, "PUT");
}

TEST(lease_election, a_live_lease_of_another_replica_is_waited_for) {
  auto step = next_lease_step(held_by("replica-b", now - 14s), config(), now);
  EXPECT_EQ(step.what, lease_step::kind::wait);
  EXPECT_EQ(step.holder, "replica-b");
}

TEST(lease_election, an_expired_or_released_lease_is_taken_over) {
  auto expired = next_lease_step(held_by("replica-b", now - 15s), config(), now);
  ASSERT_EQ(expired.what, lease_step::kind::update);
  EXPECT_TRUE(expired.takeover);
  EXPECT_EQ(json::parse(expired.body)["spec"]["leaseTransitions"], 5);
  auto released = next_lease_step(held_by("", now), config(), now);
  EXPECT_EQ(released.what, lease_step::kind::update);
}

TEST(lease_election, only_the_holder_releases_and_a_released_lease_is_free) {
  EXPECT_FALSE(release_step(held_by("replica-b", now), config(), now));
  auto step = release_step(held_by("replica-a", now), config(), now);
  ASSERT_TRUE(step.has_value());
  auto body = json::parse(step->body);
  EXPECT_EQ(body["spec"]["holderIdentity"], "");
  EXPECT_EQ(body["metadata"]["resourceVersion"], "42");
  auto released = read_lease(body.dump());
  ASSERT_TRUE(released.has_value());
  lease_config other = config();
  other.identity = "replica-b";
  EXPECT_EQ(next_lease_step(*released, other, now).what, lease_step::kind::update);
}

TEST(lease_election, leases_are_read_and_garbage_named) {
  auto lease = read_lease(R"({"kind":"Lease","metadata":{"resourceVersion":"7"},
    "spec":{"holderIdentity":"b","leaseDurationSeconds":30,"leaseTransitions":2,
    "renewTime":"2027-01-15T08:00:00.000000Z"}})");
  ASSERT_TRUE(lease.has_value()) << lease.error().to_string();
  EXPECT_EQ(lease->holder, "b");
  EXPECT_EQ(lease->duration, 30s);
  EXPECT_EQ(lease->transitions, 2);
  EXPECT_EQ(lease->resource_version, "7");
  ASSERT_TRUE(lease->renewed.has_value());
  EXPECT_EQ(unix_seconds(*lease->renewed), 1'800'000'000);
  EXPECT_FALSE(read_lease("{}").has_value());
  EXPECT_FALSE(read_lease(R"({"kind":"Node","metadata":{"name":"n"}})").has_value());
  EXPECT_FALSE(read_lease(R"({"kind":7,"metadata":{"name":"n"}})").has_value());
  // An item of a LIST: the API server leaves its kind and apiVersion out.
  auto listed = read_lease(R"({"metadata":{"name":"vigil-control-shard-3",
    "resourceVersion":"9"},"spec":{"holderIdentity":"a","leaseDurationSeconds":15}})");
  ASSERT_TRUE(listed.has_value()) << listed.error().to_string();
  EXPECT_EQ(listed->holder, "a");
  EXPECT_EQ(listed->resource_version, "9");
  EXPECT_FALSE(read_lease("garbage").has_value());
  auto bad = read_lease(R"({"kind":"Lease","spec":{"leaseDurationSeconds":"long"}})");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().to_string().find("leaseDurationSeconds"), std::string::npos);
}

} // namespace
} // namespace vigil::control
