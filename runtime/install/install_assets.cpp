#include "runtime/install/install_assets.hpp"

#include <string>

namespace vigil::install {

std::string_view asset(std::string_view name) {
  for (const auto& file : embedded_files())
    if (file.name == name)
      return file.text;
  return {};
}

std::string leading_comment(std::string_view yaml_text) {
  std::string out;
  size_t start = 0;
  while (start < yaml_text.size() && yaml_text[start] == '#') {
    auto end = yaml_text.find('\n', start);
    if (end == std::string_view::npos)
      end = yaml_text.size();
    auto line = yaml_text.substr(start + 1, end - start - 1);
    if (!line.empty() && line.front() == ' ')
      line.remove_prefix(1);
    if (!out.empty())
      out += '\n';
    out += line;
    start = end + 1;
  }
  return out;
}

} // namespace vigil::install
