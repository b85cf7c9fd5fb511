#include "actors/agent/nic/nic_monitor_options.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "actors/agent/nic/nic_sysfs.hpp"
#include "messages/user_regex.hpp"

namespace vigil::agent {

namespace {

constexpr std::pair<nic_check, std::string_view> check_names[] = {
  {nic_check::infiniband_state, "InfiniBandStateCheck"},
  {nic_check::infiniband_degradation, "InfiniBandDegradationCheck"},
  {nic_check::ethernet_state, "EthernetStateCheck"},
  {nic_check::ethernet_degradation, "EthernetDegradationCheck"},
};

std::vector<std::string_view> split_commas(std::string_view csv) {
  std::vector<std::string_view> out;
  while (!csv.empty()) {
    auto comma = csv.find(',');
    auto item = csv.substr(0, comma);
    while (!item.empty() && item.front() == ' ')
      item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ')
      item.remove_suffix(1);
    if (!item.empty())
      out.push_back(item);
    if (comma == std::string_view::npos)
      break;
    csv.remove_prefix(comma + 1);
  }
  return out;
}

// Multiplier in nanoseconds of a Go duration unit; 0 when not a unit.
double unit_nanos(std::string_view unit) {
  if (unit == "ns")
    return 1;
  if (unit == "us" || unit == "µs")
    return 1e3;
  if (unit == "ms")
    return 1e6;
  if (unit == "s")
    return 1e9;
  if (unit == "m")
    return 60e9;
  if (unit == "h")
    return 3600e9;
  return 0;
}

status apply_checks(const std::string& value, nic_monitor_options& out) {
  out.checks.clear();
  for (auto name : split_commas(value)) {
    if (auto check = parse_nic_check(name))
      out.checks.insert(*check);
    else
      out.unknown_checks.emplace_back(name); // seed 002 §12.1: logged and skipped
  }
  if (out.checks.empty())
    return failure{"--checks", "no known check in \"" + value + "\""};
  return ok();
}

std::string quoted(std::string_view text) {
  return "\"" + std::string(text) + "\"";
}

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && text.front() == ' ')
    text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ')
    text.remove_suffix(1);
  return text;
}

std::string known_counters() {
  std::string out;
  for (const auto& name : nic_counter_names())
    out += (out.empty() ? "" : ", ") + name;
  return out;
}

status apply_value(const std::string& name, const std::string& value,
                   nic_monitor_options& out) {
  if (name == "state-polling-interval") {
    auto interval = parse_go_duration(value);
    if (!interval)
      return failure{"--" + name, interval.error().what};
    out.state_polling_interval = *interval;
  } else if (name == "checks") {
    return apply_checks(value, out);
  } else if (name == "counter-threshold") {
    return parse_counter_thresholds(value, out.counter_thresholds);
  } else if (name == "processing-strategy") {
    auto strategy = parse_processing_strategy(value);
    if (!strategy || *strategy == processing_strategy::store_and_analyse)
      return failure{"--" + name,
                     "expected EXECUTE_REMEDIATION or STORE_ONLY, got \"" + value + "\""};
    out.strategy = *strategy;
  } else if (name == "nic-exclusion-regex" || name == "nic-inclusion-regex-override") {
    if (auto compiled = compile_name_patterns("--" + name, value); !compiled)
      return compiled.error();
    (name == "nic-exclusion-regex" ? out.nic_exclusion_regex
                                   : out.nic_inclusion_regex_override) = value;
  } else {
    if (value.empty())
      return failure{"--" + name, "must not be empty"};
    std::string* field = name == "state-file"       ? &out.state_file
                         : name == "boot-id-path"   ? &out.boot_id_path
                         : name == "metadata-path"  ? &out.metadata_path
                         : name == "node-name"      ? &out.node_name
                         : name == "sysfs-root"     ? &out.sysfs_root
                         : name == "proc-net-route" ? &out.proc_net_route
                                                    : nullptr;
    if (field == nullptr)
      return failure{"--" + name, "unknown option"};
    *field = value;
  }
  return ok();
}

} // namespace

std::string_view to_string(nic_check check) {
  for (const auto& [value, name] : check_names)
    if (value == check)
      return name;
  return "InfiniBandStateCheck";
}

std::optional<nic_check> parse_nic_check(std::string_view name) {
  for (const auto& [value, text] : check_names)
    if (text == name)
      return value;
  return std::nullopt;
}

nic_check state_check_for(std::string_view link_layer) {
  return link_layer == "Ethernet" ? nic_check::ethernet_state
                                  : nic_check::infiniband_state;
}

nic_check degradation_check_for(std::string_view link_layer) {
  return link_layer == "Ethernet" ? nic_check::ethernet_degradation
                                  : nic_check::infiniband_degradation;
}

std::map<std::string, std::uint64_t> default_counter_thresholds() {
  std::map<std::string, std::uint64_t> out;
  for (const auto& name : nic_counter_names())
    out[name] = 0;
  return out;
}

status parse_counter_thresholds(std::string_view text,
                                std::map<std::string, std::uint64_t>& thresholds) {
  const std::string flag = "--counter-threshold";
  auto items = split_commas(text);
  if (items.empty())
    return failure{flag, "expected NAME=N, got " + quoted(text)};
  auto parsed = thresholds; // nothing is applied unless every item is good
  for (auto item : items) {
    const auto eq = item.find('=');
    const auto counter = trimmed(item.substr(0, eq));
    if (eq == std::string_view::npos || counter.empty())
      return failure{flag, "expected NAME=N, got " + quoted(item)};
    const auto& names = nic_counter_names();
    if (std::find(names.begin(), names.end(), counter) == names.end())
      return failure{flag, "unknown counter " + quoted(counter)
                             + " (known: " + known_counters() + ")"};
    const auto number = trimmed(item.substr(eq + 1));
    std::uint64_t value = 0;
    auto [end, error] =
      std::from_chars(number.data(), number.data() + number.size(), value);
    if (number.empty() || error != std::errc{} || end != number.data() + number.size())
      return failure{flag, quoted(number) + " for " + std::string(counter)
                             + " is not a whole number of errors (0 or more)"};
    parsed[std::string(counter)] = value;
  }
  thresholds = std::move(parsed);
  return ok();
}

status apply_nic_monitor_flags(const command_line& args, nic_monitor_options& options,
                               const std::set<std::string>& skip) {
  for (const auto& spec : nic_monitor_option_specs()) {
    if (skip.count(spec.name) != 0)
      continue;
    if (auto value = args.value(spec.name))
      if (auto st = apply_value(spec.name, *value, options); !st)
        return st;
  }
  return ok();
}

expected<std::string> metadata_path_flag(const command_line& args,
                                         const std::string& fallback) {
  const auto seed_name = args.value("metadata-path");
  const auto short_name = args.value("metadata");
  if (seed_name && short_name && *seed_name != *short_name)
    return failure{"--metadata-path", "\"" + *seed_name
                                        + "\" is not the file --metadata names (\""
                                        + *short_name + "\"); give one of the two"};
  if (seed_name)
    return *seed_name;
  return short_name ? *short_name : fallback;
}

std::vector<option_spec> nic_monitor_tuning_specs() {
  static const std::set<std::string> tuning{
    "state-polling-interval", "checks",
    "nic-exclusion-regex",    "nic-inclusion-regex-override",
    "processing-strategy",    "counter-threshold",
  };
  std::vector<option_spec> out;
  for (auto& spec : nic_monitor_option_specs())
    if (tuning.count(spec.name) != 0)
      out.push_back(std::move(spec));
  return out;
}

std::vector<option_spec> nic_monitor_option_specs() {
  return {
    {"state-polling-interval", "DURATION", "state poll period, Go duration (default 1s)"},
    {"state-file", "FILE",
     "persisted port state (default /var/run/nic_health_monitor/state.json)"},
    {"boot-id-path", "FILE",
     "kernel boot ID (default /nvsentinel/proc/sys/kernel/random/boot_id)"},
    {"metadata-path", "FILE",
     "gpu_metadata.json (default /var/lib/nvsentinel/gpu_metadata.json)"},
    {"checks", "LIST",
     "enabled checks (default InfiniBandStateCheck,InfiniBandDegradationCheck,"
     "EthernetStateCheck,EthernetDegradationCheck)"},
    {"node-name", "NAME", "nodeName of the events (default $NODE_NAME)"},
    {"nic-exclusion-regex", "LIST",
     "comma-separated patterns of NICs to drop (default ^veth.*,^docker.*,^br-.*,^lo$)"},
    {"nic-inclusion-regex-override", "LIST",
     "monitor only matching devices, skipping NUMA gate and roles (default empty)"},
    {"sysfs-root", "DIR", "the host's /sys (default /nvsentinel/sys)"},
    {"proc-net-route", "FILE", "routing table (default /nvsentinel/proc/net/route)"},
    {"processing-strategy", "NAME", "EXECUTE_REMEDIATION (default) or STORE_ONLY"},
    {"counter-threshold", "NAME=N,...",
     "fatal when an Appendix A counter rises more than N above vigil's first "
     "reading of it (default 0 for each)"},
  };
}

expected<nic_monitor_options>
parse_nic_monitor_flags(const std::vector<std::string>& args,
                        const std::optional<std::string>& node_name_env) {
  auto line = parse_command_line(nic_monitor_option_specs(), args);
  if (!line)
    return line.error();
  if (!line->positional.empty())
    return failure{line->positional.front(), "unexpected argument"};
  nic_monitor_options out;
  for (const auto& [name, value] : line->values)
    if (auto st = apply_value(name, value, out); !st)
      return st.error();
  if (out.node_name.empty() && node_name_env)
    out.node_name = *node_name_env;
  if (out.node_name.empty())
    return failure{"--node-name", "not given and NODE_NAME is not set"};
  return out;
}

expected<nic_monitor_options>
parse_nic_monitor_flags(const std::vector<std::string>& args) {
  const char* env = std::getenv("NODE_NAME");
  return parse_nic_monitor_flags(args, env != nullptr ? std::optional<std::string>{env}
                                                      : std::nullopt);
}

expected<std::chrono::milliseconds> parse_go_duration(std::string_view text) {
  const std::string original(text);
  if (text.empty())
    return failure{"", "empty duration"};
  double nanos = 0;
  while (!text.empty()) {
    size_t digits = 0;
    while (digits < text.size()
           && ((text[digits] >= '0' && text[digits] <= '9') || text[digits] == '.'))
      ++digits;
    size_t unit_end = digits;
    while (unit_end < text.size() && !(text[unit_end] >= '0' && text[unit_end] <= '9'))
      ++unit_end;
    const double unit = unit_nanos(text.substr(digits, unit_end - digits));
    if (digits == 0 || unit == 0)
      return failure{"", "\"" + original + "\" is not a duration such as 1s or 500ms"};
    char* end = nullptr;
    const std::string number(text.substr(0, digits));
    const double value = std::strtod(number.c_str(), &end);
    if (end != number.c_str() + number.size())
      return failure{"", "\"" + original + "\" is not a duration such as 1s or 500ms"};
    nanos += value * unit;
    text.remove_prefix(unit_end);
  }
  const auto ms = static_cast<long long>(nanos / 1e6);
  if (ms <= 0 || nanos > 1e9 * 86400 * 365)
    return failure{"", "\"" + original + "\" must be at least 1ms and under a year"};
  return std::chrono::milliseconds{ms};
}

expected<std::vector<std::regex>> compile_name_patterns(std::string_view flag,
                                                        std::string_view csv) {
  std::vector<std::regex> out;
  for (auto pattern : split_commas(csv)) {
    if (auto problem = user_regex_problem(pattern))
      return failure{std::string(flag), "pattern not accepted: " + *problem};
    try {
      out.emplace_back(std::string(pattern), std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      return failure{std::string(flag),
                     "invalid pattern \"" + std::string(pattern) + "\": " + e.what()};
    }
  }
  return out;
}

} // namespace vigil::agent
