#include "runtime/install/manifest_yaml.hpp"

#include <algorithm>
#include <cctype>
#include <regex>
#include <stdexcept>

namespace vigil::install {

namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// The words YAML 1.1 (what Kubernetes' YAML reader follows) or 1.2 read as
// null or a boolean.
bool is_reserved_word(std::string_view text) {
  static const char* words[] = {"~",   "null", "true", "false", "yes",   "no",    "on",
                                "off", "y",    "n",    ".inf",  "-.inf", "+.inf", ".nan"};
  const auto l = lower(text);
  return std::any_of(std::begin(words), std::end(words),
                     [&](const char* word) { return l == word; });
}

// Could a YAML reader take this for a number (decimal, octal, hex, float,
// YAML 1.1 sexagesimal or underscored)? Conservative: anything that starts
// like a number and holds only number characters.
bool looks_numeric(std::string_view text) {
  static const std::regex number{R"([-+]?(\.?[0-9][0-9a-fA-FxXoO_.:eE+-]*))"};
  return std::regex_match(text.begin(), text.end(), number);
}

bool plain_safe(std::string_view text) {
  if (text.empty() || is_reserved_word(text) || looks_numeric(text))
    return false;
  static const std::regex plain{R"([A-Za-z0-9_./$][A-Za-z0-9_./$ =@,()+*:<>|!?%^&'-]*)"};
  if (!std::regex_match(text.begin(), text.end(), plain))
    return false;
  const auto has = [&](std::string_view part) {
    return text.find(part) != std::string_view::npos;
  };
  return !has(": ") && !has(" #") && text.back() != ':' && text.back() != ' ';
}

// A literal block gives back the text exactly when no line has trailing
// blanks or control characters and the first line does not open with a
// blank (that would need an indentation indicator).
bool literal_safe(std::string_view text) {
  if (text.find('\n') == std::string_view::npos || text.front() == ' '
      || text.front() == '\n')
    return false;
  size_t line_start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == '\n') {
      if (i > line_start && (text[i - 1] == ' ' || text[i - 1] == '\t'))
        return false;
      line_start = i + 1;
      continue;
    }
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 && c != '\t')
      return false;
  }
  return true;
}

std::string quoted(const std::string& text) {
  return object(text).dump(); // a JSON string is a YAML double-quoted scalar
}

std::string scalar(const object& value) {
  if (value.is_string()) {
    const auto& text = value.get_ref<const std::string&>();
    return plain_safe(text) ? text : quoted(text);
  }
  if (value.is_null())
    return "null";
  return value.dump();
}

void emit(const object& value, int indent, std::string& out);

void emit_literal(const std::string& text, int indent, std::string& out) {
  size_t trailing = 0;
  while (trailing < text.size() && text[text.size() - 1 - trailing] == '\n')
    ++trailing;
  out += trailing == 0 ? "|-" : trailing == 1 ? "|" : "|+";
  out += '\n';
  const std::string pad(static_cast<size_t>(indent), ' ');
  size_t start = 0;
  const size_t body_end = text.size() - (trailing == 1 ? 1 : 0);
  while (start < body_end) {
    auto end = text.find('\n', start);
    if (end == std::string::npos || end > body_end)
      end = body_end;
    if (end > start)
      out += pad + text.substr(start, end - start);
    out += '\n';
    start = end + 1;
  }
}

// After "key:" or "- ": a nested collection starts on the next line, a
// scalar after one space.
void emit_value(const object& value, int indent, std::string& out) {
  if (value.is_object() && !value.empty()) {
    out += '\n';
    emit(value, indent, out);
  } else if (value.is_array() && !value.empty()) {
    out += '\n';
    emit(value, indent, out);
  } else if (value.is_string() && literal_safe(value.get_ref<const std::string&>())) {
    out += ' ';
    emit_literal(value.get_ref<const std::string&>(), indent, out);
  } else {
    out += ' ';
    out += value.is_object() ? "{}" : value.is_array() ? "[]" : scalar(value);
    out += '\n';
  }
}

void emit(const object& value, int indent, std::string& out) {
  const std::string pad(static_cast<size_t>(indent), ' ');
  if (value.is_object()) {
    for (const auto& [key, child] : value.items()) {
      out += pad + scalar(object(key)) + ':';
      // Kubernetes style: a list under a key is not indented further.
      emit_value(child, child.is_array() ? indent : indent + 2, out);
    }
  } else if (value.is_array()) {
    for (const auto& item : value) {
      if (item.is_object() && !item.empty()) {
        // "- " then the map's first key on the same line.
        std::string nested;
        emit(item, indent + 2, nested);
        out += pad + "- " + nested.substr(static_cast<size_t>(indent) + 2);
      } else {
        out += pad + '-';
        emit_value(item, indent + 2, out);
      }
    }
  } else {
    out += pad + scalar(value) + '\n';
  }
}

object typed_plain_scalar(const std::string& text) {
  static const std::regex integer{R"([-+]?[0-9]+)"};
  static const std::regex hex{R"(0x[0-9a-fA-F]+)"};
  static const std::regex floating{
    R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)"};
  const auto l = lower(text);
  if (text.empty() || l == "~" || l == "null")
    return nullptr;
  if (l == "true" || l == "yes" || l == "on")
    return true;
  if (l == "false" || l == "no" || l == "off")
    return false;
  try {
    if (std::regex_match(text, integer))
      return std::stoll(text);
    if (std::regex_match(text, hex))
      return std::stoll(text, nullptr, 16);
    if (std::regex_match(text, floating))
      return std::stod(text);
  } catch (const std::out_of_range&) {
    // Too large for a 64-bit number: keep the text.
  }
  return text;
}

} // namespace

object yaml_to_json(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      object out = object::object();
      for (const auto& entry : node)
        out[entry.first.as<std::string>()] = yaml_to_json(entry.second);
      return out;
    }
    case YAML::NodeType::Sequence: {
      object out = object::array();
      for (const auto& item : node)
        out.push_back(yaml_to_json(item));
      return out;
    }
    case YAML::NodeType::Scalar:
      if (node.Tag() == "!")
        return node.Scalar(); // quoted: always a string
      return typed_plain_scalar(node.Scalar());
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined: return nullptr;
  }
  return nullptr;
}

object parse_yaml(std::string_view text, std::string_view what) {
  try {
    return yaml_to_json(YAML::Load(std::string(text)));
  } catch (const YAML::Exception& e) {
    throw std::runtime_error(std::string(what) + ": line "
                             + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
}

std::string to_yaml(const object& value) {
  std::string out;
  if (value.is_object() || value.is_array()) {
    if (value.empty())
      return value.is_object() ? "{}\n" : "[]\n";
    emit(value, 0, out);
  } else {
    out = scalar(value) + '\n';
  }
  return out;
}

std::string to_yaml_stream(const std::vector<manifest>& manifests) {
  std::string out;
  for (size_t i = 0; i < manifests.size(); ++i) {
    if (i > 0)
      out += "---\n";
    const auto& comment = manifests[i].comment;
    size_t start = 0;
    while (start < comment.size()) {
      auto end = comment.find('\n', start);
      if (end == std::string::npos)
        end = comment.size();
      const auto line = comment.substr(start, end - start);
      out += line.empty() ? "#\n" : "# " + line + '\n';
      start = end + 1;
    }
    out += to_yaml(manifests[i].body);
  }
  return out;
}

} // namespace vigil::install
