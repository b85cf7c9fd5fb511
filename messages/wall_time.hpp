// Wall-clock instants with nanosecond precision and their RFC 3339 text form,
// as HealthEvents and journal rows carry them.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "messages/expected.hpp"

namespace vigil {

using wall_time =
  std::chrono::time_point<std::chrono::system_clock, std::chrono::nanoseconds>;

/// Seconds and nanoseconds since the Unix epoch, as protobuf's Timestamp has them.
wall_time from_unix(std::int64_t seconds, std::int32_t nanos);
std::int64_t unix_seconds(wall_time t);
std::int32_t unix_nanos(wall_time t);

/// "2025-10-23T11:38:02.207323127Z": UTC, with 0, 3, 6 or 9 fraction digits
/// (the shortest that is exact), as protobuf's JSON mapping writes Timestamp.
std::string format_rfc3339(wall_time t);

/// Accepts "YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)"; 't' and 'z' too.
expected<wall_time> parse_rfc3339(std::string_view text);

} // namespace vigil
