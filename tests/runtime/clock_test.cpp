// vigil::clock over CAF's virtual clock: advancing test time moves both the
// steady and the wall reading, so windows and journal timestamps are exact.
#define CAF_SUITE clock
#include <caf/test/dsl.hpp>

#include "runtime/actor_clock.hpp"

using namespace caf;
using namespace vigil;

CAF_TEST_FIXTURE_SCOPE(clock_tests, test_coordinator_fixture<>)

CAF_TEST(caf_clock_follows_the_virtual_clock) {
  const auto start = from_unix(1'761'219'482, 0);
  caf_clock clk{sched.clock(), start};
  const auto t0 = clk.now();
  CAF_CHECK_EQUAL(format_rfc3339(clk.wall_now()), "2025-10-23T11:38:02Z");
  sched.clock().current_time += std::chrono::hours{3};
  CAF_CHECK(clk.now() - t0 == std::chrono::hours{3});
  CAF_CHECK_EQUAL(format_rfc3339(clk.wall_now()), "2025-10-23T14:38:02Z");
}

CAF_TEST(manual_clock_moves_by_hand) {
  manual_clock clk{from_unix(0, 0)};
  clk.advance(std::chrono::milliseconds{1500});
  CAF_CHECK_EQUAL(format_rfc3339(clk.wall_now()), "1970-01-01T00:00:01.500Z");
}

CAF_TEST_FIXTURE_SCOPE_END()
