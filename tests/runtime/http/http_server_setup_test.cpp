// Setting the HTTP server up: HTTPS round trips with a test CA, plain HTTP
// against HTTPS, start() failures that name what is wrong, and reading PEM
// files.
#include "runtime/http/http_server.hpp"

#include <fstream>

#include <gtest/gtest.h>

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
