#include "runtime/cli/breaker_command.hpp"

#include <ostream>
#include <string>

#include <curl/curl.h>

#include "actors/control/ingest/ingest_logic.hpp"

namespace vigil {

namespace {

std::size_t collect(char* data, std::size_t size, std::size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

} // namespace

std::vector<option_spec> breaker_option_specs() {
  return {
    {"url", "URL", "the control plane, e.g. https://vigil-control.vigil:8443 (required)"},
    {"token-file", "FILE", "bearer token of the control plane (control.token_file)"},
    {"ca-file", "FILE", "CA bundle that signed the control plane's certificate"},
  };
}

int run_breaker_reset(command_context& ctx) {
  const auto& pos = ctx.args.positional;
  if (pos.size() != 1 || pos.front() != "reset") {
    ctx.err << "vigil breaker: expected 'reset'\n";
    return 2;
  }
  auto url = ctx.args.value("url");
  if (!url || url->empty()) {
    ctx.err << "vigil breaker reset: --url is required\n";
    return 2;
  }
  std::string token;
  if (auto file = ctx.args.value("token-file")) {
    auto loaded = control::load_token_file(*file);
    if (!loaded) {
      ctx.err << "vigil breaker reset: " << loaded.error().to_string() << "\n";
      return 1;
    }
    token = std::move(*loaded);
  }
  while (!url->empty() && url->back() == '/')
    url->pop_back();
  const auto target = *url + "/v1/breaker/reset";

  CURL* curl = curl_easy_init();
  if (curl == nullptr) {
    ctx.err << "vigil breaker reset: cannot start libcurl\n";
    return 1;
  }
  std::string body;
  curl_slist* headers = nullptr;
  if (!token.empty())
    headers = curl_slist_append(headers, ("Authorization: Bearer " + token).c_str());
  curl_easy_setopt(curl, CURLOPT_URL, target.c_str());
  curl_easy_setopt(curl, CURLOPT_POST, 1L);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "");
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 30L);
  if (auto ca = ctx.args.value("ca-file"))
    curl_easy_setopt(curl, CURLOPT_CAINFO, ca->c_str());
  const auto code = curl_easy_perform(curl);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  if (code != CURLE_OK) {
    ctx.err << "vigil breaker reset: " << target << ": " << curl_easy_strerror(code)
            << "\n";
    return 1;
  }
  if (status != 200) {
    ctx.err << "vigil breaker reset: " << target << " answered " << status << ": "
            << body;
    if (body.empty() || body.back() != '\n')
      ctx.err << "\n";
    return 1;
  }
  ctx.out << body;
  return 0;
}

} // namespace vigil
