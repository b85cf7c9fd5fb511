// The common face of the kernel-log sources (/dev/kmsg, journald, a syslog
// file) the XID monitor reads: non-blocking polls and a persistable position.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actors/agent/logsource/log_position_store.hpp"
#include "messages/expected.hpp"
#include "messages/wall_time.hpp"

namespace vigil::agent {

/// One kernel log line as a source delivers it.
struct log_line {
  /// The message. Without the kernel's prefix where the source gives it
  /// structured (kmsg "6,1234,5678,-;msg" → "msg", journald MESSAGE); a syslog
  /// file's line as written (the XID parser strips its header).
  std::string text;
  /// Microseconds since boot: the kmsg record's, journald's
  /// _SOURCE_MONOTONIC_TIMESTAMP; absent for syslog files.
  std::optional<std::int64_t> kernel_usec_since_boot;
  /// Wall time: journald's realtime stamp, a syslog line's parsed timestamp.
  std::optional<wall_time> realtime;
  /// Source order: the kmsg sequence number, journald's running count in this
  /// process, a syslog file's byte offset of the line.
  std::uint64_t seq = 0;
};

/// What every source is built from; each uses the fields it needs.
struct log_source_options {
  /// /dev/kmsg, the syslog file, or (journald) a journal directory; empty for
  /// journald means the local system journal.
  std::string path;
  /// This boot's ID (read_boot_id()); compared with the saved position's.
  std::string boot_id;
  /// The position loaded from the log_position_store, if any.
  std::optional<log_position> saved;
  /// bootLookbackWindow: on a fresh start or after a reboot, lines older than
  /// this are skipped. Default 2 h.
  std::chrono::microseconds lookback = std::chrono::hours{2};
  /// Wall time when the source is built (journald and syslog lookback).
  wall_time now{};
  /// Time since boot when the source is built, on the kernel's clock
  /// (kmsg lookback); monotonic_since_boot() reads it.
  std::chrono::microseconds since_boot{0};
};

/// Counters and the last problem, for logs and metrics.
struct log_source_diagnostics {
  std::uint64_t lost_lines = 0;  ///< overwritten before we read them (kmsg)
  std::uint64_t overruns = 0;    ///< kmsg EPIPE returns
  std::uint64_t skipped_old = 0; ///< older than the lookback window
  std::uint64_t rotations = 0;   ///< syslog file replaced (inode changed)
  std::uint64_t truncations = 0; ///< syslog file shrank
  std::uint64_t errors = 0;      ///< failed reads or opens
  std::optional<failure> last_error;
};

/// A kernel log reader. Not thread-safe; poll() never blocks.
class kernel_log_source {
public:
  explicit kernel_log_source(const log_source_options& options, log_source_kind kind)
    : kind_(kind), boot_id_(options.boot_id),
      start_(decide_log_start(options.saved, kind, options.boot_id)) {}
  virtual ~kernel_log_source() = default;
  kernel_log_source(const kernel_log_source&) = delete;
  kernel_log_source& operator=(const kernel_log_source&) = delete;

  /// Appends up to `max_lines` lines available now to `out`; returns how many.
  /// Problems are counted in diagnostics(); the next poll tries again.
  virtual std::size_t poll(std::vector<log_line>& out, std::size_t max_lines) = 0;

  /// Where the source stands: save it after the lines up to here are handled.
  virtual log_position position() const = 0;

  log_source_kind kind() const { return kind_; }
  const std::string& boot_id() const { return boot_id_; }

  /// How it started; `rebooted` tells the monitor to emit healthy baselines.
  log_start start() const { return start_; }
  bool rebooted() const { return start_ == log_start::rebooted; }

  const log_source_diagnostics& diagnostics() const { return diagnostics_; }

protected:
  log_source_diagnostics& diagnostics_mut() { return diagnostics_; }

  void record_error(failure problem) {
    ++diagnostics_.errors;
    diagnostics_.last_error = std::move(problem);
  }

  /// A position of this source's kind and boot, fields to be filled in.
  log_position blank_position() const {
    log_position p;
    p.kind = kind_;
    p.boot_id = boot_id_;
    return p;
  }

private:
  log_source_kind kind_;
  std::string boot_id_;
  log_start start_;
  log_source_diagnostics diagnostics_;
};

} // namespace vigil::agent
