// Throwaway PKI for TLS tests and `vigil demo --serve`: a CA, a server
// certificate for 127.0.0.1/localhost and a client certificate, all made in
// memory with OpenSSL. Never for production.
#pragma once

#include <string>

#include "messages/expected.hpp"

namespace vigil::kube {

struct test_pki {
  std::string ca_cert_pem;
  std::string server_cert_pem; ///< CN localhost, SAN IP:127.0.0.1, DNS:localhost
  std::string server_key_pem;
  std::string client_cert_pem; ///< CN `client_name`, O system:masters
  std::string client_key_pem;
};

/// A fresh CA and leaf certificates valid for one day (EC P-256).
expected<test_pki> make_test_pki(const std::string& client_name = "vigil-test");

} // namespace vigil::kube
