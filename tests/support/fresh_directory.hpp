// A fresh temporary directory for a test's files (SQLite, spools, configs).
#pragma once

#include <cstdlib>
#include <string>

namespace vigil::test {

/// A fresh directory under `parent` (/tmp by default); left behind for
/// post-mortems.
inline std::string fresh_directory(const std::string& parent = "/tmp") {
  std::string pattern = parent + "/vigil-test.XXXXXX";
  return mkdtemp(pattern.data()) != nullptr ? pattern : parent;
}

} // namespace vigil::test
