#include "actors/agent/logsource/syslog_file_source.hpp"

#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <ctime>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace vigil::agent {

namespace {

constexpr std::size_t read_chunk = 64 * 1024;

constexpr std::array<std::string_view, 12> month_names{
  "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

bool two_digits(std::string_view text, std::size_t at, int& out) {
  if (at + 2 > text.size() || !std::isdigit(static_cast<unsigned char>(text[at]))
      || !std::isdigit(static_cast<unsigned char>(text[at + 1])))
    return false;
  out = (text[at] - '0') * 10 + (text[at + 1] - '0');
  return true;
}

std::optional<wall_time> rfc3339_prefix(std::string_view line) {
  if (line.size() < 19 || line[4] != '-' || (line[10] != 'T' && line[10] != 't'))
    return std::nullopt;
  auto parsed = parse_rfc3339(line.substr(0, line.find(' ')));
  if (!parsed)
    return std::nullopt;
  return *parsed;
}

// "Oct 23 11:38:02" or "Oct  3 11:38:02" in UTC of `year`.
std::optional<wall_time> rfc3164_prefix(std::string_view line, int year) {
  if (line.size() < 15 || line[3] != ' ' || line[6] != ' ' || line[9] != ':'
      || line[12] != ':')
    return std::nullopt;
  std::tm tm{};
  tm.tm_mon = -1;
  for (std::size_t m = 0; m < month_names.size(); ++m)
    if (line.substr(0, 3) == month_names[m])
      tm.tm_mon = static_cast<int>(m);
  std::string day(line.substr(4, 2));
  if (day[0] == ' ')
    day[0] = '0';
  if (tm.tm_mon < 0 || !two_digits(day, 0, tm.tm_mday) || !two_digits(line, 7, tm.tm_hour)
      || !two_digits(line, 10, tm.tm_min) || !two_digits(line, 13, tm.tm_sec))
    return std::nullopt;
  tm.tm_year = year - 1900;
  return from_unix(static_cast<std::int64_t>(::timegm(&tm)), 0);
}

int utc_year(wall_time t) {
  const std::time_t seconds = static_cast<std::time_t>(unix_seconds(t));
  std::tm tm{};
  ::gmtime_r(&seconds, &tm);
  return tm.tm_year + 1900;
}

} // namespace

std::optional<wall_time> syslog_line_time(std::string_view line, wall_time now) {
  if (auto t = rfc3339_prefix(line))
    return t;
  const int year = utc_year(now);
  auto t = rfc3164_prefix(line, year);
  if (t && *t > now + std::chrono::hours{24})
    t = rfc3164_prefix(line, year - 1);
  return t;
}

syslog_file_source::syslog_file_source(const log_source_options& options)
  : kernel_log_source(options, log_source_kind::syslog_file), path_(options.path),
    now_(options.now) {
  if (start() == log_start::resumed && options.saved->file_inode)
    resume_ = options.saved;
  else
    oldest_ = options.now - options.lookback;
}

syslog_file_source::~syslog_file_source() {
  if (fd_ >= 0)
    ::close(fd_);
}

bool syslog_file_source::ensure_open() {
  if (fd_ >= 0)
    return true;
  if (resume_) {
    const auto saved = *resume_;
    resume_.reset();
    resume_from(saved);
    return fd_ >= 0;
  }
  return open_file(path_, 0);
}

void syslog_file_source::resume_from(const log_position& saved) {
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0 && st.st_ino == *saved.file_inode) {
    open_file(path_, saved.file_offset);
    return;
  }
  // Rotated while we were away: finish the old file first if it is still there.
  const std::string rotated = path_ + ".1";
  if (::stat(rotated.c_str(), &st) == 0 && st.st_ino == *saved.file_inode) {
    open_file(rotated, saved.file_offset);
    return;
  }
  ++diagnostics_mut().rotations;
  open_file(path_, 0);
}

bool syslog_file_source::open_file(const std::string& path, std::uint64_t offset) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd_ < 0 || ::fstat(fd_, &st) != 0) {
    record_error(failure{path, std::string("cannot open: ") + std::strerror(errno)});
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = -1;
    return false;
  }
  inode_ = static_cast<std::uint64_t>(st.st_ino);
  if (static_cast<std::uint64_t>(st.st_size) < offset) {
    ++diagnostics_mut().truncations;
    offset = 0;
  }
  offset_ = offset;
  pending_.clear();
  return true;
}

std::size_t syslog_file_source::poll(std::vector<log_line>& out, std::size_t max_lines) {
  if (!ensure_open())
    return 0;
  std::size_t delivered = 0;
  std::size_t used = 0; // bytes of pending_ consumed in this poll
  while (delivered < max_lines) {
    const auto newline = pending_.find('\n', used);
    if (newline == std::string::npos) {
      pending_.erase(0, used);
      used = 0;
      if (read_more() || follow_rotation_or_truncation())
        continue;
      oldest_.reset(); // caught up: the lookback only applies to the backlog
      break;
    }
    std::string_view line(pending_.data() + used, newline - used);
    if (take_line(line, offset_, out))
      ++delivered;
    offset_ += newline + 1 - used;
    used = newline + 1;
  }
  pending_.erase(0, used);
  return delivered;
}

// Appends the next chunk of the open file to pending_; false at its end.
bool syslog_file_source::read_more() {
  char buffer[read_chunk];
  for (;;) {
    const auto n =
      ::pread(fd_, buffer, sizeof buffer, static_cast<off_t>(offset_ + pending_.size()));
    if (n > 0) {
      pending_.append(buffer, static_cast<std::size_t>(n));
      return true;
    }
    if (n == 0)
      return false;
    if (errno != EINTR) {
      record_error(failure{path_, std::string("read failed: ") + std::strerror(errno)});
      return false;
    }
  }
}

// At the end of the open file: true when reading should go on from a new
// place (the path now names another file, or the file shrank).
bool syslog_file_source::follow_rotation_or_truncation() {
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0
      && static_cast<std::uint64_t>(st.st_ino) != inode_) {
    switch_to_current_file();
    return fd_ >= 0;
  }
  if (::fstat(fd_, &st) == 0
      && static_cast<std::uint64_t>(st.st_size) < offset_ + pending_.size()) {
    ++diagnostics_mut().truncations;
    offset_ = 0;
    pending_.clear();
    return true;
  }
  return false;
}

void syslog_file_source::switch_to_current_file() {
  if (!pending_.empty())
    record_error(failure{path_, "rotated file ended without a newline; dropped "
                                  + std::to_string(pending_.size()) + " bytes"});
  ::close(fd_);
  fd_ = -1;
  ++diagnostics_mut().rotations;
  open_file(path_, 0);
}

// One whole line at `line_offset`; true when it became a log_line in `out`.
bool syslog_file_source::take_line(std::string_view line, std::uint64_t line_offset,
                                   std::vector<log_line>& out) {
  if (!line.empty() && line.back() == '\r')
    line.remove_suffix(1);
  if (line.empty())
    return false;
  auto realtime = syslog_line_time(line, now_);
  if (oldest_ && realtime && *realtime < *oldest_) {
    ++diagnostics_mut().skipped_old;
    return false;
  }
  out.push_back(log_line{std::string(line), std::nullopt, realtime, line_offset});
  return true;
}

log_position syslog_file_source::position() const {
  if (resume_)
    return *resume_;
  auto p = blank_position();
  if (inode_ != 0) {
    p.file_inode = inode_;
    p.file_offset = offset_;
  }
  return p;
}

} // namespace vigil::agent
