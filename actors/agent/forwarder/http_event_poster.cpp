#include "actors/agent/forwarder/http_event_poster.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>

#include <curl/curl.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

namespace vigil::agent {

namespace {

using json = nlohmann::json;

constexpr std::size_t max_reply_bytes = 1 << 20;
constexpr std::size_t detail_bytes = 512;

std::size_t collect_body(char* data, std::size_t size, std::size_t count, void* user) {
  auto& body = *static_cast<std::string*>(user);
  const std::size_t bytes = size * count;
  body.append(data,
              std::min(bytes, max_reply_bytes - std::min(max_reply_bytes, body.size())));
  return bytes;
}

std::string trim(const std::string& text) {
  const char* blanks = " \t\r\n";
  auto first = text.find_first_not_of(blanks);
  if (first == std::string::npos)
    return "";
  return text.substr(first, text.find_last_not_of(blanks) - first + 1);
}

std::string endpoint_url(std::string base, const std::string& path) {
  while (!base.empty() && base.back() == '/')
    base.pop_back();
  return base + path;
}

// A curl_slist that frees itself.
class header_list {
public:
  ~header_list() { curl_slist_free_all(list_); }
  void add(const std::string& header) {
    list_ = curl_slist_append(list_, header.c_str());
  }
  curl_slist* get() const { return list_; }

private:
  curl_slist* list_ = nullptr;
};

line_result parse_one_result(const json& item) {
  line_result r;
  if (!item.is_object())
    return r;
  if (auto id = item.find("id"); id != item.end() && id->is_string())
    r.id = id->get<std::string>();
  if (auto st = item.find("status"); st != item.end() && st->is_string())
    r.accepted = st->get<std::string>() != "rejected";
  if (auto err = item.find("error"); err != item.end() && err->is_string())
    r.error = err->get<std::string>();
  return r;
}

} // namespace

std::vector<line_result> parse_line_results(const std::string& body) {
  auto j = json::parse(body, nullptr, false);
  std::vector<line_result> out;
  if (j.is_discarded() || !j.is_object())
    return out;
  auto results = j.find("results");
  if (results == j.end() || !results->is_array())
    return out;
  for (const auto& item : *results)
    out.push_back(parse_one_result(item));
  return out;
}

post_outcome classify_http_status(long status) {
  if (status >= 200 && status < 300)
    return post_outcome::accepted;
  // 401/403: the token may have been rotated and is read again next time;
  // losing events to an authentication hiccup would be worse than retrying.
  if (status == 401 || status == 403 || status == 408 || status == 429)
    return post_outcome::retryable;
  if (status >= 400 && status < 500)
    return post_outcome::rejected;
  return post_outcome::retryable; // none, 1xx, 3xx (misconfigured), 5xx
}

http_event_poster::http_event_poster(http_poster_options options)
  : options_(std::move(options)) {
  static std::once_flag global_init;
  std::call_once(global_init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  curl_ = curl_easy_init();
}

http_event_poster::~http_event_poster() {
  if (curl_ != nullptr)
    curl_easy_cleanup(static_cast<CURL*>(curl_));
}

expected<std::string> http_event_poster::current_token() {
  const auto& path = options_.token_file;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return failure{path, std::string("cannot read the token: ") + std::strerror(errno)};
  const std::string stamp = std::to_string(st.st_ino) + "/" + std::to_string(st.st_size)
                            + "/" + std::to_string(st.st_mtim.tv_sec) + "."
                            + std::to_string(st.st_mtim.tv_nsec);
  if (stamp == token_stamp_)
    return token_;
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in)
    return failure{path, "cannot read the token"};
  auto token = trim(text.str());
  if (token.empty())
    return failure{path, "empty token"};
  token_ = std::move(token);
  token_stamp_ = stamp;
  return token_;
}

post_result http_event_poster::post(const std::string& ndjson) {
  return send("/v1/events", "application/x-ndjson", ndjson);
}

post_result http_event_poster::post_heartbeat(const std::string& json) {
  return send("/v1/heartbeat", "application/json", json);
}

post_result http_event_poster::send(const std::string& path, const char* content_type,
                                    const std::string& payload) {
  post_result result;
  auto* curl = static_cast<CURL*>(curl_);
  if (curl == nullptr) {
    result.detail = "curl_easy_init failed";
    return result;
  }
  header_list headers;
  headers.add(std::string("Content-Type: ") + content_type);
  headers.add("Expect:"); // no 100-continue round trip before large bodies
  if (!options_.token_file.empty()) {
    auto token = current_token();
    if (!token) {
      result.detail = token.error().to_string();
      return result;
    }
    headers.add("Authorization: Bearer " + *token);
  }
  const std::string url = endpoint_url(options_.url, path);
  std::string body;
  char error_buffer[CURL_ERROR_SIZE] = {};
  curl_easy_reset(curl);
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_POST, 1L);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, payload.data());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
                   static_cast<curl_off_t>(payload.size()));
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(curl, CURLOPT_USERAGENT, options_.user_agent.c_str());
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(options_.connect_timeout.count()));
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(options_.request_timeout.count()));
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  if (!options_.ca_file.empty())
    curl_easy_setopt(curl, CURLOPT_CAINFO, options_.ca_file.c_str());
  const CURLcode rc = curl_easy_perform(curl);
  if (rc != CURLE_OK) {
    result.detail = error_buffer[0] != '\0' ? error_buffer : curl_easy_strerror(rc);
    return result;
  }
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &result.http_status);
  curl_off_t retry_after = 0;
  if (curl_easy_getinfo(curl, CURLINFO_RETRY_AFTER, &retry_after) == CURLE_OK
      && retry_after > 0)
    result.retry_after = std::chrono::seconds{retry_after};
  result.outcome = classify_http_status(result.http_status);
  result.lines = parse_line_results(body);
  if (result.outcome != post_outcome::accepted)
    result.detail = body.substr(0, detail_bytes);
  return result;
}

} // namespace vigil::agent
