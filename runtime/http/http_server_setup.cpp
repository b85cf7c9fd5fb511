// Getting ready to serve: the options start() refuses, the TLS context built
// from the PEM certificate and key, and loading PEM files.
#include "runtime/http/http_server_internal.hpp"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include <openssl/ssl.h>

namespace vigil::http {

namespace detail {

status validate(const server_options& o) {
  if (o.threads < 1)
    return failure{"threads", "must be at least 1"};
  if (o.max_connections < 1)
    return failure{"max_connections", "must be at least 1"};
  if (o.max_header_bytes < 1 || o.max_header_bytes > UINT32_MAX)
    return failure{"max_header_bytes", "must be between 1 and 4294967295"};
  if (o.idle_timeout.count() <= 0)
    return failure{"idle_timeout", "must be positive"};
  if (o.handshake_timeout.count() <= 0)
    return failure{"handshake_timeout", "must be positive"};
  if (o.cert_pem.empty() != o.key_pem.empty())
    return failure{o.cert_pem.empty() ? "cert_pem" : "key_pem",
                   "cert_pem and key_pem must both be set (HTTPS) or both be empty"};
  return ok();
}

expected<asio::ssl::context> make_tls_context(const server_options& o) {
  asio::ssl::context context{asio::ssl::context::tls_server};
  context.set_options(asio::ssl::context::default_workarounds
                      | asio::ssl::context::no_compression);
  if (SSL_CTX_set_min_proto_version(context.native_handle(), TLS1_2_VERSION) != 1)
    return failure{"http server", "cannot require TLS 1.2"};
  error_code ec;
  context.use_certificate_chain(asio::buffer(o.cert_pem), ec);
  if (ec)
    return failure{"cert_pem", "not a usable certificate chain: " + ec.message()};
  context.use_private_key(asio::buffer(o.key_pem), asio::ssl::context::pem, ec);
  if (ec)
    return failure{"key_pem", "not a usable private key: " + ec.message()};
  if (SSL_CTX_check_private_key(context.native_handle()) != 1)
    return failure{"key_pem", "does not match the certificate"};
  return context;
}

} // namespace detail

expected<std::string> read_pem_file(const std::string& path) {
  std::unique_ptr<std::FILE, decltype(&std::fclose)> file{std::fopen(path.c_str(), "rb"),
                                                          &std::fclose};
  if (!file)
    return failure{path, std::string("cannot open: ") + std::strerror(errno)};
  std::string text;
  char chunk[4096];
  std::size_t n;
  while ((n = std::fread(chunk, 1, sizeof chunk, file.get())) > 0)
    text.append(chunk, n);
  if (std::ferror(file.get()))
    return failure{path, std::string("cannot read: ") + std::strerror(errno)};
  if (text.find("-----BEGIN ") == std::string::npos)
    return failure{path, "not a PEM file (no -----BEGIN line)"};
  return text;
}

} // namespace vigil::http
