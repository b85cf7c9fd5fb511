// Runs a shell command for a test and collects what it printed (stdout and
// stderr together): kubectl against the API test server.
#pragma once

#include <array>
#include <cstdio>
#include <string>

namespace vigil::test {

struct shell_result {
  int code = -1; ///< as pclose returns it: 0 for success
  std::string out;
};

inline shell_result run_shell(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr)
    return {-1, "popen failed"};
  std::array<char, 4096> buf;
  for (size_t n; (n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0;)
    out.append(buf.data(), n);
  return {::pclose(pipe), out};
}

} // namespace vigil::test
