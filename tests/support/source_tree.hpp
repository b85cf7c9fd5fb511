// Where the tests find the source tree's files (config/, tests/data/): the
// test command sets VIGIL_SOURCE_DIR; run by hand from the root, "." works.
#pragma once

#include <cstdlib>
#include <string>

namespace vigil::test {

inline std::string source_dir() {
  const char* dir = std::getenv("VIGIL_SOURCE_DIR");
  return dir != nullptr ? dir : ".";
}

/// The shipped config/ directory (the XID catalog, the pattern files).
inline std::string config_dir() {
  return source_dir() + "/config";
}

} // namespace vigil::test
