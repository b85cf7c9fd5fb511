// What the debugging subcommands (`parse`, `nic`) share: sub-verb checks,
// duration flags, whole-file reads and event printing.
#pragma once

#include <chrono>
#include <initializer_list>
#include <iosfwd>
#include <string>
#include <vector>

#include "messages/health_event.hpp"
#include "runtime/cli/cli.hpp"

namespace vigil {

/// Sub-verbs such as `parse kmsg`: exactly one, from the allowed list; false
/// (with the problem on ctx.err) otherwise.
bool check_verb(command_context& ctx, const char* command,
                std::initializer_list<const char*> verbs);

/// One HealthEvent JSON per line: the stable output of `parse` and `nic`.
void print_events(std::ostream& out, const std::vector<health_event>& events);

/// A Go duration flag ("30s", "500ms"); `zero_allowed`: "0" too (off). The
/// failure names the flag.
expected<std::chrono::milliseconds> duration_flag(const command_line& args,
                                                  const char* name,
                                                  std::chrono::milliseconds fallback,
                                                  bool zero_allowed);

/// A whole file, or a failure naming it.
expected<std::string> read_text(const std::string& path);

} // namespace vigil
