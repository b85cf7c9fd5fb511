#include "actors/agent/logsource/journald_source.hpp"

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include <systemd/sd-journal.h>

namespace vigil::agent {

namespace {

// The value of field `name` in the current entry, or nullopt.
std::optional<std::string_view> field(sd_journal* j, const char* name) {
  const void* data = nullptr;
  std::size_t length = 0;
  if (sd_journal_get_data(j, name, &data, &length) < 0)
    return std::nullopt;
  std::string_view text(static_cast<const char*>(data), length);
  const std::size_t prefix = std::strlen(name) + 1; // "NAME="
  if (text.size() < prefix)
    return std::nullopt;
  return text.substr(prefix);
}

std::int64_t to_unix_usec(wall_time t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch())
    .count();
}

} // namespace

std::string journal_boot_id(const std::string& boot_id) {
  std::string out;
  for (char c : boot_id)
    if (c != '-')
      out += c;
  return out;
}

journald_source::journald_source(const log_source_options& options)
  : kernel_log_source(options, log_source_kind::journald), path_(options.path) {
  if (start() == log_start::resumed && !options.saved->journal_cursor.empty()) {
    saved_cursor_ = options.saved->journal_cursor;
    cursor_ = saved_cursor_;
  } else {
    oldest_ = options.now - options.lookback;
  }
}

journald_source::~journald_source() {
  if (journal_ != nullptr)
    sd_journal_close(journal_);
}

void journald_source::fail(const char* what, int rc) {
  record_error(failure{path_.empty() ? "journal" : path_,
                       std::string(what) + ": " + std::strerror(-rc)});
}

bool journald_source::ensure_open() {
  if (journal_ != nullptr)
    return true;
  const int rc = path_.empty() ? sd_journal_open(&journal_, SD_JOURNAL_LOCAL_ONLY)
                               : sd_journal_open_directory(&journal_, path_.c_str(), 0);
  if (rc < 0) {
    journal_ = nullptr;
    fail("cannot open the journal", rc);
    return false;
  }
  sd_journal_get_fd(journal_); // sets up change notification for process()
  if (!add_matches()) {
    sd_journal_close(journal_);
    journal_ = nullptr;
    return false;
  }
  seek_start();
  return true;
}

// Kernel entries only; after a reboot or on a fresh start, this boot's only.
bool journald_source::add_matches() {
  const std::string transport = "_TRANSPORT=kernel";
  int rc = sd_journal_add_match(journal_, transport.data(), transport.size());
  if (rc >= 0 && oldest_ && !boot_id().empty()) {
    const std::string boot = "_BOOT_ID=" + journal_boot_id(boot_id());
    rc = sd_journal_add_match(journal_, boot.data(), boot.size());
  }
  if (rc < 0)
    fail("cannot add the journal match", rc);
  return rc >= 0;
}

void journald_source::seek_start() {
  if (saved_cursor_.empty()) {
    seek_lookback();
    return;
  }
  const int rc = sd_journal_seek_cursor(journal_, saved_cursor_.c_str());
  if (rc < 0) {
    fail("cannot seek the saved cursor; reading the lookback window", rc);
    saved_cursor_.clear();
    seek_lookback();
    return;
  }
  skip_saved_entry_ = true;
}

void journald_source::seek_lookback() {
  if (!oldest_)
    return; // a resumed start without a cursor: nothing to bound
  const auto usec = to_unix_usec(*oldest_);
  const int rc = sd_journal_seek_realtime_usec(journal_, usec > 0 ? usec : 0);
  if (rc < 0)
    fail("cannot seek the lookback window", rc);
}

std::size_t journald_source::poll(std::vector<log_line>& out, std::size_t max_lines) {
  if (!ensure_open())
    return 0;
  sd_journal_process(journal_); // picks up new and rotated journal files
  std::size_t delivered = 0;
  while (delivered < max_lines) {
    const int rc = sd_journal_next(journal_);
    if (rc < 0)
      fail("cannot read the journal", rc);
    if (rc <= 0)
      break;
    if (skip_saved_entry_) {
      skip_saved_entry_ = false;
      if (sd_journal_test_cursor(journal_, saved_cursor_.c_str()) > 0)
        continue;
    }
    auto line = read_entry();
    if (oldest_ && line.realtime && *line.realtime < *oldest_) {
      ++diagnostics_mut().skipped_old;
      continue;
    }
    out.push_back(std::move(line));
    ++delivered;
  }
  return delivered;
}

// The current entry as a log_line; also moves cursor_ to it.
log_line journald_source::read_entry() {
  log_line line;
  line.seq = ++count_;
  if (auto message = field(journal_, "MESSAGE"))
    line.text = std::string(*message);
  std::uint64_t realtime = 0;
  if (sd_journal_get_realtime_usec(journal_, &realtime) >= 0)
    line.realtime = wall_time{std::chrono::microseconds{realtime}};
  if (auto mono = field(journal_, "_SOURCE_MONOTONIC_TIMESTAMP")) {
    std::int64_t usec = 0;
    if (std::from_chars(mono->data(), mono->data() + mono->size(), usec).ec
        == std::errc{})
      line.kernel_usec_since_boot = usec;
  }
  char* cursor = nullptr;
  if (sd_journal_get_cursor(journal_, &cursor) >= 0 && cursor != nullptr) {
    cursor_ = cursor;
    std::free(cursor);
  }
  return line;
}

log_position journald_source::position() const {
  auto p = blank_position();
  p.journal_cursor = cursor_;
  return p;
}

} // namespace vigil::agent
