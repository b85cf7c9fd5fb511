#include "runtime/sim/kube/kube_selectors.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace vigil::kube {

namespace {

api_status bad_selector(const std::string& kind, const std::string& term,
                        const std::string& why) {
  return api_status{400, "BadRequest",
                    "unable to parse " + kind + " selector requirement \"" + term
                      + "\": " + why,
                    nullptr};
}

std::string trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string::npos)
    return {};
  const auto last = text.find_last_not_of(" \t");
  return text.substr(first, last - first + 1);
}

bool is_alnum(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0;
}

// A label name or value: 1..63 of [A-Za-z0-9._-], alphanumeric at both ends.
bool valid_label_name(const std::string& name) {
  if (name.empty() || name.size() > 63 || !is_alnum(name.front())
      || !is_alnum(name.back()))
    return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return is_alnum(c) || c == '-' || c == '_' || c == '.';
  });
}

// A DNS-1123 subdomain, the optional prefix of a label key.
bool valid_key_prefix(const std::string& prefix) {
  if (prefix.empty() || prefix.size() > 253 || !is_alnum(prefix.front())
      || !is_alnum(prefix.back()))
    return false;
  return std::all_of(prefix.begin(), prefix.end(), [](char c) {
    return (is_alnum(c) && !std::isupper(static_cast<unsigned char>(c))) || c == '-'
           || c == '.';
  });
}

bool valid_label_key(const std::string& key) {
  const auto slash = key.find('/');
  if (slash == std::string::npos)
    return valid_label_name(key);
  return valid_key_prefix(key.substr(0, slash))
         && valid_label_name(key.substr(slash + 1));
}

bool valid_label_value(const std::string& value) {
  return value.empty() || valid_label_name(value);
}

bool parse_integer(const std::string& text, long long& out) {
  if (text.empty())
    return false;
  char* end = nullptr;
  out = std::strtoll(text.c_str(), &end, 10);
  return end != nullptr && *end == '\0';
}

// Splits at commas that are not inside parentheses.
std::vector<std::string> split_label_terms(const std::string& text) {
  std::vector<std::string> terms;
  std::string current;
  int depth = 0;
  for (char c : text) {
    if (c == '(')
      ++depth;
    else if (c == ')')
      --depth;
    if (c == ',' && depth <= 0) {
      terms.push_back(trim(current));
      current.clear();
    } else {
      current += c;
    }
  }
  terms.push_back(trim(current));
  return terms;
}

bool is_operator_char(char c) {
  return std::isspace(static_cast<unsigned char>(c)) != 0
         || std::string_view{"=!<>(),"}.find(c) != std::string_view::npos;
}

// Parses "(a, b)" into values; "" on success, else why not.
std::string parse_value_set(const std::string& text, std::vector<std::string>& values) {
  if (text.empty() || text.front() != '(')
    return "expected '(' after the set operator";
  if (text.back() != ')')
    return "missing ')'";
  std::string inner = text.substr(1, text.size() - 2);
  if (trim(inner).empty())
    return "values set can't be empty";
  std::string::size_type start = 0;
  while (start <= inner.size()) {
    auto comma = inner.find(',', start);
    if (comma == std::string::npos)
      comma = inner.size();
    auto value = trim(inner.substr(start, comma - start));
    if (!valid_label_value(value) || value.find_first_of("()") != std::string::npos)
      return "invalid label value \"" + value + "\"";
    values.push_back(std::move(value));
    start = comma + 1;
  }
  return {};
}

// Parses what follows the key; "" on success, else why not.
std::string parse_operation(const std::string& rest, label_requirement& req) {
  using op = label_requirement::op;
  if (rest.empty()) {
    req.operation = op::exists;
    return {};
  }
  struct symbol {
    const char* text;
    op operation;
  };
  static const symbol symbols[] = {{"==", op::equals},
                                   {"!=", op::not_equals},
                                   {"=", op::equals},
                                   {">", op::greater},
                                   {"<", op::less}};
  for (const auto& sym : symbols) {
    if (rest.rfind(sym.text, 0) != 0)
      continue;
    req.operation = sym.operation;
    auto value = trim(rest.substr(std::string_view{sym.text}.size()));
    long long number = 0;
    if ((sym.operation == op::greater || sym.operation == op::less)
        && !parse_integer(value, number))
      return "'" + value + "' is not an integer";
    if (!valid_label_value(value))
      return "invalid label value \"" + value + "\"";
    req.values.push_back(std::move(value));
    return {};
  }
  for (const auto& [word, operation] :
       {std::pair{"notin", op::not_in}, std::pair{"in", op::in}}) {
    const std::string w = word;
    if (rest.rfind(w, 0) != 0 || rest.size() == w.size()
        || !(rest[w.size()] == '('
             || std::isspace(static_cast<unsigned char>(rest[w.size()]))))
      continue;
    req.operation = operation;
    return parse_value_set(trim(rest.substr(w.size())), req.values);
  }
  return "unknown operator in \"" + rest + "\"";
}

std::optional<label_requirement> parse_label_term(const std::string& term,
                                                  std::string& why) {
  label_requirement req;
  if (term.empty()) {
    why = "empty requirement";
    return std::nullopt;
  }
  if (term.front() == '!') {
    req.key = trim(term.substr(1));
    req.operation = label_requirement::op::not_exists;
    if (!valid_label_key(req.key)) {
      why = "invalid label key \"" + req.key + "\"";
      return std::nullopt;
    }
    return req;
  }
  std::size_t end = 0;
  while (end < term.size() && !is_operator_char(term[end]))
    ++end;
  req.key = term.substr(0, end);
  if (!valid_label_key(req.key)) {
    why = "invalid label key \"" + req.key + "\"";
    return std::nullopt;
  }
  why = parse_operation(trim(term.substr(end)), req);
  if (!why.empty())
    return std::nullopt;
  return req;
}

std::optional<label_requirement> expression_requirement(const json& expression,
                                                        std::string& why) {
  using op = label_requirement::op;
  label_requirement req;
  if (!expression.is_object() || !expression.value("key", json()).is_string()) {
    why = "a match expression needs a key";
    return std::nullopt;
  }
  req.key = expression["key"].get<std::string>();
  const auto name = expression.value("operator", std::string{});
  const auto values = expression.value("values", json::array());
  if (!values.is_array()) {
    why = "values must be a list";
    return std::nullopt;
  }
  for (const auto& value : values)
    if (value.is_string())
      req.values.push_back(value.get<std::string>());
  if (name == "In" || name == "NotIn") {
    req.operation = name == "In" ? op::in : op::not_in;
    if (req.values.empty())
      why = "values set can't be empty for " + name;
  } else if (name == "Exists" || name == "DoesNotExist") {
    req.operation = name == "Exists" ? op::exists : op::not_exists;
    if (!req.values.empty())
      why = "values set must be empty for " + name;
  } else {
    why = "\"" + name + "\" is not a valid label selector operator";
  }
  if (!why.empty())
    return std::nullopt;
  return req;
}

// Splits at unescaped commas, keeping escapes for the term parser.
std::vector<std::string> split_field_terms(const std::string& text) {
  std::vector<std::string> terms;
  std::string current;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size()) {
      current += text[i];
      current += text[++i];
    } else if (text[i] == ',') {
      terms.push_back(current);
      current.clear();
    } else {
      current += text[i];
    }
  }
  terms.push_back(current);
  return terms;
}

std::string unescape_field(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size())
      ++i;
    out += text[i];
  }
  return out;
}

std::optional<field_requirement> parse_field_term(const std::string& term,
                                                  std::string& why) {
  for (std::size_t i = 0; i < term.size(); ++i) {
    if (term[i] == '\\') {
      ++i;
      continue;
    }
    std::size_t width = 0;
    bool negated = false;
    if (term.compare(i, 2, "!=") == 0) {
      width = 2;
      negated = true;
    } else if (term.compare(i, 2, "==") == 0) {
      width = 2;
    } else if (term[i] == '=') {
      width = 1;
    } else {
      continue;
    }
    field_requirement req{trim(unescape_field(term.substr(0, i))), negated,
                          unescape_field(term.substr(i + width))};
    if (req.path.empty()) {
      why = "missing field path";
      return std::nullopt;
    }
    return req;
  }
  why = "can't understand it (expected path=value, path==value or path!=value)";
  return std::nullopt;
}

} // namespace

bool label_requirement::matches(const json& labels) const {
  const json* value = nullptr;
  if (labels.is_object()) {
    auto it = labels.find(key);
    if (it != labels.end() && it->is_string())
      value = &*it;
  }
  auto listed = [&] {
    return std::find(values.begin(), values.end(), value->get<std::string>())
           != values.end();
  };
  auto compare = [&](bool greater) {
    long long have = 0;
    long long want = 0;
    if (value == nullptr || values.empty()
        || !parse_integer(value->get<std::string>(), have)
        || !parse_integer(values.front(), want))
      return false;
    return greater ? have > want : have < want;
  };
  switch (operation) {
    case op::exists: return value != nullptr;
    case op::not_exists: return value == nullptr;
    case op::equals:
    case op::in: return value != nullptr && listed();
    case op::not_equals:
    case op::not_in: return value == nullptr || !listed();
    case op::greater: return compare(true);
    case op::less: return compare(false);
  }
  return false;
}

std::optional<label_selector> label_selector::parse(const std::string& text,
                                                    api_status& error) {
  label_selector selector;
  if (trim(text).empty())
    return selector;
  for (const auto& term : split_label_terms(text)) {
    std::string why;
    auto req = parse_label_term(term, why);
    if (!req) {
      error = bad_selector("label", term, why);
      return std::nullopt;
    }
    selector.requirements.push_back(std::move(*req));
  }
  return selector;
}

std::optional<label_selector> label_selector::from_object(const json& selector,
                                                          api_status& error) {
  label_selector result;
  if (selector.is_null()) {
    result.selects_nothing = true;
    return result;
  }
  std::string why;
  if (!selector.is_object())
    why = "a label selector must be an object";
  const auto labels =
    selector.is_object() ? selector.value("matchLabels", json::object()) : json::object();
  for (const auto& [key, value] : labels.items()) {
    if (!value.is_string() || !valid_label_key(key)) {
      why = "invalid matchLabels entry \"" + key + "\"";
      break;
    }
    result.requirements.push_back(
      {key, label_requirement::op::equals, {value.get<std::string>()}});
  }
  const auto expressions = selector.is_object()
                             ? selector.value("matchExpressions", json::array())
                             : json::array();
  for (const auto& expression : expressions) {
    if (!why.empty())
      break;
    if (auto req = expression_requirement(expression, why))
      result.requirements.push_back(std::move(*req));
  }
  if (!why.empty()) {
    error = bad_selector("label", selector.dump(), why);
    return std::nullopt;
  }
  return result;
}

bool label_selector::matches_labels(const json& labels) const {
  if (selects_nothing)
    return false;
  return std::all_of(requirements.begin(), requirements.end(),
                     [&](const label_requirement& req) { return req.matches(labels); });
}

bool label_selector::matches(const json& object) const {
  static const json no_labels = json::object();
  if (!object.is_object())
    return matches_labels(no_labels);
  auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object())
    return matches_labels(no_labels);
  auto labels = metadata->find("labels");
  return matches_labels(labels == metadata->end() ? no_labels : *labels);
}

std::optional<field_selector> field_selector::parse(const std::string& text,
                                                    api_status& error) {
  field_selector selector;
  if (trim(text).empty())
    return selector;
  for (const auto& term : split_field_terms(text)) {
    std::string why;
    auto req = parse_field_term(term, why);
    if (!req) {
      error = bad_selector("field", term, why);
      return std::nullopt;
    }
    selector.requirements.push_back(std::move(*req));
  }
  return selector;
}

bool field_selector::matches(const json& object) const {
  return std::all_of(requirements.begin(), requirements.end(),
                     [&](const field_requirement& req) {
                       return (field_value(object, req.path) == req.value) != req.negated;
                     });
}

std::string field_value(const json& object, const std::string& dotted_path) {
  const json* current = &object;
  std::string::size_type start = 0;
  while (start <= dotted_path.size()) {
    auto dot = dotted_path.find('.', start);
    if (dot == std::string::npos)
      dot = dotted_path.size();
    if (!current->is_object())
      return {};
    auto it = current->find(dotted_path.substr(start, dot - start));
    if (it == current->end())
      return {};
    current = &*it;
    start = dot + 1;
  }
  if (current->is_string())
    return current->get<std::string>();
  if (current->is_boolean())
    return current->get<bool>() ? "true" : "false";
  if (current->is_null())
    return {};
  return current->dump();
}

std::optional<object_filter> object_filter::parse(const list_options& options,
                                                  api_status& error) {
  auto labels = label_selector::parse(options.label_selector, error);
  if (!labels)
    return std::nullopt;
  auto fields = field_selector::parse(options.field_selector, error);
  if (!fields)
    return std::nullopt;
  return object_filter{std::move(*labels), std::move(*fields)};
}

} // namespace vigil::kube
