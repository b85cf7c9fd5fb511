// The files `vigil install` prints from, compiled into the binary
// (cmake/embed_files.cmake): the CRDs, seed 001's alert rules, the Grafana
// dashboard and the GPU reset Job's script, as written under
// runtime/install/assets/.
#pragma once

#include <string_view>
#include <vector>

#include "runtime/embedded_file.hpp"

namespace vigil::install {

using vigil::embedded_file; // names relative to runtime/install/assets/

/// Every embedded file, in the order CMakeLists.txt lists them.
const std::vector<embedded_file>& embedded_files();

/// The text of the embedded file `name`; empty when there is none.
std::string_view asset(std::string_view name);

/// The comment lines (`# …`) a YAML file opens with, without the `# `.
std::string leading_comment(std::string_view yaml_text);

} // namespace vigil::install
