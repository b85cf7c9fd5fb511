// The version vigil reports; bumped with each release.
#pragma once

namespace vigil {

inline const char* version_string() {
  return "0.1.0";
}

} // namespace vigil
