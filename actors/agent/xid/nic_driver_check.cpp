#include "actors/agent/xid/nic_driver_check.hpp"

#include <cctype>
#include <filesystem>

#include "actors/agent/text_input.hpp"
#include "actors/agent/xid/kernel_log_line.hpp"
#include "actors/agent/xid/xid_events.hpp"

namespace vigil::agent {

namespace {

constexpr std::size_t max_message_bytes = 1024; // what ingest takes per string

bool is_hex(char c) {
  return std::isxdigit(static_cast<unsigned char>(c)) != 0;
}

// "dddd:bb:dd.f" at `s`: 4 hex, ':', 2 hex, ':', 2 hex, '.', 1 hex.
bool pci_function_at(std::string_view s) {
  static constexpr std::string_view shape = "hhhh:hh:hh.h";
  if (s.size() < shape.size())
    return false;
  for (std::size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == 'h' ? !is_hex(s[i]) : s[i] != shape[i])
      return false;
  return true;
}

std::string first_entry(const std::filesystem::path& dir) {
  std::error_code ec;
  std::string first;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    auto name = entry.path().filename().string();
    if (first.empty() || name < first)
      first = name;
  }
  return first;
}

} // namespace

expected<std::vector<nic_driver_pattern>>
parse_nic_driver_patterns(std::string_view csv) {
  std::vector<nic_driver_pattern> out;
  bool header = true;
  std::size_t number = 0;
  while (!csv.empty()) {
    auto eol = csv.find('\n');
    auto line = trim_space(csv.substr(0, eol));
    csv = eol == std::string_view::npos ? std::string_view{} : csv.substr(eol + 1);
    ++number;
    if (line.empty() || line.front() == '#')
      continue;
    if (header) { // name,fatal,action,regex,description
      header = false;
      continue;
    }
    const std::string where = "line " + std::to_string(number);
    std::vector<std::string_view> fields;
    for (int i = 0; i < 4; ++i) {
      auto comma = line.find(',');
      if (comma == std::string_view::npos)
        return failure{where, "expected name,fatal,action,regex,description"};
      fields.push_back(trim_space(line.substr(0, comma)));
      line = line.substr(comma + 1);
    }
    nic_driver_pattern p;
    p.name = std::string(fields[0]);
    if (p.name.empty())
      return failure{where + " name", "is empty"};
    if (fields[1] != "true" && fields[1] != "false")
      return failure{where + " fatal", "expected true or false"};
    p.fatal = fields[1] == "true";
    auto action = parse_recommended_action(fields[2]);
    if (!action)
      return failure{where + " action",
                     "\"" + std::string(fields[2]) + "\" is not a recommended action"};
    p.action = *action;
    p.regex = std::string(fields[3]);
    if (p.regex.empty())
      return failure{where + " regex", "is empty"};
    p.description = std::string(trim_space(line));
    for (const auto& seen : out)
      if (seen.name == p.name)
        return failure{where + " name", "\"" + p.name + "\" is given twice"};
    out.push_back(std::move(p));
  }
  return out;
}

expected<std::vector<nic_driver_pattern>>
load_nic_driver_patterns(const std::string& dir) {
  return load_config_file(dir, "nic_driver_patterns.csv", parse_nic_driver_patterns);
}

std::string first_pci_function(std::string_view text) {
  for (std::size_t i = 0; i + 12 <= text.size(); ++i)
    if ((i == 0 || !is_hex(text[i - 1])) && pci_function_at(text.substr(i))
        && (i + 12 == text.size() || !is_hex(text[i + 12]))) {
      std::string out(text.substr(i, 12));
      for (auto& c : out)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return out;
    }
  return {};
}

std::string mlx5_device_of(const std::string& sysfs_root, const std::string& pci) {
  if (pci.empty())
    return {};
  const std::filesystem::path device =
    std::filesystem::path(sysfs_root) / "bus/pci/devices" / pci;
  std::error_code ec;
  const auto driver = std::filesystem::read_symlink(device / "driver", ec);
  if (ec || driver.filename() != "mlx5_core")
    return {};
  auto name = first_entry(device / "infiniband");
  return name.empty() ? first_entry(device / "net") : name;
}

std::string required_literal(std::string_view regex) {
  static constexpr std::string_view special = ".*+?()[]{}|^$\\";
  std::string best, run;
  auto end_run = [&] {
    if (run.size() > best.size())
      best = run;
    run.clear();
  };
  for (std::size_t i = 0; i < regex.size(); ++i) {
    const char c = regex[i];
    if (c == '|')
      return {}; // an alternation at the top: no literal is certain
    if (c == '(' || c == '[') {
      end_run();
      // Skip the group or class whole: its contents may be optional.
      const char close = c == '(' ? ')' : ']';
      int nest = 1;
      for (++i; i < regex.size() && nest > 0; ++i) {
        if (regex[i] == '\\') {
          ++i;
          continue;
        }
        nest += regex[i] == c ? 1 : regex[i] == close ? -1 : 0;
      }
      --i;
      continue;
    }
    const bool escaped = c == '\\' && i + 1 < regex.size();
    const char literal = escaped ? regex[i + 1] : c;
    const std::size_t next = escaped ? i + 2 : i + 1;
    const bool optional =
      next < regex.size()
      && (regex[next] == '?' || regex[next] == '*' || regex[next] == '{');
    if (escaped && std::isalnum(static_cast<unsigned char>(literal))) {
      end_run(); // \d, \s, \b: a class, not a character
      i = next - 1;
      continue;
    }
    if ((!escaped && special.find(c) != std::string_view::npos) || optional) {
      end_run();
      i = next - 1;
      continue;
    }
    run += literal;
    i = next - 1;
  }
  end_run();
  return best;
}

expected<nic_driver_check>
nic_driver_check::make(std::vector<nic_driver_pattern> patterns) {
  nic_driver_check check;
  for (const auto& p : patterns) {
    check.literals_.push_back(required_literal(p.regex));
    try {
      check.compiled_.emplace_back(p.regex,
                                   std::regex::ECMAScript | std::regex::optimize);
    } catch (const std::regex_error& e) {
      return failure{"nic driver pattern " + p.name,
                     std::string("bad regex: ") + e.what()};
    }
  }
  check.patterns_ = std::move(patterns);
  return check;
}

const nic_driver_pattern* nic_driver_check::match(std::string_view message) const {
  if (message.find("mlx5") == std::string_view::npos
      && message.find("NETDEV WATCHDOG") == std::string_view::npos)
    return nullptr;
  for (std::size_t i = 0; i < patterns_.size(); ++i)
    if ((literals_[i].empty() || message.find(literals_[i]) != std::string_view::npos)
        && std::regex_search(message.begin(), message.end(), compiled_[i]))
      return &patterns_[i];
  return nullptr;
}

std::optional<health_event>
nic_driver_check::event_for(std::string_view raw_line, wall_time at,
                            const std::string& node_name, const std::string& boot_id,
                            const std::string& sysfs_root) const {
  if (raw_line.find("mlx5") == std::string_view::npos
      && raw_line.find("NETDEV WATCHDOG") == std::string_view::npos)
    return std::nullopt;
  const auto line = split_kernel_log_line(raw_line);
  const auto* pattern = match(line.message);
  if (pattern == nullptr)
    return std::nullopt;
  nic_driver_event_input in;
  in.node_name = node_name;
  in.boot_id = boot_id;
  in.message = line.message;
  in.raw_line = raw_line;
  in.timestamp_key = timestamp_key(line, at);
  in.at = at;
  in.pci = first_pci_function(line.message);
  in.device = mlx5_device_of(sysfs_root, in.pci);
  return nic_driver_event(*pattern, in);
}

health_event nic_driver_event(const nic_driver_pattern& pattern,
                              const nic_driver_event_input& in) {
  health_event event;
  event.agent = std::string(syslog_agent_name);
  event.component_class = "NIC";
  event.check_name = std::string(nic_driver_check_name);
  event.node_name = in.node_name;
  event.generated = in.at;
  event.id = make_event_id(in.node_name, in.boot_id, in.message, in.timestamp_key);
  event.is_fatal = pattern.fatal;
  event.action = pattern.action;
  event.error_codes = {pattern.name};
  event.message = std::string(in.message.substr(0, max_message_bytes));
  if (!in.device.empty())
    event.entities.push_back({"NIC", in.device});
  event.metadata["line"] = std::string(in.raw_line.substr(0, max_message_bytes));
  event.metadata["description"] = pattern.description;
  if (!in.pci.empty())
    event.metadata["pci"] = in.pci;
  return event;
}

} // namespace vigil::agent
