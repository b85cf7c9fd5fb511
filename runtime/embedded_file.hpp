// A file compiled into the binary by cmake/embed_files.cmake: `vigil
// install`'s manifests' sources and the console's page.
#pragma once

#include <string_view>

namespace vigil {

struct embedded_file {
  std::string_view name; ///< relative to the directory it was embedded from
  std::string_view text;
};

} // namespace vigil
