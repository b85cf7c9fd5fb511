// A watch response as the API server streams it: newline-delimited JSON watch
// events ({"type": ADDED|MODIFIED|DELETED|BOOKMARK|ERROR, "object": {...}}),
// cut into chunks anywhere by HTTP. Framing and decoding are plain functions
// here, so the libcurl client, the gateway and the fuzz target share them.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "messages/expected.hpp"

namespace vigil::kube {

/// Cuts a watch body into lines as its chunks arrive. Chunk borders fall
/// anywhere, "\r\n" ends a line as "\n" does, and empty lines are skipped.
class watch_line_splitter {
public:
  /// The API server's largest object is well under this (etcd refuses
  /// values over ~1.5 MiB); a longer line means the stream is not a watch.
  static constexpr std::size_t default_max_line_bytes = 16u << 20;

  /// Called with each complete line; return false to stop at that line.
  using line_callback = std::function<bool(std::string_view line)>;

  explicit watch_line_splitter(std::size_t max_line_bytes = default_max_line_bytes)
    : max_line_bytes_(max_line_bytes) {}

  /// Feeds one chunk. False when a line grew past the limit (the caller ends
  /// the stream; the partial line is dropped) or the callback said stop.
  bool feed(std::string_view chunk, const line_callback& on_line);

  /// Bytes of the unfinished last line.
  std::size_t pending_bytes() const { return partial_.size(); }

private:
  std::size_t max_line_bytes_;
  std::string partial_;
};

/// One decoded watch line.
struct watch_line {
  std::string type;             ///< ADDED, MODIFIED, DELETED, BOOKMARK or ERROR
  nlohmann::json object;        ///< always an object
  std::string resource_version; ///< object.metadata.resourceVersion, if a string
  /// For ERROR: the Status object's code (410 Gone asks for a relist); else 0.
  int status_code = 0;
};

/// Decodes one line; the failure says what is wrong (not JSON, no "type"
/// string, no "object" object, an unknown type).
expected<watch_line> decode_watch_line(std::string_view line);

} // namespace vigil::kube
