// What the agent's readers of small text inputs share: blank trimming, and
// reading a file of config/ whole.
#pragma once

#include <cctype>
#include <string>
#include <string_view>

#include "messages/expected.hpp"

namespace vigil::agent {

/// `text` without leading and trailing white space.
inline std::string_view trim_space(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  return text;
}

/// The whole of `path`; the failure names it.
expected<std::string> read_text_file(const std::string& path);

/// Reads `dir`/`name` and parses it with `parse`; a failure of either names
/// the file (and the parser's where, "line 3").
template <class Parse>
auto load_config_file(const std::string& dir, const std::string& name, Parse parse)
  -> decltype(parse(std::string_view{})) {
  const auto path = dir + "/" + name;
  auto text = read_text_file(path);
  if (!text)
    return text.error();
  auto parsed = parse(*text);
  if (!parsed)
    return failure{path + " " + parsed.error().where, parsed.error().what};
  return parsed;
}

} // namespace vigil::agent
