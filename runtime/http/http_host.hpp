// The actor that owns a process's HTTP server, so the server stops (joining
// its I/O thread) when the actor exits with the rest of the process; it also
// reloads the server's certificate when its files change.
#pragma once

#include <chrono>
#include <memory>
#include <optional>

#include <caf/fwd.hpp>

#include "runtime/http/certificate_files.hpp"
#include "runtime/http/http_server.hpp"

namespace vigil {

/// How often the certificate files are read again.
inline constexpr std::chrono::seconds certificate_check_interval{30};

/// With `certificate`, its files are checked every certificate_check_interval
/// and a changed pair is loaded for new connections (logged; an unusable or
/// half-written pair is logged and the old one kept).
caf::actor
spawn_http_host(caf::actor_system& system, std::unique_ptr<http::server> server,
                std::optional<http::certificate_files> certificate = std::nullopt);

} // namespace vigil
