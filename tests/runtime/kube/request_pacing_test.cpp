#include "runtime/kube/request_pacing.hpp"

#include <gtest/gtest.h>

namespace vigil::kube {
namespace {

using namespace std::chrono_literals;

TEST(token_bucket, burst_then_rate) {
  token_bucket bucket(10, 3); // 10/s, burst 3
  const pacing_clock::time_point t0{1s};
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(bucket.try_take(t0).count(), 0) << i;
  auto wait = bucket.try_take(t0);
  EXPECT_GT(wait, 99ms);
  EXPECT_LE(wait, 100ms);
  EXPECT_GT(bucket.try_take(t0 + 50ms).count(), 0); // half a token
  EXPECT_EQ(bucket.try_take(t0 + 100ms).count(), 0);
}

TEST(token_bucket, off_when_qps_is_zero) {
  token_bucket bucket(0, 0);
  for (int i = 0; i < 1000; ++i)
    EXPECT_EQ(bucket.try_take(pacing_clock::time_point{}).count(), 0);
}

TEST(retry_delay, exponential_with_jitter_capped_and_retry_after_wins) {
  backoff_policy p{200ms, 5000ms, 6};
  EXPECT_EQ(retry_delay(p, 1, std::nullopt, 0.5), 200ms);
  EXPECT_EQ(retry_delay(p, 2, std::nullopt, 0.5), 400ms);
  EXPECT_EQ(retry_delay(p, 3, std::nullopt, 0.0), 400ms); // 800 * 0.5
  EXPECT_EQ(retry_delay(p, 10, std::nullopt, 0.5), 5000ms);
  EXPECT_EQ(retry_delay(p, 1, 3s, 0.9), 3000ms);
  EXPECT_EQ(retry_delay(p, 1, 60s, 0.9), 5000ms);
}

} // namespace
} // namespace vigil::kube
