// The clock abstraction: every timer and window reads time from here, so
// actor tests drive it with CAF's virtual clock and hours pass in microseconds.
#pragma once

#include <chrono>

#include "messages/wall_time.hpp"

namespace vigil {

/// Monotonic time; the same type as caf::actor_clock::time_point.
using steady_time = std::chrono::steady_clock::time_point;

class clock {
public:
  virtual ~clock() = default;

  /// Monotonic now: windows, timeouts and backoff use this.
  virtual steady_time now() const = 0;

  /// Wall time that advances with now(): anchored once, so a virtual clock
  /// also moves wall time and journal timestamps stay deterministic in tests.
  wall_time wall_now() const {
    return anchor_wall_
           + std::chrono::duration_cast<std::chrono::nanoseconds>(now() - anchor_steady_);
  }

protected:
  void anchor(steady_time steady, wall_time wall) {
    anchor_steady_ = steady;
    anchor_wall_ = wall;
  }

private:
  steady_time anchor_steady_{};
  wall_time anchor_wall_{};
};

/// The system clock as wall time: what the processes anchor their clocks on,
/// and the debugging CLIs' own clock.
inline wall_time system_now() {
  return std::chrono::time_point_cast<wall_time::duration>(
    std::chrono::system_clock::now());
}

/// A clock the test moves by hand; for pure-logic tests without actors.
class manual_clock final : public clock {
public:
  explicit manual_clock(wall_time start = from_unix(1'700'000'000, 0)) {
    anchor(now_, start);
  }

  steady_time now() const override { return now_; }
  void advance(std::chrono::nanoseconds d) { now_ += d; }

private:
  steady_time now_{std::chrono::hours{1}};
};

} // namespace vigil
