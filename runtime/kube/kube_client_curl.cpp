// libcurl multi on one I/O thread. Callers hand work over through a small
// mutex-guarded inbox (the only shared state); everything else belongs to
// the I/O thread.
#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <sys/stat.h>
#include <thread>

#include <curl/curl.h>

#include "runtime/kube/kube_client.hpp"
#include "runtime/kube/watch_stream.hpp"
#include "runtime/logging.hpp"

namespace vigil::kube {

namespace {

std::string trim_crlf(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' '))
    s.remove_suffix(1);
  return std::string(s);
}

// One request or watch on its way, owned by the I/O thread.
struct transfer {
  std::uint64_t id = 0;
  kube_request request;
  kube_client::response_handler done; // requests
  kube_client::line_handler on_line;  // watches
  kube_client::end_handler on_end;    // watches
  bool is_watch() const { return static_cast<bool>(on_line); }

  int attempt = 0;
  pacing_clock::time_point not_before{};
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  std::string body;          // response body (a watch's only when it failed)
  watch_line_splitter lines; // a watch's body, line by line
  std::optional<std::chrono::seconds> retry_after;
  bool cancelled = false;
  bool line_too_long = false; // a watch line past the splitter's limit ended it
};

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<transfer*>(user);
  const size_t bytes = size * n;
  if (!t->is_watch()) {
    t->body.append(data, bytes);
    return bytes;
  }
  long status = 0;
  curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
  if (status != 200) { // an error Status for the watch request itself
    t->body.append(data, bytes);
    return bytes;
  }
  if (t->cancelled)
    return bytes;
  // A line past the splitter's limit is not a watch event: returning short
  // makes libcurl end the transfer, and the watch's end handler resumes it.
  const bool more = t->lines.feed({data, bytes}, [t](std::string_view line) {
    t->on_line(line);
    return !t->cancelled;
  });
  if (!more && !t->cancelled) {
    t->line_too_long = true;
    return 0;
  }
  return bytes;
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<transfer*>(user);
  std::string_view line{data, size * n};
  constexpr std::string_view name = "retry-after:";
  if (line.size() > name.size()) {
    std::string lower(line.substr(0, name.size()));
    for (auto& c : lower)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == name)
      t->retry_after = parse_retry_after(trim_crlf(line.substr(name.size())));
  }
  return size * n;
}

// Failures worth another try: not TLS trust, certificates or a bad URL.
bool transient(CURLcode code) {
  switch (code) {
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_BAD_FUNCTION_ARGUMENT: return false;
    default: return true;
  }
}

class curl_client final : public kube_client {
public:
  curl_client(kube_connection connection, kube_client_options options)
    : conn_(std::move(connection)), options_(options),
      limiter_(options.qps, options.burst), multi_(curl_multi_init()) {
    curl_multi_setopt(multi_, CURLMOPT_MAX_HOST_CONNECTIONS, max_connections);
    thread_ = std::thread([this] { run(); });
  }

  ~curl_client() override {
    stopping_ = true;
    curl_multi_wakeup(multi_);
    thread_.join();
    curl_multi_cleanup(multi_);
  }

  void send(kube_request request, response_handler done) override {
    auto t = std::make_unique<transfer>();
    t->request = std::move(request);
    t->done = std::move(done);
    submit(std::move(t));
  }

  std::uint64_t watch(kube_request request, line_handler on_line,
                      end_handler on_end) override {
    auto t = std::make_unique<transfer>();
    t->request = std::move(request);
    t->on_line = std::move(on_line);
    t->on_end = std::move(on_end);
    return submit(std::move(t));
  }

  void stop_watch(std::uint64_t id) override {
    {
      std::lock_guard<std::mutex> guard(inbox_mutex_);
      cancelled_.push_back(id);
    }
    curl_multi_wakeup(multi_);
  }

private:
  std::uint64_t submit(std::unique_ptr<transfer> t) {
    std::uint64_t id;
    {
      std::lock_guard<std::mutex> guard(inbox_mutex_);
      id = t->id = ++last_id_;
      inbox_.push_back(std::move(t));
    }
    curl_multi_wakeup(multi_);
    return id;
  }

  void run() {
    while (!stopping_) {
      take_inbox();
      start_due();
      int running = 0;
      curl_multi_perform(multi_, &running);
      finish_done();
      start_due(); // on the connections just freed (a new handle ends the poll at once)
      curl_multi_poll(multi_, nullptr, 0, poll_timeout_ms(), nullptr);
    }
    shut_down();
  }

  void take_inbox() {
    std::deque<std::unique_ptr<transfer>> fresh;
    std::vector<std::uint64_t> cancelled;
    {
      std::lock_guard<std::mutex> guard(inbox_mutex_);
      fresh.swap(inbox_);
      cancelled.swap(cancelled_);
    }
    for (auto& t : fresh) {
      if (t->is_watch())
        start(std::move(t)); // a watch holds its connection for minutes: no queue
      else
        lane(*t).push_back(std::move(t));
    }
    for (auto id : cancelled)
      cancel(id);
  }

  // Stops a watch (stop_watch); watches start as they arrive, never queued.
  void cancel(std::uint64_t id) {
    if (auto it = active_.find(id); it != active_.end()) {
      it->second->cancelled = true;
      release(*it->second);
      active_.erase(it);
    }
  }

  std::deque<std::unique_ptr<transfer>>& lane(const transfer& t) {
    return t.request.urgent ? urgent_ : waiting_;
  }

  // Starts waiting requests, the urgent lane's first, each lane in order,
  // while they are due, have a token and a connection is free. The rest wait
  // here, not in libcurl: libcurl keeps the transfers that found no
  // connection in a list it walks on every removal, which took a third of a
  // core at 5,000 cordons a second (BENCHMARKS.md "The API client's queue").
  void start_due() {
    const auto now = pacing_clock::now();
    next_due_ = pacing_clock::time_point::max();
    if (start_due(urgent_, now))
      start_due(waiting_, now);
  }

  // One lane; false when the limit or the rate stopped it (nothing after it
  // may start either).
  bool start_due(std::deque<std::unique_ptr<transfer>>& lane,
                 pacing_clock::time_point now) {
    for (auto it = lane.begin(); it != lane.end();) {
      auto& t = **it;
      if (t.not_before > now) { // a retry's backoff
        next_due_ = std::min(next_due_, t.not_before);
        ++it;
        continue;
      }
      if (requests_active_ >= in_flight_limit())
        return false; // finish_done starts the next one
      if (auto wait = limiter_.try_take(now); wait.count() > 0) {
        next_due_ = std::min(next_due_, now + wait);
        return false; // keep order: later requests wait behind this one
      }
      start(std::move(*it));
      it = lane.erase(it);
    }
    return true;
  }

  long poll_timeout_ms() const {
    if (next_due_ == pacing_clock::time_point::max())
      return 1000;
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
      next_due_ - pacing_clock::now());
    return std::clamp<long>(wait.count() + 1, 0, 1000);
  }

  std::string bearer_token() {
    if (conn_.token_file.empty())
      return conn_.token;
    struct stat st {};
    if (::stat(conn_.token_file.c_str(), &st) == 0
        && (st.st_mtim.tv_sec != token_mtime_.tv_sec
            || st.st_mtim.tv_nsec != token_mtime_.tv_nsec || st.st_size != token_size_)) {
      std::FILE* f = std::fopen(conn_.token_file.c_str(), "r");
      if (f != nullptr) {
        std::string token;
        char buf[4096];
        for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;)
          token.append(buf, n);
        std::fclose(f);
        token_ = trim_crlf(token);
        token_mtime_ = st.st_mtim;
        token_size_ = st.st_size;
      }
    }
    return token_;
  }

  void start(std::unique_ptr<transfer> owned) {
    auto& t = *owned;
    t.body.clear();
    t.retry_after.reset();
    t.easy = curl_easy_init();
    CURL* e = t.easy;
    const auto& r = t.request;
    std::string url = conn_.server + r.path + (r.query.empty() ? "" : "?" + r.query);
    curl_easy_setopt(e, CURLOPT_URL, url.c_str());
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r.verb.c_str());
    if (r.verb == "GET")
      curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    if (r.verb == "HEAD")
      curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    if (!r.body.empty() || r.verb == "POST" || r.verb == "PUT" || r.verb == "PATCH") {
      curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, static_cast<long>(r.body.size()));
      curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, r.body.c_str());
      curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r.verb.c_str());
    }
    t.headers = curl_slist_append(t.headers, "Accept: application/json");
    t.headers = curl_slist_append(t.headers, ("Content-Type: " + r.content_type).c_str());
    if (auto token = bearer_token(); !token.empty())
      t.headers =
        curl_slist_append(t.headers, ("Authorization: Bearer " + token).c_str());
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, t.headers);
    curl_easy_setopt(e, CURLOPT_USERAGENT, options_.user_agent.c_str());
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(options_.connect_timeout.count()));
    if (r.timeout.count() > 0)
      curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(r.timeout.count()));
    configure_tls(e);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(e, CURLOPT_PRIVATE, &t);
    curl_multi_add_handle(multi_, e);
    requests_active_ += t.is_watch() ? 0 : 1;
    active_.emplace(t.id, std::move(owned));
  }

  void configure_tls(CURL* e) {
    auto blob = [&](CURLoption option, const std::string& pem) {
      curl_blob b{const_cast<char*>(pem.data()), pem.size(), CURL_BLOB_COPY};
      curl_easy_setopt(e, option, &b);
    };
    if (!conn_.ca_data.empty())
      blob(CURLOPT_CAINFO_BLOB, conn_.ca_data);
    else if (!conn_.ca_file.empty())
      curl_easy_setopt(e, CURLOPT_CAINFO, conn_.ca_file.c_str());
    if (!conn_.client_cert_data.empty())
      blob(CURLOPT_SSLCERT_BLOB, conn_.client_cert_data);
    else if (!conn_.client_cert_file.empty())
      curl_easy_setopt(e, CURLOPT_SSLCERT, conn_.client_cert_file.c_str());
    if (!conn_.client_key_data.empty())
      blob(CURLOPT_SSLKEY_BLOB, conn_.client_key_data);
    else if (!conn_.client_key_file.empty())
      curl_easy_setopt(e, CURLOPT_SSLKEY, conn_.client_key_file.c_str());
    if (conn_.insecure_skip_tls_verify) {
      curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
      curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    }
  }

  void release(transfer& t) {
    if (t.easy != nullptr) {
      curl_multi_remove_handle(multi_, t.easy);
      curl_easy_cleanup(t.easy);
      requests_active_ -= t.is_watch() ? 0 : 1;
    }
    curl_slist_free_all(t.headers);
    t.easy = nullptr;
    t.headers = nullptr;
  }

  void finish_done() {
    int left = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi_, &left)) {
      if (msg->msg != CURLMSG_DONE)
        continue;
      transfer* t = nullptr;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &t);
      auto it = active_.find(t->id);
      if (it == active_.end())
        continue;
      auto owned = std::move(it->second);
      active_.erase(it);
      long status = 0;
      curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
      long version = 0;
      curl_easy_getinfo(t->easy, CURLINFO_HTTP_VERSION, &version);
      multiplexed_ = multiplexed_ || version == CURL_HTTP_VERSION_2_0;
      const CURLcode code = msg->data.result;
      release(*t);
      if (t->is_watch())
        end_watch(*t, code, status);
      else
        complete(std::move(owned), code, status);
    }
  }

  void end_watch(transfer& t, CURLcode code, long status) {
    if (t.line_too_long)
      t.on_end(kube_error{200,
                          "WatchLineTooLong",
                          "a line of the watch stream exceeded "
                            + std::to_string(watch_line_splitter::default_max_line_bytes)
                            + " bytes: not a watch",
                          {}});
    else if (code != CURLE_OK)
      t.on_end(kube_error{0, "Transport", curl_easy_strerror(code), {}});
    else if (status != 200)
      t.on_end(error_from_response({status, t.body}, t.retry_after));
    else if (t.lines.pending_bytes() > 0)
      t.on_end(kube_error{200,
                          "TruncatedWatchLine",
                          "the stream ended inside a line of "
                            + std::to_string(t.lines.pending_bytes()) + " bytes",
                          {}});
    else
      t.on_end(std::nullopt);
  }

  void complete(std::unique_ptr<transfer> t, CURLcode code, long status) {
    kube_result result;
    bool may_retry;
    if (code != CURLE_OK) {
      result = kube_error{0, "Transport", curl_easy_strerror(code), {}};
      // Nothing reached the server when the connection failed: safe for POST.
      // A certificate or URL problem does not heal by waiting.
      may_retry =
        transient(code) && (t->request.idempotent() || code == CURLE_COULDNT_CONNECT);
    } else if (status >= 200 && status < 300) {
      result = kube_response{status, std::move(t->body)};
      may_retry = false;
    } else {
      auto err = error_from_response({status, t->body}, t->retry_after);
      may_retry = err.throttled() ? t->request.retry_throttled
                                  : err.retryable() && t->request.idempotent();
      result = std::move(err);
    }
    if (may_retry && ++t->attempt < options_.backoff.max_attempts) {
      const auto delay =
        retry_delay(options_.backoff, t->attempt, result.error().retry_after, jitter_());
      t->not_before = pacing_clock::now() + delay;
      next_due_ = std::min(next_due_, t->not_before); // the poll must wake for it
      lane(*t).push_back(std::move(t));
      return;
    }
    t->done(std::move(result));
  }

  void shut_down() {
    for (auto& [id, t] : active_) {
      release(*t);
      if (!t->is_watch())
        t->done(kube_error{0, "Transport", "client stopped", {}});
    }
    active_.clear();
    {
      std::lock_guard<std::mutex> guard(inbox_mutex_);
      for (auto& t : inbox_)
        if (!t->is_watch()) // a watch ends without a word, as a cancelled one
          waiting_.push_back(std::move(t));
      inbox_.clear();
    }
    for (auto* lane : {&urgent_, &waiting_}) {
      for (auto& t : *lane)
        t->done(kube_error{0, "Transport", "client stopped", {}});
      lane->clear();
    }
  }

  double jitter_() { return std::uniform_real_distribution<double>(0.0, 1.0)(random_); }

  kube_connection conn_;
  kube_client_options options_;
  token_bucket limiter_;
  CURLM* multi_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};

  std::mutex inbox_mutex_;
  std::deque<std::unique_ptr<transfer>> inbox_;
  std::vector<std::uint64_t> cancelled_;
  std::uint64_t last_id_ = 0;

  // Connections to the API server. Over HTTP/1.1 a request beyond them
  // waits for one; over HTTP/2 (TLS to a real API server) they carry many
  // streams each, and up to max_streams requests are in flight.
  static constexpr long max_connections = 16;
  static constexpr long max_streams = 100; // the API server allows more per connection
  long in_flight_limit() const { return multiplexed_ ? max_streams : max_connections; }

  // I/O thread only.
  std::deque<std::unique_ptr<transfer>> urgent_;  ///< urgent requests, in order
  std::deque<std::unique_ptr<transfer>> waiting_; ///< the others, in order
  long requests_active_ = 0;                      ///< requests handed to libcurl
  bool multiplexed_ = false;                      ///< the server answered over HTTP/2
  std::map<std::uint64_t, std::unique_ptr<transfer>> active_;
  pacing_clock::time_point next_due_ = pacing_clock::time_point::max();
  std::string token_;
  timespec token_mtime_{};
  off_t token_size_ = -1;
  std::minstd_rand random_{std::random_device{}()};
};

} // namespace

expected<std::unique_ptr<kube_client>>
make_kube_client_curl(kube_connection connection, kube_client_options options) {
  static const bool initialised = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  if (!initialised)
    return failure{"libcurl", "curl_global_init failed"};
  if (connection.server.rfind("http://", 0) != 0
      && connection.server.rfind("https://", 0) != 0)
    return failure{"server", "'" + connection.server + "' is not an http(s) URL"};
  while (!connection.server.empty() && connection.server.back() == '/')
    connection.server.pop_back();
  return std::unique_ptr<kube_client>(
    std::make_unique<curl_client>(std::move(connection), options));
}

} // namespace vigil::kube
