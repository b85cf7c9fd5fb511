#include "runtime/stdlib_workarounds.hpp"

#include <locale>

namespace vigil {

void fill_ctype_tables() {
  // std::regex reads the facet of the global locale, which vigil never
  // changes from the classic one.
  const auto& ctype = std::use_facet<std::ctype<char>>(std::locale());
  // '\0' narrows to the default given here, so its entry is not stored;
  // every other character's is.
  for (int c = 0; c <= 255; ++c)
    ctype.narrow(static_cast<char>(c), '\0');
  ctype.widen('\0'); // fills the whole widen table at once
}

} // namespace vigil
