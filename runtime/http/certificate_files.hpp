// The PEM files of a server's certificate and key, read again to notice a
// renewal: the kubelet updates a mounted Secret in place (cert-manager
// renews the Secret some time before expiry), and the server must take the
// new pair without a restart.
#pragma once

#include <string>

#include "messages/expected.hpp"

namespace vigil::http {

struct certificate_check {
  enum class outcome { unchanged, changed, unreadable };
  outcome result = outcome::unchanged;
  std::string cert_pem, key_pem; ///< when changed
  failure error;                 ///< when unreadable: which file, why
};

class certificate_files {
public:
  /// `cert_pem` and `key_pem` are what the server started with.
  certificate_files(std::string cert_path, std::string key_path, std::string cert_pem,
                    std::string key_pem);

  /// Reads both files: `changed` (with their text) when either differs from
  /// the last pair returned or started with, `unchanged` otherwise, and
  /// `unreadable` naming the file when one cannot be read (a half-written
  /// Secret update; the next check sees the whole pair).
  certificate_check check();

  const std::string& cert_path() const { return cert_path_; }

private:
  std::string cert_path_, key_path_;
  std::string cert_pem_, key_pem_;
};

} // namespace vigil::http
