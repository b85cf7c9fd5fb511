#include "actors/agent/text_input.hpp"

#include <fstream>
#include <sstream>

namespace vigil::agent {

expected<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return failure{path, "cannot be read"};
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

} // namespace vigil::agent
