#include "runtime/command_line.hpp"

#include <algorithm>

namespace vigil {

namespace {

const option_spec* find_spec(const std::vector<option_spec>& specs,
                             const std::string& name) {
  auto i = std::find_if(specs.begin(), specs.end(),
                        [&](const option_spec& s) { return s.name == name; });
  return i == specs.end() ? nullptr : &*i;
}

} // namespace

expected<command_line> parse_command_line(const std::vector<option_spec>& specs,
                                          const std::vector<std::string>& args) {
  command_line out;
  bool options_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& arg = args[i];
    if (options_done || arg.size() < 2 || arg.compare(0, 2, "--") != 0) {
      out.positional.push_back(arg);
      continue;
    }
    if (arg == "--") {
      options_done = true;
      continue;
    }
    auto eq = arg.find('=');
    const auto name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const auto* spec = find_spec(specs, name);
    if (spec == nullptr)
      return failure{"--" + name, "unknown option"};
    if (spec->value.empty()) {
      if (eq != std::string::npos)
        return failure{"--" + name, "takes no value"};
      out.flags.insert(name);
      continue;
    }
    if (eq != std::string::npos) {
      out.values[name] = arg.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      out.values[name] = args[++i];
    } else {
      return failure{"--" + name, "needs a value (" + spec->value + ")"};
    }
  }
  return out;
}

std::string format_options(const std::vector<option_spec>& specs) {
  std::string out = "Options:\n";
  for (const auto& s : specs) {
    std::string left = "  --" + s.name + (s.value.empty() ? "" : " " + s.value);
    if (left.size() < 30)
      left.resize(30, ' ');
    else
      left += "\n" + std::string(30, ' ');
    out += left + s.help + "\n";
  }
  return out;
}

} // namespace vigil
