// A reader of the Prometheus text exposition format (version 0.0.4), the page
// dcgm-exporter serves on /metrics. prometheus-cpp (Debian's
// prometheus-cpp-dev) writes this format but has no reader, and no Debian
// package offers one, so it is parsed here: line by line, a bad line skipped
// with its number and the reason, never a crash on garbage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace vigil::agent {

/// One sample line: `name{label="value",...} value [timestamp]`.
struct metric_sample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels; ///< as written
  double value = 0;                                        ///< NaN and ±Inf allowed
  std::optional<std::int64_t> timestamp_ms;

  /// The value of label `key`, or nullptr.
  const std::string* label(std::string_view key) const;
};

struct metric_line_problem {
  std::size_t line = 0; ///< 1-based
  std::string what;

  std::string to_string() const;
};

/// Bounds on an untrusted page.
struct metric_text_limits {
  std::size_t max_line_bytes = 64 * 1024;
  std::size_t max_labels = 64;
  std::size_t max_problems = 100; ///< kept; the rest are only counted
};

struct metric_page {
  std::vector<metric_sample> samples;
  /// `# TYPE name kind` lines: family name → counter, gauge, histogram, …
  std::vector<std::pair<std::string, std::string>> types;
  std::vector<metric_line_problem> problems; ///< skipped lines, first ones
  std::size_t skipped_lines = 0;             ///< every skipped line

  /// The `# TYPE` of a family, or "" when the page declares none.
  std::string_view type_of(std::string_view family) const;
};

/// Parses a whole page. Blank lines and comments other than `# TYPE` are
/// passed over; a line that is not a valid sample is skipped and reported
/// (bad name, unterminated or badly escaped label value, duplicate label, no
/// value, a value or timestamp that is not a number, trailing garbage).
metric_page parse_prometheus_text(std::string_view text,
                                  const metric_text_limits& limits = {});

/// Splits pages that were concatenated (`cat t0.txt t1.txt`): a new page
/// starts where a series (name and label set) repeats. Problems and `# TYPE`
/// lines stay with the first page.
std::vector<metric_page> split_concatenated_pages(metric_page page);

/// Parses one sample line (no comment, not blank); the error says what is
/// wrong with it.
std::optional<metric_sample> parse_metric_line(std::string_view line, std::string& error,
                                               std::size_t max_labels = 64);

} // namespace vigil::agent
