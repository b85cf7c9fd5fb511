// Client-side pacing of API requests: a QPS + burst token bucket (client-go's
// default limiter shape) and exponential backoff with jitter that honours the
// server's Retry-After. Pure: time and randomness come in as arguments.
#pragma once

#include <algorithm>
#include <chrono>
#include <optional>

namespace vigil::kube {

using pacing_clock = std::chrono::steady_clock;

class token_bucket {
public:
  /// `qps` <= 0 turns the limiter off.
  token_bucket(double qps, double burst)
    : qps_(qps), burst_(std::max(1.0, burst)), tokens_(burst_) {}

  bool unlimited() const { return qps_ <= 0; }

  /// Takes a token when one is available at `now` and returns zero; else
  /// returns how long until one will be (and takes nothing).
  std::chrono::nanoseconds try_take(pacing_clock::time_point now) {
    if (unlimited())
      return {};
    refill(now);
    if (tokens_ >= 1.0) {
      tokens_ -= 1.0;
      return {};
    }
    return std::chrono::nanoseconds{static_cast<long long>((1.0 - tokens_) / qps_ * 1e9)};
  }

private:
  void refill(pacing_clock::time_point now) {
    if (last_ == pacing_clock::time_point{})
      last_ = now;
    const double elapsed = std::chrono::duration<double>(now - last_).count();
    tokens_ = std::min(burst_, tokens_ + elapsed * qps_);
    last_ = now;
  }

  double qps_;
  double burst_;
  double tokens_;
  pacing_clock::time_point last_{};
};

struct backoff_policy {
  std::chrono::milliseconds initial{200};
  std::chrono::milliseconds max{30000};
  int max_attempts = 6; ///< including the first
};

/// The wait before retry number `attempt` (1 = first retry): the server's
/// Retry-After when it gave one, else initial * 2^(attempt-1) capped at max,
/// scaled by a jitter factor in [0.5, 1.5) from `random01` in [0, 1).
inline std::chrono::milliseconds
retry_delay(const backoff_policy& policy, int attempt,
            std::optional<std::chrono::seconds> retry_after, double random01) {
  if (retry_after)
    return std::min<std::chrono::milliseconds>(*retry_after, policy.max);
  const int doublings = std::clamp(attempt - 1, 0, 20);
  const auto base =
    std::min<std::chrono::milliseconds>(policy.initial * (1LL << doublings), policy.max);
  return std::chrono::milliseconds{
    static_cast<long long>(static_cast<double>(base.count()) * (0.5 + random01))};
}

} // namespace vigil::kube
