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
/// An elector's own timer at shutdown: the Lease request in flight has had
/// its exit_wait, and the release is written without its answer.
using exit_wait_atom = caf::atom_constant<caf::atom("exitwait")>;

} // namespace vigil
