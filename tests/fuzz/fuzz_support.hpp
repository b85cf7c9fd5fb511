// What the fuzz targets share: the input as text, cutting it into parts (one
// per file or field a target feeds), and a check that stops the run when an
// invariant of the code under test fails, so libFuzzer keeps the input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

namespace vigil::fuzz {

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

/// Cuts `text` at each `separator` into exactly `count` parts (missing ones
/// empty, the last one keeps any further separators).
inline std::vector<std::string_view> parts(std::string_view text, std::size_t count,
                                           std::string_view separator = "\n--\n") {
  std::vector<std::string_view> out;
  while (out.size() + 1 < count) {
    const auto at = text.find(separator);
    if (at == std::string_view::npos)
      break;
    out.push_back(text.substr(0, at));
    text.remove_prefix(at + separator.size());
  }
  out.push_back(text);
  out.resize(count);
  return out;
}

/// An invariant of the code under test; its failure is a finding.
inline void require(bool holds, const char* what) {
  if (holds)
    return;
  std::fprintf(stderr, "fuzz invariant failed: %s\n", what);
  std::abort();
}

} // namespace vigil::fuzz
