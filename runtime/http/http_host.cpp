#include "runtime/http/http_host.hpp"

#include <caf/all.hpp>

#include "actors/protocol/atoms.hpp"

namespace vigil {

namespace {

// Owns the HTTP server: it stops (joining its I/O thread) when this actor
// exits with the rest of the process.
struct http_host_state {
  std::shared_ptr<http::server> server;
  static inline const char* name = "http";
};

caf::behavior http_host(caf::stateful_actor<http_host_state>* self,
                        std::shared_ptr<http::server> server) {
  self->state.server = std::move(server);
  return {[](list_atom) { return std::string("http"); }};
}

} // namespace

caf::actor spawn_http_host(caf::actor_system& system,
                           std::unique_ptr<http::server> server) {
  return system.spawn<caf::detached>(http_host,
                                     std::shared_ptr<http::server>(std::move(server)));
}

} // namespace vigil
