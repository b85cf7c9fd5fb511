// The actor that owns a process's HTTP server, so the server stops (joining
// its I/O thread) when the actor exits with the rest of the process.
#pragma once

#include <memory>

#include <caf/fwd.hpp>

#include "runtime/http/http_server.hpp"

namespace vigil {

caf::actor spawn_http_host(caf::actor_system& system,
                           std::unique_ptr<http::server> server);

} // namespace vigil
