// One kernel log line with its transport prefix taken off: dmesg `[  123.456]`,
// /dev/kmsg records, journald/RFC 3164 syslog headers. Pure, allocation-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "messages/wall_time.hpp"

namespace vigil::agent {

/// A line split into its timestamps and the kernel's own text. All views point
/// into the line given to split_kernel_log_line.
struct kernel_log_line {
  /// What the kernel (or the logging program) wrote: "NVRM: Xid (PCI:…): 48, …".
  std::string_view message;
  /// Microseconds since boot, from `[  123.456789]` or a /dev/kmsg record.
  std::optional<std::int64_t> kernel_time_us;
  /// The syslog/journald timestamp as written ("Oct 23 11:38:02",
  /// "2025-10-23T11:38:02.207323+00:00") or dmesg -T's "[Thu Oct 23 …]"; may be empty.
  std::string_view syslog_timestamp;
  /// The syslog tag without its colon ("kernel", "gpu-reset[88]"); may be empty.
  std::string_view tag;
};

/// Strips, in this order and each optional: leading blanks (dmesg continuation
/// lines), an RFC 3164 `<pri>`, a /dev/kmsg `pri,seq,usec,flags;` header, a
/// syslog timestamp + host + `tag:`, and a dmesg `[ seconds.micros ]` stamp.
/// A line without any prefix is its own message.
kernel_log_line split_kernel_log_line(std::string_view line);

/// The wall time of a syslog timestamp: RFC 3339 text as is; RFC 3164's
/// "Mmm dd hh:mm:ss[.frac]" in UTC of `year` (the format has no year).
/// nullopt for anything else, dmesg -T included.
std::optional<wall_time> syslog_wall_time(std::string_view timestamp, int year);

} // namespace vigil::agent
