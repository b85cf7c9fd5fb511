// `vigil demo --serve`: the simulated cluster and the control
// plane in real time until interrupted, with the API test server for kubectl,
// the ingest endpoint and the read-only introspection API.
#pragma once

#include <string>

#include "runtime/cli/cli.hpp"
#include "runtime/sim/scenario.hpp"

namespace vigil::demo {

/// Prints the URLs and tokens first, then runs until SIGINT/SIGTERM. The
/// scenario gives the cluster's size and seed; its steps are not played.
/// `journal` "" is a SQLite file in a new temporary directory.
int run_demo_serve(command_context& ctx, const scenario& plan,
                   const std::string& journal);

} // namespace vigil::demo
