// The agent's record of events the control plane refused line by line (the
// only answer that drops an event): STATE-DIR/rejected-events.ndjson, one
// JSON object per line {"rejectedAt", "id", "reason", "event"}, so an
// operator can see what was lost and why. Bounded: at max_bytes the file
// becomes <path>.1 (replacing an older one) and a new file starts.
#pragma once

#include <cstddef>
#include <string>

#include "actors/agent/forwarder/forwarder_logic.hpp"
#include "messages/expected.hpp"
#include "messages/wall_time.hpp"

namespace vigil::agent {

class rejected_event_log {
public:
  explicit rejected_event_log(std::string path, std::size_t max_bytes = 4 << 20);

  /// Appends one record; failures name the path and the system's reason.
  status append(const rejected_event& event, wall_time at);

  const std::string& path() const { return path_; }

private:
  std::string path_;
  std::size_t max_bytes_;
};

/// One record (without the newline): the event as the JSON object it was
/// sent as, or as a string when it is not valid JSON.
std::string encode_rejected_event(const rejected_event& event, wall_time at);

} // namespace vigil::agent
