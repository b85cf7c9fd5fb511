#include "actors/agent/dcgm/dcgm_exporter_client.hpp"

#include <mutex>

#include <curl/curl.h>

namespace vigil::agent {

namespace {

struct page_buffer {
  std::string text;
  std::size_t limit = 0;
  bool too_large = false;
};

std::size_t collect(char* data, std::size_t size, std::size_t count, void* user) {
  auto* page = static_cast<page_buffer*>(user);
  const auto n = size * count;
  if (page->text.size() + n > page->limit) {
    page->too_large = true;
    return 0; // makes curl stop with CURLE_WRITE_ERROR
  }
  page->text.append(data, n);
  return n;
}

} // namespace

dcgm_exporter_client::dcgm_exporter_client(dcgm_exporter_options options)
  : options_(std::move(options)) {
  static std::once_flag global_init;
  std::call_once(global_init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  curl_ = curl_easy_init();
}

dcgm_exporter_client::~dcgm_exporter_client() {
  if (curl_ != nullptr)
    curl_easy_cleanup(static_cast<CURL*>(curl_));
}

expected<std::string> dcgm_exporter_client::fetch() {
  auto* curl = static_cast<CURL*>(curl_);
  if (curl == nullptr)
    return failure{options_.url, "cannot start libcurl"};
  page_buffer page;
  page.limit = options_.max_page_bytes;
  char error_buffer[CURL_ERROR_SIZE] = {};
  curl_easy_reset(curl);
  curl_easy_setopt(curl, CURLOPT_URL, options_.url.c_str());
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.timeout.count()));
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, ""); // gzip when the exporter offers it
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &page);
  const CURLcode rc = curl_easy_perform(curl);
  if (page.too_large)
    return failure{options_.url, "page larger than "
                                   + std::to_string(options_.max_page_bytes) + " bytes"};
  if (rc != CURLE_OK)
    return failure{options_.url,
                   error_buffer[0] != '\0' ? error_buffer : curl_easy_strerror(rc)};
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  if (status != 200)
    return failure{options_.url, "HTTP " + std::to_string(status)};
  return std::move(page.text);
}

} // namespace vigil::agent
