// Reading nested JSON without exceptions: the value at a path of object keys,
// or nothing when a step is missing or not an object.
#pragma once

#include <initializer_list>
#include <string>

#include <nlohmann/json.hpp>

namespace vigil {

/// doc["a"]["b"]… or nullptr.
inline const nlohmann::json* json_at(const nlohmann::json& doc,
                                     std::initializer_list<const char*> path) {
  const nlohmann::json* node = &doc;
  for (const char* key : path) {
    if (!node->is_object())
      return nullptr;
    auto it = node->find(key);
    if (it == node->end())
      return nullptr;
    node = &*it;
  }
  return node;
}

/// The string at the path, or "" when it is missing or not a string.
inline std::string json_text(const nlohmann::json& doc,
                             std::initializer_list<const char*> path) {
  const nlohmann::json* v = json_at(doc, path);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

} // namespace vigil
