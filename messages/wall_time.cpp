#include "messages/wall_time.hpp"

#include <cstdio>
#include <limits>

namespace vigil {

namespace {

// Days since 1970-01-01 for a proleptic Gregorian date (H. Hinnant's algorithm).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

struct civil {
  std::int64_t year;
  unsigned month;
  unsigned day;
};

civil civil_from_days(std::int64_t z) {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned d = doy - (153 * mp + 2) / 5 + 1;
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;
  return {static_cast<std::int64_t>(yoe) + era * 400 + (m <= 2), m, d};
}

bool is_leap(std::int64_t y) {
  return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

unsigned days_in_month(std::int64_t y, unsigned m) {
  static constexpr unsigned days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && is_leap(y) ? 29 : days[m - 1];
}

// Reads exactly `n` digits at `pos`; false when they are not all digits.
bool read_digits(std::string_view s, size_t pos, size_t n, unsigned& out) {
  if (pos + n > s.size())
    return false;
  out = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9')
      return false;
    out = out * 10 + static_cast<unsigned>(s[i] - '0');
  }
  return true;
}

bool expect_char(std::string_view s, size_t pos, char c) {
  return pos < s.size() && s[pos] == c;
}

} // namespace

wall_time from_unix(std::int64_t seconds, std::int32_t nanos) {
  return wall_time{std::chrono::seconds{seconds} + std::chrono::nanoseconds{nanos}};
}

std::int64_t unix_seconds(wall_time t) {
  auto ns = t.time_since_epoch().count();
  auto s = ns / 1'000'000'000;
  if (ns % 1'000'000'000 < 0)
    --s;
  return s;
}

std::int32_t unix_nanos(wall_time t) {
  auto ns = t.time_since_epoch().count() % 1'000'000'000;
  return static_cast<std::int32_t>(ns < 0 ? ns + 1'000'000'000 : ns);
}

std::string format_rfc3339(wall_time t) {
  const auto secs = unix_seconds(t);
  const auto nanos = unix_nanos(t);
  auto days = secs / 86400;
  auto rem = secs % 86400;
  if (rem < 0) {
    rem += 86400;
    --days;
  }
  const auto date = civil_from_days(days);
  char buf[64];
  int n = std::snprintf(buf, sizeof(buf), "%04lld-%02u-%02uT%02lld:%02lld:%02lld",
                        static_cast<long long>(date.year), date.month, date.day,
                        static_cast<long long>(rem / 3600),
                        static_cast<long long>(rem / 60 % 60),
                        static_cast<long long>(rem % 60));
  std::string out(buf, static_cast<size_t>(n));
  if (nanos != 0) {
    if (nanos % 1'000'000 == 0)
      n = std::snprintf(buf, sizeof(buf), ".%03d", nanos / 1'000'000);
    else if (nanos % 1000 == 0)
      n = std::snprintf(buf, sizeof(buf), ".%06d", nanos / 1000);
    else
      n = std::snprintf(buf, sizeof(buf), ".%09d", nanos);
    out.append(buf, static_cast<size_t>(n));
  }
  out += 'Z';
  return out;
}

expected<wall_time> parse_rfc3339(std::string_view s) {
  auto bad = [&](const char* why) {
    return failure{"", std::string("not an RFC 3339 timestamp (") + why + ")"};
  };
  unsigned year, month, day, hour, minute, second;
  if (!read_digits(s, 0, 4, year) || !expect_char(s, 4, '-')
      || !read_digits(s, 5, 2, month) || !expect_char(s, 7, '-')
      || !read_digits(s, 8, 2, day))
    return bad("expected YYYY-MM-DD");
  if (!(expect_char(s, 10, 'T') || expect_char(s, 10, 't')))
    return bad("expected 'T' after the date");
  if (!read_digits(s, 11, 2, hour) || !expect_char(s, 13, ':')
      || !read_digits(s, 14, 2, minute) || !expect_char(s, 16, ':')
      || !read_digits(s, 17, 2, second))
    return bad("expected HH:MM:SS");
  if (month < 1 || month > 12 || day < 1 || day > days_in_month(year, month))
    return bad("date out of range");
  if (hour > 23 || minute > 59 || second > 60)
    return bad("time out of range");
  size_t pos = 19;
  std::int64_t nanos = 0;
  if (expect_char(s, pos, '.')) {
    ++pos;
    size_t digits = 0;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      if (digits < 9)
        nanos = nanos * 10 + (s[pos] - '0');
      ++digits;
      ++pos;
    }
    if (digits == 0)
      return bad("empty fraction");
    for (size_t i = digits; i < 9; ++i)
      nanos *= 10;
  }
  std::int64_t offset_seconds = 0;
  if (expect_char(s, pos, 'Z') || expect_char(s, pos, 'z')) {
    ++pos;
  } else if (expect_char(s, pos, '+') || expect_char(s, pos, '-')) {
    const bool negative = s[pos] == '-';
    unsigned oh, om;
    if (!read_digits(s, pos + 1, 2, oh) || !expect_char(s, pos + 3, ':')
        || !read_digits(s, pos + 4, 2, om) || oh > 23 || om > 59)
      return bad("bad UTC offset");
    offset_seconds = (negative ? -1 : 1) * static_cast<std::int64_t>(oh * 3600 + om * 60);
    pos += 6;
  } else {
    return bad("missing 'Z' or UTC offset");
  }
  if (pos != s.size())
    return bad("trailing characters");
  // A leap second (:60) folds into the next second, as most systems do.
  const std::int64_t secs = days_from_civil(year, month, day) * 86400 + hour * 3600
                            + minute * 60 + second - offset_seconds;
  // wall_time counts nanoseconds in 64 bits: 1677-09-21 to 2262-04-11.
  constexpr std::int64_t most_seconds =
    std::numeric_limits<std::int64_t>::max() / 1'000'000'000 - 1;
  if (secs > most_seconds || secs < -most_seconds)
    return bad("outside the years 1678 to 2262 that a nanosecond clock holds");
  return from_unix(secs, static_cast<std::int32_t>(nanos));
}

} // namespace vigil
