// Tails a plain syslog file (e.g. /var/log/kern.log) without blocking: follows
// rotation (inode change) and truncation (size shrinks), resumes at inode+offset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actors/agent/logsource/kernel_log_source.hpp"

namespace vigil::agent {

/// The wall time at the start of a syslog line: RFC 3339 ("2025-10-23T11:38:02
/// .207323+00:00 host kernel: …") or RFC 3164 ("Oct 23 11:38:02 host …"). RFC
/// 3164 has no year or zone: it is read as UTC in the year of `now`, or the
/// year before when that would put it more than a day after `now`.
std::optional<wall_time> syslog_line_time(std::string_view line, wall_time now);

/// Resumed: continues at the saved offset when the file still has the saved
/// inode; when it does not, reads the rest of `<path>.1` first if that is the
/// saved inode (rotated while the agent was away), then the new file from its
/// start. Fresh or rebooted: reads the current file from its start, skipping
/// lines whose timestamp parses and is older than the lookback window, until
/// it first reaches the end of the file (later lines are new by definition).
/// Only complete lines are delivered; a partial last line waits for its newline.
class syslog_file_source final : public kernel_log_source {
public:
  explicit syslog_file_source(const log_source_options& options);
  ~syslog_file_source() override;

  std::size_t poll(std::vector<log_line>& out, std::size_t max_lines) override;
  log_position position() const override;

private:
  bool ensure_open();
  bool open_file(const std::string& path, std::uint64_t offset);
  void resume_from(const log_position& saved);
  bool read_more();
  bool follow_rotation_or_truncation();
  void switch_to_current_file();
  bool take_line(std::string_view line, std::uint64_t line_offset,
                 std::vector<log_line>& out);

  std::string path_;
  wall_time now_;                   ///< when built: the year of RFC 3164 stamps
  std::optional<wall_time> oldest_; ///< lookback bound while reading the backlog
  std::optional<log_position> resume_;
  int fd_ = -1;
  std::uint64_t inode_ = 0;
  /// Bytes of the open file consumed: up to the end of the last whole line.
  std::uint64_t offset_ = 0;
  /// Bytes read after offset_, not yet ending in a newline.
  std::string pending_;
};

} // namespace vigil::agent
