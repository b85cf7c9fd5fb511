#include "actors/agent/forwarder/http_event_poster.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <tuple>

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

std::string_view to_string(post_failure failure) {
  switch (failure) {
    case post_failure::none: return "none";
    case post_failure::unreachable: return "unreachable";
    case post_failure::credentials: return "credentials";
    case post_failure::endpoint: return "endpoint";
    case post_failure::too_large: return "too_large";
    case post_failure::overloaded: return "overloaded";
  }
  return "unreachable";
}

std::pair<post_outcome, post_failure> classify_reply(long status, bool has_line_results) {
  if (status >= 200 && status < 300)
    return {post_outcome::accepted, post_failure::none};
  if (status == 0)
    return {post_outcome::retryable, post_failure::unreachable};
  // 401/403: the token may have been rotated and is read again next time;
  // losing events to an authentication problem would be worse than retrying.
  if (status == 401 || status == 403)
    return {post_outcome::retryable, post_failure::credentials};
  if (status == 413)
    return {post_outcome::retryable, post_failure::too_large};
  if (status == 408 || status == 429 || status >= 500)
    return {post_outcome::retryable, post_failure::overloaded};
  // A verdict on the events themselves is the only answer that may drop them:
  // vigil control answers 400 with one result per line when none was taken.
  if ((status == 400 || status == 422) && has_line_results)
    return {post_outcome::rejected, post_failure::none};
  return {post_outcome::retryable, post_failure::endpoint}; // 1xx, 3xx, 404, 405, 415, …
}

std::string control_base_url(std::string url) {
  const auto strip_slashes = [&url] {
    while (!url.empty() && url.back() == '/')
      url.pop_back();
  };
  strip_slashes();
  for (std::string_view route : {"/v1/events", "/v1/heartbeat"})
    if (url.size() > route.size()
        && url.compare(url.size() - route.size(), route.size(), route) == 0) {
      url.resize(url.size() - route.size());
      strip_slashes();
      break;
    }
  return url;
}

std::string explain_post_failure(const post_result& result, const std::string& base_url,
                                 const std::string& path) {
  const std::string where = "the control plane at " + base_url;
  const std::string status = result.http_status == 0
                               ? std::string()
                               : " (HTTP " + std::to_string(result.http_status) + ")";
  const std::string detail = result.detail.empty() ? "" : ": " + result.detail;
  switch (result.failure_class) {
    case post_failure::none: return "";
    case post_failure::unreachable:
      return "cannot reach " + where + detail
             + "; check --control-url, the Service and, for https, --ca-file";
    case post_failure::credentials:
      return where + " refused the agent's credentials" + status + detail
             + "; check --token-file and the token's audience";
    case post_failure::endpoint:
      return where + " has no " + path + status + detail
             + "; --control-url must be the base URL of `vigil control`"
               " (e.g. https://vigil-control.vigil-system:8443)";
    case post_failure::too_large:
      return where + " refused a batch as too large" + status + detail
             + "; sending smaller batches";
    case post_failure::overloaded:
      return where + " asked to come back later" + status + detail;
  }
  return where + status + detail;
}

http_event_poster::http_event_poster(http_poster_options options)
  : options_(std::move(options)) {
  options_.url = control_base_url(std::move(options_.url));
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

post_result http_event_poster::post_allocations(const std::string& json) {
  return send("/v1/allocations", "application/json", json);
}

post_result http_event_poster::send(const std::string& path, const char* content_type,
                                    const std::string& payload) {
  auto result = exchange(path, content_type, payload);
  if (result.failure_class != post_failure::none)
    result.explanation = explain_post_failure(result, options_.url, path);
  return result;
}

post_result http_event_poster::exchange(const std::string& path, const char* content_type,
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
      result.failure_class = post_failure::credentials;
      result.detail = token.error().to_string();
      return result;
    }
    headers.add("Authorization: Bearer " + *token);
  }
  const std::string url = options_.url + path;
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
  result.lines = parse_line_results(body);
  std::tie(result.outcome, result.failure_class) =
    classify_reply(result.http_status, !result.lines.empty());
  if (result.outcome != post_outcome::accepted)
    result.detail = body.substr(0, detail_bytes);
  return result;
}

} // namespace vigil::agent
