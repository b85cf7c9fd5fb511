// The forwarder's disk spool: a bounded, fsync'd FIFO of encoded HealthEvents
// kept while the control plane is unreachable and replayed in order after.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "messages/expected.hpp"

namespace vigil::agent {

/// On-disk format: one directory holding `spool.log`.
///
///     file   := "VGSPOOL1" record*
///     record := length:u32le crc:u32le flags:u8 state:u8 payload[length]
///
/// * `payload` is one encoded HealthEvent (JSON without a trailing newline).
/// * `flags` bit 0 marks a fatal event; the other bits are zero.
/// * `crc` is the CRC-32 (IEEE 802.3, as zlib's crc32) of `flags` + `payload`.
/// * `state` is 0 (live), 1 (acknowledged) or 2 (dropped for room). It is not
///   covered by the CRC because it is rewritten in place, one byte, when the
///   record dies; a dead record stays in the file until compaction.
///
/// Appends and state changes are followed by fdatasync before they return, so
/// after a crash every record whose append returned is there, in order, with
/// its last synced state. On open the file is scanned: a record whose header
/// or payload is cut short, whose CRC does not match or whose state byte is
/// unknown ends the valid part (a torn write can only hit the tail); the file
/// is truncated there and the loss is reported by recovery_problem().
///
/// Compaction copies the live records to `spool.log.tmp`, fsyncs it and
/// renames it over `spool.log` (then fsyncs the directory); a crash leaves
/// either file whole. When no record is live the file is truncated to its
/// magic instead. A leftover `spool.log.tmp` is removed on open.
struct spool_options {
  std::string directory;                        ///< created (one level) if missing
  std::size_t max_bytes = 64 * 1024 * 1024;     ///< live records incl. headers
  std::size_t max_events = 100'000;             ///< live records
  std::size_t compact_min_dead_bytes = 1 << 20; ///< dead bytes before compaction
};

/// One event to spool: its encoded form and whether it is fatal.
struct spool_entry {
  std::string encoded;
  bool fatal = false;
};

/// One live record handed out by peek(): `id` orders records within this
/// process (ids are reassigned in file order on open).
struct spooled_event {
  std::uint64_t id = 0;
  std::string encoded;
  bool fatal = false;
};

enum class spool_append_status {
  appended,     ///< on disk and synced
  refused_full, ///< no room, and only fatal events (or none) could be dropped
  too_large,    ///< the record alone exceeds max_bytes
  /// see spool_append_result::error: the write failed (nothing was added) or
  /// the sync failed (the record is live here but may not survive a crash)
  io_error,
};

/// What append() did; `dropped` counts the older non-fatal events it
/// dropped to make room (also when the append itself was refused: then 0).
struct spool_append_result {
  spool_append_status status = spool_append_status::appended;
  std::size_t dropped = 0;
  std::optional<failure> error;
};

/// Counters for logs and metrics; they cover this process's lifetime.
struct spool_stats {
  std::uint64_t appended = 0;
  std::uint64_t acknowledged = 0;
  std::uint64_t dropped_non_fatal = 0; ///< dropped oldest-first for room
  std::uint64_t refused = 0;           ///< appends refused (full or too large)
  std::uint64_t compactions = 0;
  std::uint64_t discarded_bytes = 0; ///< torn or corrupt tail cut at open
};

/// Not thread-safe: one owner (the forwarder) calls it. Every mutating call
/// blocks on fdatasync.
class event_spool {
public:
  explicit event_spool(spool_options options);
  ~event_spool();
  event_spool(const event_spool&) = delete;
  event_spool& operator=(const event_spool&) = delete;

  /// Creates or opens the spool and recovers its live records. Failures name
  /// the file; a torn tail is not a failure (see recovery_problem()).
  status open();

  /// Appends one event: drops the oldest non-fatal live events when needed
  /// for room; never drops a fatal one. The caller must handle refused_full
  /// (log, count) because the event is then not stored.
  [[nodiscard]] spool_append_result append(const spool_entry& entry);

  /// Appends several in order with one fdatasync; one result per entry.
  [[nodiscard]] std::vector<spool_append_result>
  append_all(const std::vector<spool_entry>& entries);

  /// The first `n` live events, oldest first, without removing them.
  expected<std::vector<spooled_event>> peek(std::size_t n) const;

  /// Acknowledges (removes) the first `n` live events. Prefer pop_through()
  /// when appends may have dropped events since the peek.
  status pop_front(std::size_t n);

  /// Acknowledges every live event whose id is <= `last_id`: the safe way to
  /// remove a batch taken with peek().
  status pop_through(std::uint64_t last_id);

  std::size_t size() const { return live_.size(); }
  bool empty() const { return live_.empty(); }
  std::size_t live_bytes() const { return live_bytes_; }
  std::size_t fatal_count() const { return live_.size() - non_fatal_.size(); }
  const spool_stats& stats() const { return stats_; }

  /// What open() had to discard from a torn or corrupt tail, if anything.
  const std::optional<failure>& recovery_problem() const { return recovery_problem_; }

  /// "<directory>/spool.log".
  const std::string& file_path() const { return path_; }

private:
  struct record_ref {
    std::uint64_t offset = 0; ///< of the record header in the file
    std::uint32_t length = 0; ///< payload bytes
    bool fatal = false;
  };

  status create_or_open_file();
  status scan();
  bool make_room(std::size_t record_bytes, std::size_t& dropped, bool& changed);
  status write_record(const spool_entry& entry);
  status mark_dead(std::uint64_t id, std::uint8_t state);
  status sync(const char* what);
  status acknowledge(const std::vector<std::uint64_t>& ids);
  status maybe_compact();
  status compact();
  failure io_failure(const std::string& file, const char* what) const;

  spool_options options_;
  std::string path_;
  int fd_ = -1;
  std::uint64_t end_offset_ = 0;
  std::uint64_t next_id_ = 1;
  std::map<std::uint64_t, record_ref> live_;
  std::set<std::uint64_t> non_fatal_;
  std::size_t live_bytes_ = 0;
  std::size_t non_fatal_bytes_ = 0;
  std::size_t dead_bytes_ = 0;
  spool_stats stats_;
  std::optional<failure> recovery_problem_;
};

/// CRC-32 (IEEE 802.3, reflected, as zlib's crc32()) continuing from `crc`.
std::uint32_t crc32_update(std::uint32_t crc, const void* data, std::size_t size);

} // namespace vigil::agent
