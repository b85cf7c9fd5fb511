#include "actors/agent/dcgm/prometheus_text.hpp"

#include <algorithm>
#include <charconv>
#include <set>

namespace vigil::agent {

namespace {

bool is_blank(char c) {
  return c == ' ' || c == '\t';
}

bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}

bool is_name_char(char c) {
  return is_name_start(c) || (c >= '0' && c <= '9');
}

std::string_view skip_blanks(std::string_view s) {
  while (!s.empty() && is_blank(s.front()))
    s.remove_prefix(1);
  return s;
}

// A metric name ([a-zA-Z_:][a-zA-Z0-9_:]*) or, with colons = false, a label
// name ([a-zA-Z_][a-zA-Z0-9_]*) at the start of `s`; its length, 0 if none.
std::size_t name_length(std::string_view s, bool colons) {
  auto ok = [&](char c, bool first) {
    if (c == ':')
      return colons;
    return first ? is_name_start(c) : is_name_char(c);
  };
  std::size_t n = 0;
  while (n < s.size() && ok(s[n], n == 0))
    ++n;
  return n;
}

// The quoted label value at the start of `s` (after the opening quote),
// unescaped; advances `s` past the closing quote.
std::optional<std::string> read_label_value(std::string_view& s, std::string& error) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '"') {
      s.remove_prefix(i + 1);
      return out;
    }
    if (c != '\\') {
      out.push_back(c);
      continue;
    }
    if (++i == s.size())
      break;
    switch (s[i]) {
      case '\\': out.push_back('\\'); break;
      case '"': out.push_back('"'); break;
      case 'n': out.push_back('\n'); break;
      default:
        error = std::string("label value has an unknown escape \\") + s[i];
        return std::nullopt;
    }
  }
  error = "label value is not terminated";
  return std::nullopt;
}

// Go's strconv.ParseFloat forms the format allows: decimals, exponents, NaN,
// Inf with an optional sign (case-insensitive).
std::optional<double> parse_value(std::string_view token) {
  bool negative = false;
  if (!token.empty() && (token.front() == '+' || token.front() == '-')) {
    negative = token.front() == '-';
    token.remove_prefix(1);
  }
  if (token.empty() || token.front() == '+' || token.front() == '-')
    return std::nullopt;
  double value = 0;
  auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
  if (ec != std::errc() || end != token.data() + token.size())
    return std::nullopt;
  return negative ? -value : value;
}

std::optional<std::int64_t> parse_timestamp(std::string_view token) {
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
  if (ec != std::errc() || end != token.data() + token.size())
    return std::nullopt;
  return value;
}

// Reads `{name="value",...}` (after the brace) into `sample`.
bool read_labels(std::string_view& s, metric_sample& sample, std::size_t max_labels,
                 std::string& error) {
  for (;;) {
    s = skip_blanks(s);
    if (!s.empty() && s.front() == '}') {
      s.remove_prefix(1);
      return true;
    }
    const auto n = name_length(s, false);
    if (n == 0) {
      error = s.empty() ? "label set is not closed with }" : "bad label name";
      return false;
    }
    std::string name(s.substr(0, n));
    s = skip_blanks(s.substr(n));
    if (s.empty() || s.front() != '=') {
      error = "label " + name + " has no =";
      return false;
    }
    s = skip_blanks(s.substr(1));
    if (s.empty() || s.front() != '"') {
      error = "label " + name + " has no quoted value";
      return false;
    }
    s.remove_prefix(1);
    auto value = read_label_value(s, error);
    if (!value)
      return false;
    if (sample.label(name) != nullptr) {
      error = "label " + name + " appears twice";
      return false;
    }
    if (sample.labels.size() == max_labels) {
      error = "more than " + std::to_string(max_labels) + " labels";
      return false;
    }
    sample.labels.emplace_back(std::move(name), std::move(*value));
    s = skip_blanks(s);
    if (s.empty()) {
      error = "label set is not closed with }";
      return false;
    }
    if (s.front() == ',')
      s.remove_prefix(1);
    else if (s.front() != '}') {
      error = "labels must be separated by ,";
      return false;
    }
  }
}

std::string_view next_token(std::string_view& s) {
  s = skip_blanks(s);
  std::size_t n = 0;
  while (n < s.size() && !is_blank(s[n]))
    ++n;
  auto token = s.substr(0, n);
  s.remove_prefix(n);
  return token;
}

} // namespace

const std::string* metric_sample::label(std::string_view key) const {
  for (const auto& [name, value] : labels)
    if (name == key)
      return &value;
  return nullptr;
}

std::string metric_line_problem::to_string() const {
  return "line " + std::to_string(line) + ": " + what;
}

std::string_view metric_page::type_of(std::string_view family) const {
  for (const auto& [name, kind] : types)
    if (name == family)
      return kind;
  return {};
}

std::optional<metric_sample> parse_metric_line(std::string_view line, std::string& error,
                                               std::size_t max_labels) {
  auto s = skip_blanks(line);
  const auto n = name_length(s, true);
  if (n == 0) {
    error = "no metric name";
    return std::nullopt;
  }
  metric_sample sample;
  sample.name = std::string(s.substr(0, n));
  s = skip_blanks(s.substr(n));
  if (!s.empty() && s.front() == '{') {
    s.remove_prefix(1);
    if (!read_labels(s, sample, max_labels, error))
      return std::nullopt;
  }
  const auto value_token = next_token(s);
  if (value_token.empty()) {
    error = sample.name + " has no value";
    return std::nullopt;
  }
  auto value = parse_value(value_token);
  if (!value) {
    error = sample.name + ": value '" + std::string(value_token) + "' is not a number";
    return std::nullopt;
  }
  sample.value = *value;
  if (const auto ts = next_token(s); !ts.empty()) {
    sample.timestamp_ms = parse_timestamp(ts);
    if (!sample.timestamp_ms) {
      error = sample.name + ": timestamp '" + std::string(ts) + "' is not an integer";
      return std::nullopt;
    }
  }
  if (!skip_blanks(s).empty()) {
    error = sample.name + ": unexpected text after the value";
    return std::nullopt;
  }
  return sample;
}

std::vector<metric_page> split_concatenated_pages(metric_page page) {
  std::vector<metric_page> out;
  std::set<std::string> seen;
  auto samples = std::move(page.samples);
  page.samples.clear();
  out.push_back(std::move(page));
  for (auto& s : samples) {
    auto labels = s.labels;
    std::sort(labels.begin(), labels.end());
    std::string key = s.name;
    for (const auto& [name, value] : labels)
      key += '\0' + name + '=' + value;
    if (!seen.insert(key).second) {
      out.emplace_back();
      seen = {key};
    }
    out.back().samples.push_back(std::move(s));
  }
  return out;
}

metric_page parse_prometheus_text(std::string_view text,
                                  const metric_text_limits& limits) {
  metric_page page;
  auto skip = [&](std::size_t number, std::string what) {
    ++page.skipped_lines;
    if (page.problems.size() < limits.max_problems)
      page.problems.push_back({number, std::move(what)});
  };
  std::size_t number = 0;
  while (!text.empty()) {
    const auto end = text.find('\n');
    auto line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    ++number;
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    if (line.size() > limits.max_line_bytes) {
      skip(number, "longer than " + std::to_string(limits.max_line_bytes) + " bytes");
      continue;
    }
    auto rest = skip_blanks(line);
    if (rest.empty())
      continue;
    if (rest.front() == '#') {
      rest = skip_blanks(rest.substr(1));
      if (next_token(rest) == "TYPE") {
        const auto family = next_token(rest);
        const auto kind = next_token(rest);
        if (!family.empty() && !kind.empty())
          page.types.emplace_back(std::string(family), std::string(kind));
      }
      continue;
    }
    std::string error;
    if (auto sample = parse_metric_line(rest, error, limits.max_labels))
      page.samples.push_back(std::move(*sample));
    else
      skip(number, std::move(error));
  }
  return page;
}

} // namespace vigil::agent
