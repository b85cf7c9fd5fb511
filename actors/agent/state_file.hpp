// The agent's small state files (gpu_metadata.json, the NIC monitor's state,
// the device inventory) are replaced whole: written beside, then renamed
// over, so a crash leaves the old file or the new one, never half of either.
#pragma once

#include <string>

#include "messages/expected.hpp"

namespace vigil::agent {

/// Writes `content` to `path` + ".tmp" and renames it over `path`. Failures
/// name the path and the system's reason.
status replace_file(const std::string& path, const std::string& content);

} // namespace vigil::agent
