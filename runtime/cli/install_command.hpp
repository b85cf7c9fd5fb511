// `vigil install`: prints every manifest a cluster needs, for
// `vigil install | kubectl apply -f -` (runtime/install/).
#pragma once

#include <vector>

#include "runtime/cli/cli.hpp"

namespace vigil {

std::vector<option_spec> install_option_specs();

/// 0 with the manifests on stdout (and on stderr each key it set that the
/// configuration file said otherwise); 1 naming the key or flag that stops it.
int run_install(command_context& ctx);

} // namespace vigil
