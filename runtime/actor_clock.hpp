// vigil::clock over CAF's actor clock: the real steady clock in production,
// the test coordinator's virtual clock in actor tests.
#pragma once

#include <caf/actor_clock.hpp>

#include "runtime/clock.hpp"

namespace vigil {

class caf_clock final : public clock {
public:
  /// `wall_at_start` pins wall time for tests; production passes system time.
  caf_clock(const caf::actor_clock& source, wall_time wall_at_start) : source_(source) {
    anchor(source_.now(), wall_at_start);
  }

  steady_time now() const override { return source_.now(); }

private:
  const caf::actor_clock& source_;
};

} // namespace vigil
