#include "actors/agent/state_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace vigil::agent {

status replace_file(const std::string& path, const std::string& content) {
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out)
      return failure{path, std::string("cannot write: ") + std::strerror(errno)};
    out << content;
    out.flush();
    if (!out)
      return failure{path, "write failed"};
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    auto problem = std::string("cannot replace: ") + std::strerror(errno);
    std::remove(temp.c_str());
    return failure{path, problem};
  }
  return ok();
}

} // namespace vigil::agent
