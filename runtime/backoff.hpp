// Doubling retry delays, as the control plane's actors use them after a failed
// request: the first wait is `initial`, each next one twice the last, capped.
#pragma once

#include <algorithm>

#include <caf/timespan.hpp>

namespace vigil {

/// The delay to wait now; advances `current` (zero: nothing failed yet) to
/// the one after it. A success resets `current` to zero.
inline caf::timespan take_backoff(caf::timespan& current, caf::timespan initial,
                                  caf::timespan max) {
  if (current == caf::timespan{})
    current = initial;
  const auto now = current;
  current = std::min(current * 2, max);
  return now;
}

} // namespace vigil
