// The `vigil` command: subcommand table, --help texts, global options, and
// dispatch. Streams are parameters so tests can run it without a process.
#pragma once

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "runtime/command_line.hpp"
#include "runtime/config.hpp"

namespace vigil {

/// What a subcommand gets: its parsed arguments and the effective config.
struct command_context {
  const command_line& args;
  const vigil_config& config;
  std::ostream& out;
  std::ostream& err;
};

struct subcommand {
  std::string name;
  std::string summary;
  std::string usage;                ///< after "vigil <name> "
  std::vector<option_spec> options; ///< beside the global ones
  std::function<int(command_context&)> run;
};

/// Every subcommand, in the order `vigil --help` lists them.
const std::vector<subcommand>& subcommands();

/// `args` excludes argv[0]. Returns the exit code: 0 success, 2 bad usage.
int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

} // namespace vigil
