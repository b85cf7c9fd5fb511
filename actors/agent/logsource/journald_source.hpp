// Reads the kernel's entries (_TRANSPORT=kernel) from the systemd journal via
// libsystemd's sd-journal, without blocking; resumes at a persisted cursor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "actors/agent/logsource/kernel_log_source.hpp"

struct sd_journal;

namespace vigil::agent {

/// Resumed: seeks the saved cursor and continues after that entry. Fresh or
/// rebooted: this boot's entries (_BOOT_ID) from `now - lookback` on. `path`
/// empty opens the local journal (SD_JOURNAL_LOCAL_ONLY); otherwise the journal
/// files in that directory. A failed open is retried on the next poll.
class journald_source final : public kernel_log_source {
public:
  explicit journald_source(const log_source_options& options);
  ~journald_source() override;

  std::size_t poll(std::vector<log_line>& out, std::size_t max_lines) override;
  log_position position() const override;

private:
  bool ensure_open();
  bool add_matches();
  void seek_start();
  void seek_lookback();
  log_line read_entry();
  void fail(const char* what, int rc);

  std::string path_;
  std::string saved_cursor_;
  std::optional<wall_time> oldest_;
  sd_journal* journal_ = nullptr;
  /// Set after seeking a cursor: the first entry read is that one, skip it.
  bool skip_saved_entry_ = false;
  std::string cursor_;
  std::uint64_t count_ = 0;
};

/// "0f3a6c52-7d7e-…" → "0f3a6c527d7e…", as the journal's _BOOT_ID has it.
std::string journal_boot_id(const std::string& boot_id);

} // namespace vigil::agent
