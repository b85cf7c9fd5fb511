#include "runtime/sim/kube/test_certificates.hpp"

#include <memory>

#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

namespace vigil::kube {

namespace {

using key_ptr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using cert_ptr = std::unique_ptr<X509, decltype(&X509_free)>;

key_ptr make_key() {
  return key_ptr{EVP_EC_gen("P-256"), &EVP_PKEY_free};
}

std::string to_pem(X509* cert) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio{BIO_new(BIO_s_mem()), &BIO_free};
  PEM_write_bio_X509(bio.get(), cert);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

std::string to_pem(EVP_PKEY* key) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio{BIO_new(BIO_s_mem()), &BIO_free};
  PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

void add_extension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext != nullptr) {
    X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
  }
}

// An unsigned certificate for `key` named `cn` (and `org`), issued by
// `issuer` (itself when null); the caller adds extensions and signs.
cert_ptr make_cert(EVP_PKEY* key, const char* cn, const char* org, X509* issuer,
                   long serial) {
  cert_ptr cert{X509_new(), &X509_free};
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 86400);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn), -1, -1, 0);
  if (org != nullptr)
    X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>(org), -1, -1, 0);
  X509* signer = issuer != nullptr ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  return cert;
}

} // namespace

expected<test_pki> make_test_pki(const std::string& client_name) {
  auto ca_key = make_key(), server_key = make_key(), client_key = make_key();
  if (!ca_key || !server_key || !client_key)
    return failure{"openssl", "cannot generate EC keys"};

  auto ca = make_cert(ca_key.get(), "vigil-test-ca", nullptr, nullptr, 1);
  add_extension(ca.get(), ca.get(), NID_basic_constraints, "critical,CA:TRUE");
  add_extension(ca.get(), ca.get(), NID_key_usage, "critical,keyCertSign,cRLSign");
  add_extension(ca.get(), ca.get(), NID_subject_key_identifier, "hash");
  X509_sign(ca.get(), ca_key.get(), EVP_sha256());

  auto server = make_cert(server_key.get(), "localhost", nullptr, ca.get(), 2);
  add_extension(server.get(), ca.get(), NID_subject_alt_name,
                "IP:127.0.0.1,DNS:localhost");
  add_extension(server.get(), ca.get(), NID_ext_key_usage, "serverAuth");
  X509_sign(server.get(), ca_key.get(), EVP_sha256());

  auto client =
    make_cert(client_key.get(), client_name.c_str(), "system:masters", ca.get(), 3);
  add_extension(client.get(), ca.get(), NID_ext_key_usage, "clientAuth");
  X509_sign(client.get(), ca_key.get(), EVP_sha256());

  return test_pki{to_pem(ca.get()), to_pem(server.get()), to_pem(server_key.get()),
                  to_pem(client.get()), to_pem(client_key.get())};
}

} // namespace vigil::kube
