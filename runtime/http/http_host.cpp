#include "runtime/http/http_host.hpp"

#include <caf/all.hpp>

#include "actors/protocol/atoms.hpp"
#include "runtime/logging.hpp"

namespace vigil {

namespace {

using certificate_check_atom = caf::atom_constant<caf::atom("certcheck")>;

struct http_host_state {
  std::shared_ptr<http::server> server;
  std::optional<http::certificate_files> certificate;
  static inline const char* name = "http";
};

// Loads a renewed certificate; keeps the old one when the new pair is
// unreadable or unusable, and says why.
void check_certificate(http_host_state& st) {
  using outcome = http::certificate_check::outcome;
  auto log = component_logger("http");
  auto check = st.certificate->check();
  if (check.result == outcome::unreadable) {
    log->warn("certificate not reloaded, the old one is kept: {}",
              check.error.to_string());
    return;
  }
  if (check.result == outcome::unchanged)
    return;
  if (auto loaded = st.server->reload_tls(check.cert_pem, check.key_pem); !loaded)
    log->error("the new certificate in {} is not usable, the old one is kept: {}",
               st.certificate->cert_path(), loaded.error().to_string());
  else
    log->info("reloaded the certificate from {} for new connections",
              st.certificate->cert_path());
}

caf::behavior http_host(caf::stateful_actor<http_host_state>* self,
                        std::shared_ptr<http::server> server,
                        std::optional<http::certificate_files> certificate) {
  self->state.server = std::move(server);
  self->state.certificate = std::move(certificate);
  if (self->state.certificate)
    self->delayed_send(self, certificate_check_interval, certificate_check_atom::value);
  return {
    [](list_atom) { return std::string("http"); },
    [=](certificate_check_atom) {
      check_certificate(self->state);
      self->delayed_send(self, certificate_check_interval, certificate_check_atom::value);
    },
  };
}

} // namespace

caf::actor spawn_http_host(caf::actor_system& system,
                           std::unique_ptr<http::server> server,
                           std::optional<http::certificate_files> certificate) {
  return system.spawn<caf::detached>(
    http_host, std::shared_ptr<http::server>(std::move(server)), std::move(certificate));
}

} // namespace vigil
