#include "actors/control/rules/label_selector.hpp"

#include <algorithm>
#include <cctype>

namespace vigil::control {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ')
    s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ')
    s.remove_suffix(1);
  return s;
}

// A label key or value: letters, digits and -_./ (no spaces, operators or
// parentheses), which is all a selector needs to tell them apart.
bool plain(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'
           || c == '/';
  });
}

// The requirements of `text`: split at the commas outside parentheses.
std::vector<std::string_view> split_requirements(std::string_view text) {
  std::vector<std::string_view> out;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || (text[i] == ',' && depth == 0)) {
      out.push_back(text.substr(start, i - start));
      start = i + 1;
    } else if (text[i] == '(') {
      ++depth;
    } else if (text[i] == ')') {
      --depth;
    }
  }
  return out;
}

} // namespace

expected<label_selector::requirement>
label_selector::parse_requirement(std::string_view raw) {
  const auto text = trim(raw);
  const auto bad = [&](const std::string& why) {
    return failure{"\"" + std::string(text) + "\"", why};
  };
  requirement r;
  if (!text.empty() && text.front() == '!') {
    r.key = std::string(trim(text.substr(1)));
    r.what = requirement::op::not_exists;
    if (r.key.empty() || !plain(r.key))
      return bad("expected a label key after '!'");
    return r;
  }
  for (const auto& [word, what] :
       {std::pair{std::string_view(" notin "), requirement::op::not_in},
        std::pair{std::string_view(" in "), requirement::op::in}}) {
    const auto at = text.find(word);
    if (at == std::string_view::npos)
      continue;
    r.key = std::string(trim(text.substr(0, at)));
    r.what = what;
    auto set = trim(text.substr(at + word.size()));
    if (r.key.empty() || !plain(r.key) || set.size() < 2 || set.front() != '('
        || set.back() != ')')
      return bad("expected KEY " + std::string(trim(word)) + " (VALUE,…)");
    for (auto v : split_requirements(set.substr(1, set.size() - 2))) {
      v = trim(v);
      if (!plain(v))
        return bad("\"" + std::string(v) + "\" is not a label value");
      r.values.emplace_back(v);
    }
    return r;
  }
  auto op = text.find_first_of("!=");
  if (op == std::string_view::npos) {
    r.key = std::string(text);
    if (r.key.empty() || !plain(r.key))
      return bad(
        "expected KEY, !KEY, KEY=VALUE, KEY!=VALUE, KEY in (…) or KEY notin (…)");
    return r;
  }
  r.key = std::string(trim(text.substr(0, op)));
  auto rest = text.substr(op);
  if (rest.rfind("!=", 0) == 0) {
    r.what = requirement::op::not_in;
    rest.remove_prefix(2);
  } else {
    r.what = requirement::op::in;
    rest.remove_prefix(rest.rfind("==", 0) == 0 ? 2 : 1);
  }
  const auto value = trim(rest);
  if (r.key.empty() || !plain(r.key) || !plain(value))
    return bad("expected KEY=VALUE or KEY!=VALUE");
  r.values.emplace_back(value);
  return r;
}

expected<label_selector> label_selector::parse(std::string_view text) {
  label_selector selector;
  if (trim(text).empty())
    return selector;
  for (auto part : split_requirements(text)) {
    auto r = parse_requirement(part);
    if (!r)
      return r.error();
    selector.requirements_.push_back(std::move(*r));
  }
  return selector;
}

bool label_selector::matches(const std::map<std::string, std::string>& labels) const {
  return std::all_of(
    requirements_.begin(), requirements_.end(), [&](const requirement& r) {
      auto label = labels.find(r.key);
      const bool present = label != labels.end();
      const bool listed =
        present
        && std::find(r.values.begin(), r.values.end(), label->second) != r.values.end();
      switch (r.what) {
        case requirement::op::exists: return present;
        case requirement::op::not_exists: return !present;
        case requirement::op::in: return listed;
        case requirement::op::not_in: return !listed;
      }
      return false;
    });
}

} // namespace vigil::control
