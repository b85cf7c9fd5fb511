#include "messages/wall_time.hpp"

#include <gtest/gtest.h>

namespace vigil {
namespace {

TEST(wall_time, formats_shortest_exact_fraction) {
  EXPECT_EQ(format_rfc3339(from_unix(0, 0)), "1970-01-01T00:00:00Z");
  EXPECT_EQ(format_rfc3339(from_unix(1761219482, 200000000)), "2025-10-23T11:38:02.200Z");
  EXPECT_EQ(format_rfc3339(from_unix(1761219482, 207323000)),
            "2025-10-23T11:38:02.207323Z");
  EXPECT_EQ(format_rfc3339(from_unix(1761219482, 207323127)),
            "2025-10-23T11:38:02.207323127Z");
  EXPECT_EQ(format_rfc3339(from_unix(951782400, 0)), "2000-02-29T00:00:00Z");
  EXPECT_EQ(format_rfc3339(from_unix(-1, 0)), "1969-12-31T23:59:59Z");
}

TEST(wall_time, parses_offsets_and_fractions) {
  auto t = parse_rfc3339("2025-10-23T13:38:02.207323127+02:00");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(unix_seconds(*t), 1761219482);
  EXPECT_EQ(unix_nanos(*t), 207323127);
  auto lower = parse_rfc3339("2025-10-23t11:38:02z");
  ASSERT_TRUE(lower.has_value());
  EXPECT_EQ(unix_seconds(*lower), 1761219482);
  auto west = parse_rfc3339("2025-10-23T06:38:02-05:00");
  ASSERT_TRUE(west.has_value());
  EXPECT_EQ(unix_seconds(*west), 1761219482);
}

TEST(wall_time, round_trips) {
  for (auto secs : {0LL, 1LL, 951782400LL, 1761219482LL, 4102444800LL})
    for (auto nanos : {0, 1, 1000, 999999999}) {
      auto t = from_unix(secs, nanos);
      auto back = parse_rfc3339(format_rfc3339(t));
      ASSERT_TRUE(back.has_value());
      EXPECT_EQ(*back, t);
    }
}

TEST(wall_time, rejects_malformed_text) {
  for (const char* bad :
       {"", "2025", "2025-10-23", "2025-10-23T11:38:02", "2025-10-23 11:38:02Z",
        "2025-02-30T00:00:00Z", "2025-10-23T24:00:00Z", "2025-10-23T11:38:02.Z",
        "2025-10-23T11:38:02Zjunk", "2025-10-23T11:38:02+0200", "abcd-ef-ghTij:kl:mnZ",
        // beyond what 64-bit nanoseconds hold (was an overflow, found by the console's
        // history test)
        "2999-01-01T00:00:00Z", "2262-04-12T00:00:00Z", "1600-01-01T00:00:00Z"}) {
    auto t = parse_rfc3339(bad);
    EXPECT_FALSE(t.has_value()) << bad;
  }
}

TEST(wall_time, the_edges_a_nanosecond_clock_holds) {
  EXPECT_TRUE(parse_rfc3339("2262-04-10T00:00:00Z").has_value());
  EXPECT_TRUE(parse_rfc3339("1678-01-01T00:00:00Z").has_value());
  auto far = parse_rfc3339("9999-12-31T23:59:59Z");
  ASSERT_FALSE(far.has_value());
  EXPECT_NE(far.error().what.find("1678 to 2262"), std::string::npos);
}

} // namespace
} // namespace vigil
