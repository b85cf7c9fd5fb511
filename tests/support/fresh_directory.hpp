// A fresh temporary directory for a test's files (SQLite, spools, configs).
#pragma once

#include <cstdlib>
#include <string>

namespace vigil::test {

/// A fresh directory under /tmp; left behind for post-mortems.
inline std::string fresh_directory() {
  std::string pattern = "/tmp/vigil-test.XXXXXX";
  return mkdtemp(pattern.data()) != nullptr ? pattern : "/tmp";
}

} // namespace vigil::test
