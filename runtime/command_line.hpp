// Command-line parsing for the `vigil` subcommands: declared options, GNU
// style (--name value, --name=value, boolean --flag), errors that name the problem.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "messages/expected.hpp"

namespace vigil {

struct option_spec {
  std::string name;  ///< without the leading "--"
  std::string value; ///< placeholder such as "FILE"; empty for a boolean flag
  std::string help;
};

struct command_line {
  std::map<std::string, std::string> values;
  std::set<std::string> flags;
  std::vector<std::string> positional;

  bool has(const std::string& name) const {
    return values.count(name) != 0 || flags.count(name) != 0;
  }
  std::optional<std::string> value(const std::string& name) const {
    auto i = values.find(name);
    return i == values.end() ? std::nullopt : std::optional<std::string>{i->second};
  }
};

/// Parses `args` (without the program and subcommand names). "--" ends options.
expected<command_line> parse_command_line(const std::vector<option_spec>& specs,
                                          const std::vector<std::string>& args);

/// The "Options:" block of a --help text.
std::string format_options(const std::vector<option_spec>& specs);

} // namespace vigil
