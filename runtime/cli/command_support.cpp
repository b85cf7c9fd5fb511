#include "runtime/cli/command_support.hpp"

#include <cstdlib>
#include <fstream>
#include <ostream>
#include <sstream>

#include "actors/agent/nic/nic_monitor_options.hpp"

namespace vigil {

expected<std::chrono::milliseconds> duration_flag(const command_line& args,
                                                  const char* name,
                                                  std::chrono::milliseconds fallback,
                                                  bool zero_allowed) {
  const auto text = args.value(name);
  if (!text)
    return fallback;
  if (zero_allowed && *text == "0")
    return std::chrono::milliseconds{0};
  auto parsed = agent::parse_go_duration(*text);
  if (!parsed)
    return failure{std::string("--") + name, parsed.error().what};
  return *parsed;
}

bool check_verb(command_context& ctx, const char* command,
                std::initializer_list<const char*> verbs) {
  const auto& pos = ctx.args.positional;
  std::string list;
  for (const char* v : verbs)
    list += list.empty() ? v : std::string("|") + v;
  if (pos.empty()) {
    ctx.err << "vigil " << command << ": missing what to run (" << list << ")\n";
    return false;
  }
  for (const char* v : verbs)
    if (pos.front() == v)
      return true;
  ctx.err << "vigil " << command << ": unknown '" << pos.front() << "' (expected " << list
          << ")\n";
  return false;
}

void print_events(std::ostream& out, const std::vector<health_event>& events) {
  for (const auto& e : events)
    out << encode_health_event(e) << "\n";
  out.flush();
}

expected<std::string> read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return failure{path, "cannot be read"};
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

} // namespace vigil
