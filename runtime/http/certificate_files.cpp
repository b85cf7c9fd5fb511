#include "runtime/http/certificate_files.hpp"

#include "runtime/http/http_server.hpp"

namespace vigil::http {

certificate_files::certificate_files(std::string cert_path, std::string key_path,
                                     std::string cert_pem, std::string key_pem)
  : cert_path_(std::move(cert_path)), key_path_(std::move(key_path)),
    cert_pem_(std::move(cert_pem)), key_pem_(std::move(key_pem)) {}

certificate_check certificate_files::check() {
  using outcome = certificate_check::outcome;
  auto cert = read_pem_file(cert_path_);
  if (!cert)
    return {outcome::unreadable, {}, {}, cert.error()};
  auto key = read_pem_file(key_path_);
  if (!key)
    return {outcome::unreadable, {}, {}, key.error()};
  if (*cert == cert_pem_ && *key == key_pem_)
    return {};
  cert_pem_ = *cert;
  key_pem_ = *key;
  return {outcome::changed, std::move(*cert), std::move(*key), {}};
}

} // namespace vigil::http
