// The mailbox figures of the console's actors page: counts per message type,
// p50/p99 from the histogram, the busiest types first, and the types named as
// the protocol names them (its atoms, CAF's registered names).
#include "actors/supervisor/message_stats.hpp"

#include <string>

#include <caf/actor_system_config.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/message.hpp>
#include <gtest/gtest.h>

namespace vigil::message_stats_test {
struct unregistered {};
} // namespace vigil::message_stats_test

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(vigil::message_stats_test::unregistered)

namespace vigil {
namespace {

using namespace std::chrono_literals;
using clock_type = message_stats::clock;

message_stats::key key_of(const caf::message& m) {
  return message_stats::key_of(m.content());
}

TEST(message_stats, counts_types_and_reads_percentiles_from_the_histogram) {
  caf::actor_system_config cfg;
  caf::actor_system system{cfg};
  message_stats stats;
  const auto route = key_of(caf::make_message(caf::atom("route"), 1));
  const auto text = key_of(caf::make_message(std::string{"x"}));
  const auto t0 = clock_type::time_point{} + 1h;
  for (int i = 0; i < 98; ++i)
    stats.record(route, 1000ns, t0);
  stats.record(route, 5ms, t0);
  stats.record(route, 5ms, t0);
  stats.record(text, 300ns, t0);
  EXPECT_EQ(stats.handled(), 101u);
  auto s = stats.summary(system, t0);
  ASSERT_EQ(s["types"].size(), 2u);
  const auto& first = s["types"][0];
  EXPECT_EQ(first["type"], "route"); // the busiest first, named by its atom
  EXPECT_EQ(first["count"], 100);
  // 1 µs falls in [512 ns, 1024 ns): its upper bound is the p50.
  EXPECT_DOUBLE_EQ(first["p50Micros"].get<double>(), 1.024);
  // Two of a hundred took 5 ms: the p99 is theirs, capped at the slowest seen.
  EXPECT_DOUBLE_EQ(first["p99Micros"].get<double>(), 5000.0);
  EXPECT_DOUBLE_EQ(first["maxMicros"].get<double>(), 5000.0);
  EXPECT_EQ(s["types"][1]["type"], "@str"); // CAF's own name for it
  EXPECT_EQ(stats.summary(system, t0, 1)["types"].size(), 1u);
  // A type CAF was never told of is named as C++ spells it.
  const auto odd = key_of(caf::make_message(message_stats_test::unregistered{}));
  EXPECT_NE(message_stats::type_name(odd, system).find("unregistered"), std::string::npos)
    << message_stats::type_name(odd, system);
}

TEST(message_stats, the_rate_is_that_of_the_last_full_window) {
  message_stats stats;
  const auto k = key_of(caf::make_message(caf::atom("tick")));
  const auto t0 = clock_type::time_point{} + 1h;
  EXPECT_EQ(stats.per_second(t0), 0.0);
  for (int i = 0; i < 10; ++i)
    stats.record(k, 1us, t0 + i * 100ms);
  // No full window yet: ten in (at least) one second.
  EXPECT_DOUBLE_EQ(stats.per_second(t0 + 1s), 10.0);
  stats.record(k, 1us, t0 + 10s); // closes the window: 11 in 10 s
  EXPECT_DOUBLE_EQ(stats.per_second(t0 + 30s), 1.1);
}

} // namespace
} // namespace vigil
