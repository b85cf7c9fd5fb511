#include "runtime/kube/watch_stream.hpp"

#include <array>
#include <cstdint>

namespace vigil::kube {

namespace {

std::string_view without_cr(std::string_view line) {
  if (!line.empty() && line.back() == '\r')
    line.remove_suffix(1);
  return line;
}

} // namespace

bool watch_line_splitter::feed(std::string_view chunk, const line_callback& on_line) {
  while (!chunk.empty()) {
    const auto nl = chunk.find('\n');
    if (nl == std::string_view::npos) {
      if (partial_.size() + chunk.size() > max_line_bytes_) {
        partial_.clear();
        return false;
      }
      partial_.append(chunk);
      return true;
    }
    std::string_view line = chunk.substr(0, nl);
    chunk.remove_prefix(nl + 1);
    if (!partial_.empty()) {
      if (partial_.size() + line.size() > max_line_bytes_) {
        partial_.clear();
        return false;
      }
      partial_.append(line);
      const std::string whole = std::move(partial_);
      partial_.clear();
      if (auto l = without_cr(whole); !l.empty() && !on_line(l))
        return false;
      continue;
    }
    if (line.size() > max_line_bytes_)
      return false;
    if (auto l = without_cr(line); !l.empty() && !on_line(l))
      return false;
  }
  return true;
}

expected<watch_line> decode_watch_line(std::string_view line) {
  auto event = nlohmann::json::parse(line, nullptr, false);
  if (event.is_discarded())
    return failure{"watch line", "not JSON"};
  if (!event.is_object())
    return failure{"watch line", "not a JSON object"};
  auto type = event.find("type");
  if (type == event.end() || !type->is_string())
    return failure{"type", "missing or not a string"};
  auto object = event.find("object");
  if (object == event.end() || !object->is_object())
    return failure{"object", "missing or not an object"};
  static constexpr std::array<std::string_view, 5> known{"ADDED", "MODIFIED", "DELETED",
                                                         "BOOKMARK", "ERROR"};
  watch_line out;
  out.type = type->get<std::string>();
  bool is_known = false;
  for (auto k : known)
    is_known = is_known || out.type == k;
  if (!is_known)
    return failure{"type", "unknown watch event type \"" + out.type + "\""};
  out.object = std::move(*object);
  if (out.type == "ERROR") {
    // A metav1.Status; its code is an integer (410 Gone: relist).
    if (auto code = out.object.find("code");
        code != out.object.end() && code->is_number_integer()) {
      const auto value = code->get<std::int64_t>();
      if (value > 0 && value < 1000)
        out.status_code = static_cast<int>(value);
    }
    return out;
  }
  if (auto meta = out.object.find("metadata");
      meta != out.object.end() && meta->is_object())
    if (auto rv = meta->find("resourceVersion"); rv != meta->end() && rv->is_string())
      out.resource_version = rv->get<std::string>();
  return out;
}

} // namespace vigil::kube
