// Regular expressions people write into vigil's config and flags (the
// drain's namespace patterns, the NIC monitor's name patterns), checked
// before std::regex compiles them. libstdc++'s regex compiler reads a
// back-reference or repetition count into a signed long and overflows on a
// long one (undefined behaviour, found by the config_yaml fuzzer), and it
// recurses once per alternative. No name pattern needs a back-reference or a
// count past 999,999, nor 1,024 characters, so those are refused with the
// reason.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace vigil {

constexpr std::size_t max_user_regex_length = 1024;

/// Why `pattern` is not accepted as a name pattern; none when it is (it may
/// still fail to compile: std::regex_error says why then).
inline std::optional<std::string> user_regex_problem(std::string_view pattern) {
  if (pattern.size() > max_user_regex_length)
    return "longer than " + std::to_string(max_user_regex_length) + " characters";
  bool in_count = false; // inside {m,n}
  std::size_t digits = 0;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[++i];
      if (next >= '1' && next <= '9')
        return std::string("back-references (\\") + next + ") are not supported";
      continue;
    }
    if (c == '{')
      in_count = true;
    else if (c == '}')
      in_count = false;
    digits = in_count && c >= '0' && c <= '9' ? digits + 1 : 0;
    if (digits > 6)
      return "a repetition count over 999999";
  }
  return std::nullopt;
}

} // namespace vigil
