#include "actors/agent/xid/kernel_log_line.hpp"

#include <array>
#include <cstddef>
#include <string>

namespace vigil::agent {

namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

bool is_blank(char c) {
  return c == ' ' || c == '\t';
}

std::string_view skip_blanks(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && is_blank(s[i]))
    ++i;
  return s.substr(i);
}

/// Reads a run of digits into `value`; returns how many were read (at most 18).
size_t read_number(std::string_view s, std::int64_t& value) {
  size_t i = 0;
  value = 0;
  while (i < s.size() && i < 18 && is_digit(s[i]))
    value = value * 10 + (s[i++] - '0');
  return i;
}

constexpr std::array<std::string_view, 12> month_names = {
  "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

int month_index(std::string_view s) {
  for (size_t i = 0; i < month_names.size(); ++i)
    if (s == month_names[i])
      return static_cast<int>(i);
  return -1;
}

/// "hh:mm:ss" at the start of `s`.
bool is_clock(std::string_view s) {
  return s.size() >= 8 && is_digit(s[0]) && is_digit(s[1]) && s[2] == ':'
         && is_digit(s[3]) && is_digit(s[4]) && s[5] == ':' && is_digit(s[6])
         && is_digit(s[7]);
}

/// Length of an RFC 3164 "Mmm dd hh:mm:ss[.frac]" at the start of `s`, or 0.
size_t bsd_timestamp_length(std::string_view s) {
  if (s.size() < 15 || month_index(s.substr(0, 3)) < 0 || s[3] != ' ')
    return 0;
  size_t i = 4;
  if (s[i] == ' ')
    ++i;
  size_t day_start = i;
  while (i < s.size() && is_digit(s[i]) && i - day_start < 2)
    ++i;
  if (i == day_start || i >= s.size() || s[i] != ' ')
    return 0;
  ++i;
  if (!is_clock(s.substr(i)))
    return 0;
  i += 8;
  if (i < s.size() && s[i] == '.')
    for (++i; i < s.size() && is_digit(s[i]);)
      ++i;
  return i;
}

/// Length of an RFC 3339 timestamp ("2025-10-23T11:38:02…") at the start of `s`, or 0.
size_t iso_timestamp_length(std::string_view s) {
  if (s.size() < 19 || !is_digit(s[0]) || s[4] != '-' || s[7] != '-'
      || (s[10] != 'T' && s[10] != 't') || !is_clock(s.substr(11)))
    return 0;
  size_t i = 19;
  while (i < s.size() && !is_blank(s[i]))
    ++i;
  return i;
}

/// "[  123.456789]" → microseconds; returns the length consumed or 0.
size_t dmesg_stamp(std::string_view s, std::optional<std::int64_t>& us) {
  if (s.empty() || s[0] != '[')
    return 0;
  std::string_view rest = skip_blanks(s.substr(1));
  std::int64_t seconds = 0;
  size_t n = read_number(rest, seconds);
  if (n == 0 || n >= rest.size() || rest[n] != '.')
    return 0;
  rest = rest.substr(n + 1);
  std::int64_t micros = 0;
  size_t digits = 0;
  while (digits < rest.size() && is_digit(rest[digits])) {
    if (digits < 6)
      micros = micros * 10 + (rest[digits] - '0');
    ++digits;
  }
  if (digits == 0 || digits >= rest.size() || rest[digits] != ']')
    return 0;
  for (size_t d = digits; d < 6; ++d)
    micros *= 10;
  us = seconds * 1000000 + micros;
  return static_cast<size_t>(rest.data() + digits + 1 - s.data());
}

/// dmesg -T's "[Thu Oct 23 11:38:02 2025]"; returns the length consumed or 0.
size_t dmesg_human_stamp(std::string_view s) {
  if (s.size() < 20 || s[0] != '[' || month_index(s.substr(5, 3)) < 0)
    return 0;
  auto close = s.find(']');
  return close == std::string_view::npos || close > 40 ? 0 : close + 1;
}

/// "6,1234,5678901234,-;" → microseconds; returns the header length or 0.
size_t kmsg_header(std::string_view s, std::optional<std::int64_t>& us) {
  std::int64_t field = 0;
  size_t i = 0;
  for (int f = 0; f < 3; ++f) {
    size_t n = read_number(s.substr(i), field);
    if (n == 0 || i + n >= s.size() || s[i + n] != ',')
      return 0;
    i += n + 1;
  }
  auto semicolon = s.find(';', i);
  if (semicolon == std::string_view::npos || semicolon - i > 16)
    return 0;
  us = field;
  return semicolon + 1;
}

/// "<4>" at the start of `s`; returns its length or 0.
size_t syslog_priority(std::string_view s) {
  if (s.size() < 3 || s[0] != '<')
    return 0;
  size_t i = 1;
  while (i < s.size() && i < 5 && is_digit(s[i]))
    ++i;
  return i > 1 && i < s.size() && s[i] == '>' ? i + 1 : 0;
}

std::string_view next_token(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && !is_blank(s[i]))
    ++i;
  return s.substr(0, i);
}

/// After a syslog timestamp: "host tag: message" → tag and message.
void split_host_and_tag(std::string_view rest, kernel_log_line& out) {
  rest = skip_blanks(rest);
  auto host = next_token(rest);
  rest = skip_blanks(rest.substr(host.size()));
  auto tag = next_token(rest);
  if (tag.size() > 1 && tag.back() == ':') {
    out.tag = tag.substr(0, tag.size() - 1);
    rest = rest.substr(tag.size());
  }
  out.message = skip_blanks(rest);
}

std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  // Howard Hinnant's algorithm: days since 1970-01-01 in the proleptic Gregorian
  // calendar.
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

} // namespace

kernel_log_line split_kernel_log_line(std::string_view line) {
  kernel_log_line out;
  std::string_view rest = skip_blanks(line);
  rest = rest.substr(syslog_priority(rest));
  if (!rest.empty() && is_digit(rest[0])) {
    if (size_t n = kmsg_header(rest, out.kernel_time_us); n > 0) {
      out.message = rest.substr(n);
      return out;
    }
  }
  size_t ts = bsd_timestamp_length(rest);
  if (ts == 0)
    ts = iso_timestamp_length(rest);
  if (ts > 0) {
    out.syslog_timestamp = rest.substr(0, ts);
    split_host_and_tag(rest.substr(ts), out);
    rest = out.message;
  }
  if (size_t n = dmesg_stamp(rest, out.kernel_time_us); n > 0) {
    rest = rest.substr(n);
  } else if (size_t human = dmesg_human_stamp(rest); human > 0) {
    if (out.syslog_timestamp.empty())
      out.syslog_timestamp = rest.substr(0, human);
    rest = rest.substr(human);
  }
  out.message = skip_blanks(rest);
  return out;
}

std::optional<wall_time> syslog_wall_time(std::string_view timestamp, int year) {
  if (iso_timestamp_length(timestamp) == timestamp.size() && !timestamp.empty()) {
    // journalctl -o short-iso writes "+0000"; RFC 3339 wants "+00:00".
    std::string text(timestamp);
    size_t n = text.size();
    if (n > 5 && (text[n - 5] == '+' || text[n - 5] == '-') && is_digit(text[n - 4])
        && is_digit(text[n - 1]) && text[n - 3] != ':')
      text.insert(n - 2, ":");
    auto parsed = parse_rfc3339(text);
    if (parsed)
      return *parsed;
    return std::nullopt;
  }
  if (bsd_timestamp_length(timestamp) != timestamp.size() || timestamp.empty())
    return std::nullopt;
  int month = month_index(timestamp.substr(0, 3));
  std::string_view rest = skip_blanks(timestamp.substr(4));
  std::int64_t day = 0;
  rest = skip_blanks(rest.substr(read_number(rest, day)));
  auto two = [&](size_t at) { return (rest[at] - '0') * 10 + (rest[at + 1] - '0'); };
  std::int64_t seconds =
    days_from_civil(year, static_cast<unsigned>(month + 1), static_cast<unsigned>(day))
      * 86400
    + two(0) * 3600 + two(3) * 60 + two(6);
  std::int32_t nanos = 0;
  int digits = 0;
  for (size_t i = 9; i < rest.size() && digits < 9; ++i, ++digits)
    nanos = nanos * 10 + (rest[i] - '0');
  for (; digits > 0 && digits < 9; ++digits)
    nanos *= 10;
  return from_unix(seconds, nanos);
}

} // namespace vigil::agent
