// Collapses bursts of identical kernel-log events (same node, GPU, error code)
// into one event with a count, so a GPU logging 800,000 lines sends a handful.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "messages/health_event.hpp"
#include "messages/wall_time.hpp"

namespace vigil::agent {

/// A burst that ended: its first event, with metadata "burstCount",
/// "burstFirstSeen" and "burstLastSeen" (RFC 3339) filled in. Same id as the
/// event sent when the burst opened.
struct closed_burst {
  health_event event;
  std::uint64_t count = 0;
};

/// Emit-first policy. The first event of a burst is returned at once (with
/// burstCount "1") so detection is never delayed; later identical events within
/// `window` of that first one only raise the count. A burst closes when its
/// window has passed (on the next offer or expire) or when a healthy event
/// names its GPU (a reset: the next fault must go out at once); the caller gets
/// it as a closed_burst and may log it, count it, or forward it as a
/// store-only update — its id equals the first event's. Windows are fixed from
/// the burst's first event, so a steady stream yields one event per window.
/// Time is passed in; the grouper never reads a clock.
class burst_grouper {
public:
  explicit burst_grouper(std::chrono::nanoseconds window = std::chrono::minutes(3));

  /// Offers `event`, seen at `at`. Returns what to send now: the first event
  /// of a new burst, or a healthy event (never grouped); nullopt when it
  /// joined an open burst. Bursts this closes are appended to `closed`.
  std::optional<health_event> offer(health_event event, wall_time at,
                                    std::vector<closed_burst>& closed);

  /// Closes every burst whose window ended at or before `now`.
  void expire(wall_time now, std::vector<closed_burst>& closed);

  /// Closes every open burst (shutdown, end of a file).
  void close_all(std::vector<closed_burst>& closed);

  std::size_t open_bursts() const { return open_.size(); }

  /// What makes two events "identical": node, component class, the GPU (its
  /// UUID, else PCI), the NVLink and the NIC where given, and the error codes.
  static std::string burst_key(const health_event& event);

private:
  struct burst {
    health_event first;
    wall_time first_seen;
    wall_time last_seen;
    std::uint64_t count = 0;
  };

  static closed_burst close(burst&& b);

  std::chrono::nanoseconds window_;
  std::map<std::string, burst> open_;
};

} // namespace vigil::agent
