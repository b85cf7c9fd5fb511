// Setting the HTTP server up: HTTPS round trips with a test CA, plain HTTP
// against HTTPS, start() failures that name what is wrong, and reading PEM
// files.
#include "runtime/http/http_server.hpp"

#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>

#include "runtime/http/certificate_files.hpp"
#include "runtime/sim/kube/test_certificates.hpp"
#include "tests/runtime/http/http_server_fixture.hpp"
#include "tests/support/fresh_directory.hpp"

namespace vigil::http {
namespace {

using namespace test_support;

TEST_F(http_server_test, https_round_trip) {
  auto pki = kube::make_test_pki();
  ASSERT_TRUE(pki.has_value()) << pki.error().to_string();
  server_options options;
  options.cert_pem = pki->server_cert_pem;
  options.key_pem = pki->server_key_pem;
  start(options, [](request r, responder answer) {
    answer(text(200, r.method + " " + r.path + " " + r.body));
  });
  curl_client client(pki->ca_cert_pem);
  auto got = client.call("GET", url("/readyz", "https"));
  ASSERT_EQ(got.code, CURLE_OK) << curl_easy_strerror(got.code);
  EXPECT_EQ(got.body, "GET /readyz ");
  auto posted = client.call("POST", url("/v1/events", "https"), "{}");
  ASSERT_EQ(posted.code, CURLE_OK) << curl_easy_strerror(posted.code);
  EXPECT_EQ(posted.body, "POST /v1/events {}");
  EXPECT_EQ(posted.new_connections, 0);

  curl_client untrusting; // the system CAs do not know the test CA
  EXPECT_NE(untrusting.call("GET", url("/readyz", "https")).code, CURLE_OK);
  EXPECT_EQ(client.call("GET", url("/healthz", "https")).body, "GET /healthz ");
  EXPECT_EQ(final_stats().requests, 3u);
}

// A renewed certificate is served to new connections; an open connection
// keeps the one it was opened with; an unusable pair changes nothing.
TEST_F(http_server_test, a_reloaded_certificate_serves_new_connections) {
  auto first = kube::make_test_pki();
  auto second = kube::make_test_pki();
  ASSERT_TRUE(first.has_value() && second.has_value());
  server_options options;
  options.cert_pem = first->server_cert_pem;
  options.key_pem = first->server_key_pem;
  start(options, [](request, responder answer) { answer(text(200, "ok")); });
  curl_client old_ca(first->ca_cert_pem);
  ASSERT_EQ(old_ca.call("GET", url("/healthz", "https")).code, CURLE_OK);

  auto garbage = server_->reload_tls("not a certificate", second->server_key_pem);
  ASSERT_FALSE(garbage.has_value());
  EXPECT_EQ(garbage.error().where, "cert_pem");
  auto mismatched = server_->reload_tls(second->server_cert_pem, first->server_key_pem);
  ASSERT_FALSE(mismatched.has_value());
  curl_client still_old(first->ca_cert_pem);
  EXPECT_EQ(still_old.call("GET", url("/healthz", "https")).code, CURLE_OK);

  ASSERT_TRUE(server_->reload_tls(second->server_cert_pem, second->server_key_pem));
  EXPECT_EQ(old_ca.call("GET", url("/healthz", "https")).code, CURLE_OK); // kept alive
  curl_client fresh_old_ca(first->ca_cert_pem);
  EXPECT_NE(fresh_old_ca.call("GET", url("/healthz", "https")).code, CURLE_OK);
  curl_client new_ca(second->ca_cert_pem);
  EXPECT_EQ(new_ca.call("GET", url("/healthz", "https")).body, "ok");
}

TEST_F(http_server_test, a_plain_server_has_no_certificate_to_reload) {
  auto pki = kube::make_test_pki();
  ASSERT_TRUE(pki.has_value());
  start({}, [](request, responder answer) { answer(text(200, "ok")); });
  EXPECT_FALSE(
    server_->reload_tls(pki->server_cert_pem, pki->server_key_pem).has_value());
}

TEST(certificate_files, a_changed_pair_is_returned_once_an_unreadable_one_never) {
  auto pki = kube::make_test_pki();
  ASSERT_TRUE(pki.has_value());
  const auto dir = test::fresh_directory();
  const auto cert = dir + "/tls.crt", key = dir + "/tls.key";
  std::ofstream(cert) << pki->server_cert_pem;
  std::ofstream(key) << pki->server_key_pem;
  certificate_files files(cert, key, pki->server_cert_pem, pki->server_key_pem);
  using outcome = certificate_check::outcome;
  EXPECT_EQ(files.check().result, outcome::unchanged);

  auto renewed = kube::make_test_pki();
  ASSERT_TRUE(renewed.has_value());
  std::ofstream(cert) << renewed->server_cert_pem;
  std::ofstream(key) << renewed->server_key_pem;
  auto changed = files.check();
  EXPECT_EQ(changed.result, outcome::changed);
  EXPECT_EQ(changed.cert_pem, renewed->server_cert_pem);
  EXPECT_EQ(changed.key_pem, renewed->server_key_pem);
  EXPECT_EQ(files.check().result, outcome::unchanged);

  std::remove(key.c_str()); // mid-update
  auto unreadable = files.check();
  EXPECT_EQ(unreadable.result, outcome::unreadable);
  EXPECT_NE(unreadable.error.to_string().find(key), std::string::npos)
    << unreadable.error.to_string();
}

TEST_F(http_server_test, plain_http_against_https_fails_cleanly_and_serving_goes_on) {
  auto pki = kube::make_test_pki();
  ASSERT_TRUE(pki.has_value()) << pki.error().to_string();
  server_options options;
  options.cert_pem = pki->server_cert_pem;
  options.key_pem = pki->server_key_pem;
  start_echo(options);
  curl_client plain;
  EXPECT_NE(plain.call("GET", url("/healthz")).code, CURLE_OK);
  // Raw clients read until the server closes, which it does after counting
  // the failure; curl may give up on the alert, before the count.
  raw_client plain_raw(server_->port());
  plain_raw.send(get("/healthz"));
  EXPECT_EQ(plain_raw.read_to_end().rfind("HTTP/", 0), std::string::npos);
  raw_client garbage(server_->port());
  garbage.send(std::string(300, '\x16'));
  garbage.finish_sending();
  garbage.read_to_end();

  curl_client client(pki->ca_cert_pem);
  auto r = client.call("GET", url("/healthz", "https"));
  ASSERT_EQ(r.code, CURLE_OK) << curl_easy_strerror(r.code);
  EXPECT_EQ(r.body, "GET /healthz");
  EXPECT_GE(final_stats().tls_failures, 2u);
}

TEST_F(http_server_test, start_failures_name_what_is_wrong) {
  start_echo();
  server_options busy;
  busy.port = server_->port();
  auto taken = server::start(busy, [](request, responder) {});
  ASSERT_FALSE(taken.has_value());
  EXPECT_NE(taken.error().to_string().find("127.0.0.1:" + std::to_string(busy.port)),
            std::string::npos)
    << taken.error().to_string();

  server_options bad_address;
  bad_address.address = "300.1.1.1";
  auto unparsable = server::start(bad_address, [](request, responder) {});
  ASSERT_FALSE(unparsable.has_value());
  EXPECT_NE(unparsable.error().to_string().find("300.1.1.1"), std::string::npos);

  server_options half_tls;
  half_tls.cert_pem = "-----BEGIN CERTIFICATE-----";
  auto half = server::start(half_tls, [](request, responder) {});
  ASSERT_FALSE(half.has_value());
  EXPECT_EQ(half.error().where, "key_pem");

  server_options bad_cert;
  bad_cert.cert_pem = "not a certificate";
  bad_cert.key_pem = "not a key";
  auto unusable = server::start(bad_cert, [](request, responder) {});
  ASSERT_FALSE(unusable.has_value());
  EXPECT_EQ(unusable.error().where, "cert_pem");

  server_options no_threads;
  no_threads.threads = 0;
  auto idle = server::start(no_threads, [](request, responder) {});
  ASSERT_FALSE(idle.has_value());
  EXPECT_EQ(idle.error().where, "threads");
}

TEST(read_pem_file, reads_pem_and_names_the_path_on_failure) {
  const auto dir = test::fresh_directory();
  const std::string pem =
    "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  std::ofstream(dir + "/server.pem") << pem;
  std::ofstream(dir + "/notes.txt") << "hello";

  auto read = read_pem_file(dir + "/server.pem");
  ASSERT_TRUE(read.has_value()) << read.error().to_string();
  EXPECT_EQ(*read, pem);
  for (const auto& bad : {dir + "/missing.pem", dir + "/notes.txt", dir}) {
    auto failed = read_pem_file(bad);
    ASSERT_FALSE(failed.has_value()) << bad;
    EXPECT_EQ(failed.error().where, bad);
  }
}

} // namespace
} // namespace vigil::http
