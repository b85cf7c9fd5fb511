#include "actors/agent/logsource/kmsg_source.hpp"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>

#include <fcntl.h>
#include <unistd.h>

namespace vigil::agent {

namespace {

// One read of /dev/kmsg returns one whole record; the kernel's limit on a
// record with its dictionary is 8 KiB (CONSOLE_EXT_LOG_MAX).
constexpr std::size_t read_buffer_size = 16 * 1024;

template <class T>
bool parse_number(std::string_view text, T& out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc{} && end == text.data() + text.size();
}

// Splits off the text up to the next `sep`; false when there is none.
bool next_field(std::string_view& rest, char sep, std::string_view& field) {
  auto at = rest.find(sep);
  if (at == std::string_view::npos)
    return false;
  field = rest.substr(0, at);
  rest.remove_prefix(at + 1);
  return true;
}

} // namespace

std::optional<kmsg_record> parse_kmsg_record(std::string_view line) {
  auto semicolon = line.find(';');
  if (semicolon == std::string_view::npos)
    return std::nullopt;
  std::string_view header = line.substr(0, semicolon);
  kmsg_record record;
  record.message = line.substr(semicolon + 1);
  std::string_view prio, seq, usec;
  if (!next_field(header, ',', prio) || !next_field(header, ',', seq)
      || !next_field(header, ',', usec))
    return std::nullopt;
  // The flags field may be followed by more fields in future kernels.
  std::string_view flags = header.substr(0, header.find(','));
  if (!parse_number(prio, record.priority) || !parse_number(seq, record.seq)
      || !parse_number(usec, record.usec) || flags.empty())
    return std::nullopt;
  record.flags = flags.front();
  return record;
}

std::chrono::microseconds monotonic_since_boot() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::chrono::seconds{ts.tv_sec}
         + std::chrono::duration_cast<std::chrono::microseconds>(
           std::chrono::nanoseconds{ts.tv_nsec});
}

kmsg_source::kmsg_source(const log_source_options& options, kmsg_read_function read)
  : kernel_log_source(options, log_source_kind::kmsg),
    path_(options.path.empty() ? "/dev/kmsg" : options.path),
    read_(read ? std::move(read) : [](int fd, char* buffer, std::size_t size) {
      return static_cast<long>(::read(fd, buffer, size));
    }) {
  if (start() == log_start::resumed && options.saved->kmsg_seq)
    last_seq_ = options.saved->kmsg_seq;
  else
    oldest_usec_ = (options.since_boot - options.lookback).count();
}

kmsg_source::~kmsg_source() {
  if (fd_ >= 0)
    ::close(fd_);
}

bool kmsg_source::ensure_open() {
  if (fd_ >= 0)
    return true;
  fd_ = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0)
    record_error(failure{path_, std::string("cannot open: ") + std::strerror(errno)});
  return fd_ >= 0;
}

std::size_t kmsg_source::poll(std::vector<log_line>& out, std::size_t max_lines) {
  if (!ensure_open())
    return 0;
  std::size_t delivered = 0;
  std::size_t consumed = 0;
  while (delivered < max_lines) {
    auto newline = pending_.find('\n', consumed);
    if (newline == std::string::npos) {
      pending_.erase(0, consumed);
      consumed = 0;
      if (!read_more())
        break;
      continue;
    }
    std::string_view line(pending_.data() + consumed, newline - consumed);
    consumed = newline + 1;
    if (take_line(line, out))
      ++delivered;
  }
  pending_.erase(0, consumed);
  return delivered;
}

// Appends what one read gives to pending_; false when nothing more is there now.
bool kmsg_source::read_more() {
  char buffer[read_buffer_size];
  for (;;) {
    const long n = read_(fd_, buffer, sizeof buffer);
    if (n > 0) {
      pending_.append(buffer, static_cast<std::size_t>(n));
      return true;
    }
    if (n == 0 || errno == EAGAIN)
      return false;
    if (errno == EINTR)
      continue;
    if (errno == EPIPE) {
      // The record at our position was overwritten; the next read returns the
      // oldest one left and the sequence gap counts what was lost.
      ++diagnostics_mut().overruns;
      continue;
    }
    record_error(failure{path_, std::string("read failed: ") + std::strerror(errno)});
    return false;
  }
}

// Handles one line of the stream; true when it became a log_line in `out`.
bool kmsg_source::take_line(std::string_view line, std::vector<log_line>& out) {
  if (line.empty() || line.front() == ' ')
    return false; // dictionary ("continuation") lines: SUBSYSTEM=, DEVICE=
  auto record = parse_kmsg_record(line);
  if (!record) {
    record_error(failure{path_, "malformed record: " + std::string(line.substr(0, 80))});
    return false;
  }
  if (last_seq_ && record->seq <= *last_seq_)
    return false; // already handled before a restart
  note_sequence(record->seq);
  if (oldest_usec_ && record->usec < *oldest_usec_) {
    ++diagnostics_mut().skipped_old;
    return false;
  }
  out.push_back(
    log_line{std::string(record->message), record->usec, std::nullopt, record->seq});
  return true;
}

void kmsg_source::note_sequence(std::uint64_t seq) {
  if (last_seq_ && seq > *last_seq_ + 1)
    diagnostics_mut().lost_lines += seq - *last_seq_ - 1;
  last_seq_ = seq;
}

log_position kmsg_source::position() const {
  auto p = blank_position();
  p.kmsg_seq = last_seq_;
  return p;
}

} // namespace vigil::agent
