// Reads kernel records from /dev/kmsg without blocking: resumes after the last
// sequence number handled and counts records the ring buffer overwrote.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actors/agent/logsource/kernel_log_source.hpp"

namespace vigil::agent {

/// One /dev/kmsg record header and message: "6,1234,5678,-;msg".
struct kmsg_record {
  int priority = 0;         ///< facility * 8 + level, as written
  std::uint64_t seq = 0;    ///< the kernel's record sequence number
  std::int64_t usec = 0;    ///< microseconds since boot
  char flags = '-';         ///< '-' or 'c' (continuation); nothing else is known
  std::string_view message; ///< after ';', as the kernel escaped it (\xNN)
};

/// Parses one record line (without its newline); nullopt when the header is
/// malformed. Dictionary lines (" KEY=value") are not records.
std::optional<kmsg_record> parse_kmsg_record(std::string_view line);

/// Like ::read(2); tests pass one that fails with EPIPE to simulate overruns.
using kmsg_read_function = std::function<long(int fd, char* buffer, std::size_t size)>;

/// Time since boot on the clock kmsg stamps records with (CLOCK_MONOTONIC);
/// for log_source_options::since_boot.
std::chrono::microseconds monotonic_since_boot();

/// /dev/kmsg, or any file or FIFO holding kmsg-formatted records (tests).
/// Resumed: skips records up to the saved sequence number. Fresh or rebooted:
/// skips records older than the lookback window (by their since-boot stamp).
/// A gap in sequence numbers counts as lost lines; read() failing with EPIPE
/// (ring overrun) is counted and reading goes on with the oldest record left.
class kmsg_source final : public kernel_log_source {
public:
  explicit kmsg_source(const log_source_options& options, kmsg_read_function read = {});
  ~kmsg_source() override;

  std::size_t poll(std::vector<log_line>& out, std::size_t max_lines) override;
  log_position position() const override;

private:
  bool ensure_open();
  bool read_more();
  bool take_line(std::string_view line, std::vector<log_line>& out);
  void note_sequence(std::uint64_t seq);

  std::string path_;
  kmsg_read_function read_;
  int fd_ = -1;
  std::string pending_;
  /// Last record consumed (delivered or skipped), or the resume point.
  std::optional<std::uint64_t> last_seq_;
  /// Fresh or rebooted: records stamped before this are skipped.
  std::optional<std::int64_t> oldest_usec_;
};

} // namespace vigil::agent
