// CAF atoms shared across actors, named after the verb (10 characters at most).
#pragma once

#include <caf/atom.hpp>

namespace vigil {

/// Hand a child actor to a supervisor: (adopt_atom, name, actor).
using adopt_atom = caf::atom_constant<caf::atom("adopt")>;
/// Ask for the names of live children (or other listings).
using list_atom = caf::atom_constant<caf::atom("list")>;
/// Fired when an orderly shutdown's grace period is over.
using deadline_atom = caf::atom_constant<caf::atom("deadline")>;

} // namespace vigil
