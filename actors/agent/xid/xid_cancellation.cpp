#include "actors/agent/xid/xid_cancellation.hpp"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "actors/agent/text_input.hpp"

namespace vigil::agent {

namespace {

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (;;) {
    auto at = s.find(sep);
    out.push_back(s.substr(0, at));
    if (at == std::string_view::npos)
      return out;
    s.remove_prefix(at + 1);
  }
}

bool has_space(std::string_view s) {
  return std::any_of(s.begin(), s.end(),
                     [](char c) { return std::isspace(static_cast<unsigned char>(c)); });
}

} // namespace

expected<xid_cancellations> xid_cancellations::parse(std::string_view csv) {
  xid_cancellations out;
  bool header = true;
  std::size_t number = 0;
  for (auto raw : split(csv, '\n')) {
    ++number;
    auto line = trim_space(raw);
    if (line.empty() || line.front() == '#')
      continue;
    if (header) {
      header = false;
      continue;
    }
    auto fail = [&](std::string what) {
      return failure{"line " + std::to_string(number), std::move(what)};
    };
    auto fields = split(line, ',');
    if (fields.size() != 3)
      return fail("expected check,on_error_code,cancel_error_codes");
    const auto check = trim_space(fields[0]);
    const auto code = trim_space(fields[1]);
    if (check.empty() || has_space(check))
      return fail("check: empty or has spaces");
    if (code.empty() || has_space(code))
      return fail("on_error_code: empty or has spaces");
    std::vector<std::string> targets;
    std::istringstream codes{std::string(fields[2])};
    for (std::string target; codes >> target;) {
      if (target == code)
        return fail("cancel_error_codes: " + target + " cancels itself");
      if (std::find(targets.begin(), targets.end(), target) != targets.end())
        return fail("cancel_error_codes: " + target + " listed twice");
      targets.push_back(target);
    }
    if (targets.empty())
      return fail("cancel_error_codes: none");
    auto [at, added] =
      out.rules_.try_emplace({std::string(check), std::string(code)}, std::move(targets));
    if (!added)
      return fail(std::string(check) + " " + std::string(code) + " has a rule already");
  }
  return out;
}

expected<xid_cancellations> xid_cancellations::load(const std::string& dir) {
  return load_config_file(dir, "xid_cancellations.csv", parse);
}

std::vector<health_event>
xid_cancellations::cancelled_by(const health_event& source) const {
  if (source.is_healthy || source.error_codes.empty())
    return {};
  const auto& code = source.error_codes.front();
  auto rule = rules_.find({source.check_name, code});
  if (rule == rules_.end())
    return {};
  std::vector<health_event> out;
  for (const auto& target : rule->second) {
    health_event e;
    e.id = source.id.empty() ? "" : source.id + "-cancels-" + target;
    e.agent = source.agent;
    e.component_class = source.component_class;
    e.check_name = source.check_name;
    e.is_healthy = true;
    e.error_codes = {target};
    e.entities = source.entities;
    e.node_name = source.node_name;
    e.strategy = source.strategy;
    e.generated = source.generated;
    e.message = "cancelled by " + source.check_name + " error code " + code;
    e.metadata[std::string(cancel_source_key)] = code;
    out.push_back(std::move(e));
  }
  return out;
}

} // namespace vigil::agent
