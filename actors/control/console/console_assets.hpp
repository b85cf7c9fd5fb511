// The console's page, compiled into the binary (cmake/embed_files.cmake from
// actors/control/console/assets/): index.html, console.css, console.js.
#pragma once

#include <vector>

#include "runtime/embedded_file.hpp"

namespace vigil::console {

/// Every file of the page, in the order CMakeLists.txt lists them.
const std::vector<embedded_file>& embedded_files();

} // namespace vigil::console
