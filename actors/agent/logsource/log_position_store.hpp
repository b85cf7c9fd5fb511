// Where a kernel-log source stopped reading, kept in a small JSON state file so
// an agent restart neither misses nor replays lines.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "messages/expected.hpp"

namespace vigil::agent {

enum class log_source_kind { kmsg, journald, syslog_file };

/// "kmsg", "journald", "syslog_file".
std::string_view to_string(log_source_kind kind);
std::optional<log_source_kind> parse_log_source_kind(std::string_view text);

/// A source's position; which fields matter depends on `kind`.
struct log_position {
  log_source_kind kind = log_source_kind::kmsg;
  std::string boot_id;
  /// kmsg: sequence number of the last record consumed.
  std::optional<std::uint64_t> kmsg_seq;
  /// journald: cursor of the last entry consumed.
  std::string journal_cursor;
  /// syslog file: inode of the file being read and the bytes consumed in it.
  std::optional<std::uint64_t> file_inode;
  std::uint64_t file_offset = 0;

  friend bool operator==(const log_position& a, const log_position& b) {
    return a.kind == b.kind && a.boot_id == b.boot_id && a.kmsg_seq == b.kmsg_seq
           && a.journal_cursor == b.journal_cursor && a.file_inode == b.file_inode
           && a.file_offset == b.file_offset;
  }
};

/// Why a source started where it did.
enum class log_start {
  fresh,    ///< no usable saved position: read the lookback window only
  resumed,  ///< same boot, saved position: continue right after it
  rebooted, ///< saved position from another boot: lookback window of this boot
};

/// `resumed` when `saved` is of `kind` and `boot_id`; `rebooted` when its boot
/// differs (whatever its kind); `fresh` otherwise (none, another kind, or no
/// boot ID known).
log_start decide_log_start(const std::optional<log_position>& saved, log_source_kind kind,
                           const std::string& boot_id);

/// JSON, version 1: {"version":1,"source":"kmsg","boot_id":"…","kmsg_seq":12}
/// with "journal_cursor" or "file_inode" + "file_offset" for the other kinds.
std::string encode_log_position(const log_position& position);

/// Parses the JSON form; a failure names the field.
expected<log_position> decode_log_position(std::string_view json);

/// The trimmed content of /proc/sys/kernel/random/boot_id (or a test file);
/// the failure names the file.
expected<std::string> read_boot_id_file(const std::string& path);

/// The state file of one source.
class log_position_store {
public:
  explicit log_position_store(std::string path) : path_(std::move(path)) {}

  /// What load() found: a position, or none (start fresh) with a problem
  /// naming the file when it was there but unreadable or corrupt.
  struct load_result {
    std::optional<log_position> position;
    std::optional<failure> problem;
  };

  /// A missing file is a fresh start without a problem; never throws.
  load_result load() const;

  /// Writes a temporary file, fsyncs it, renames it over the state file and
  /// fsyncs the directory; creates no directories. The failure names the file.
  status save(const log_position& position) const;

  const std::string& path() const { return path_; }

private:
  std::string path_;
};

} // namespace vigil::agent
