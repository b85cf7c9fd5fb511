// Helpers of the integration tests: a child process whose output the test
// reads line by line (blocking reads, no sleeps; a long silence ends a wait
// so that a hang fails with the output seen), and plain HTTP calls.
#pragma once

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <curl/curl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace vigil::test {

// A child process whose stdout and stderr come back through one pipe.
class child_process {
public:
  explicit child_process(std::vector<std::string> args) {
    int fds[2];
    if (pipe(fds) != 0)
      throw std::runtime_error("pipe failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ) != 0)
      throw std::runtime_error("cannot start " + args[0]);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    output_ = fds[0];
  }
  ~child_process() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (output_ >= 0)
      close(output_);
  }

  // Reads lines until one contains `text`; returns it, or "" at the end of
  // the output. Also "" when the child wrote nothing for `silence` (it hangs,
  // or the line will never come): the test then fails with what it saw,
  // rather than hanging until ctest kills it with nothing to show.
  std::string wait_for(const std::string& text,
                       std::chrono::seconds silence = std::chrono::seconds{120}) {
    for (;;) {
      for (auto end = pending_.find('\n'); end != std::string::npos;
           end = pending_.find('\n')) {
        std::string line = pending_.substr(0, end + 1);
        pending_.erase(0, end + 1);
        seen_ += line;
        if (line.find(text) != std::string::npos)
          return line;
      }
      pollfd ready{output_, POLLIN, 0};
      const int polled = ::poll(&ready, 1, static_cast<int>(silence.count() * 1000));
      if (polled < 0 && errno == EINTR)
        continue;
      if (polled == 0) {
        seen_ += "[no output for " + std::to_string(silence.count())
                 + " s while waiting for \"" + text + "\"]\n";
        return {};
      }
      char chunk[4096];
      const auto n = polled < 0 ? -1 : ::read(output_, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0) { // the end: a last line without its newline counts too
        std::string last = std::move(pending_);
        pending_.clear();
        seen_ += last;
        return !last.empty() && last.find(text) != std::string::npos ? last
                                                                     : std::string{};
      }
      pending_.append(chunk, static_cast<std::size_t>(n));
    }
  }

  // True once the child has printed a line containing `text`, looking first
  // at what earlier waits read. For a line printed once per process whose
  // place among the start-up lines is not fixed: a wait for another line may
  // have read past it already.
  bool printed(const std::string& text) {
    return seen_.find(text) != std::string::npos || !wait_for(text).empty();
  }

  // SIGTERM and the exit status of an orderly shutdown.
  int stop() {
    kill(pid_, SIGTERM);
    // Read to the end of its output first: a child whose shutdown logs fill
    // the pipe blocks writing and never exits while the test waits for it
    // (the hang seen on loaded machines).
    wait_for("\x01never");
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  const std::string& seen() const { return seen_; }

private:
  pid_t pid_ = -1;
  int output_ = -1;
  std::string pending_; ///< read, not yet a whole line
  std::string seen_;
};

inline size_t collect(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

// One request with curl: `verb` on `url`, a bearer token when `token` is not
// empty, and `body` (with `content_type`) when `verb` is POST; returns
// (status, body), status 0 when nothing answered.
inline std::pair<long, std::string>
curl_call(const std::string& url, const std::string& verb, const std::string& token = "",
          const std::string& body = "", const std::string& content_type = "") {
  CURL* curl = curl_easy_init();
  std::string answer;
  curl_slist* headers = nullptr;
  if (!token.empty())
    headers = curl_slist_append(headers, ("Authorization: Bearer " + token).c_str());
  if (!content_type.empty())
    headers = curl_slist_append(headers, ("Content-Type: " + content_type).c_str());
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  if (verb == "POST")
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
  else
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, verb.c_str());
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &answer);
  long status = 0;
  if (curl_easy_perform(curl) == CURLE_OK)
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  return {status, answer};
}

inline std::string local_url(int port, const std::string& path) {
  return "http://127.0.0.1:" + std::to_string(port) + path;
}

// POST `path` (NDJSON) to 127.0.0.1:port with a bearer token; returns
// (status, body).
inline std::pair<long, std::string> post_to(int port, const std::string& path,
                                            const std::string& token,
                                            const std::string& body) {
  return curl_call(local_url(port, path), "POST", token, body, "application/x-ndjson");
}

// POST /v1/events; returns (status, body).
inline std::pair<long, std::string> post_events(int port, const std::string& token,
                                                const std::string& body) {
  return post_to(port, "/v1/events", token, body);
}

// GET `path` with a bearer token ("" sends none); returns (status, body).
inline std::pair<long, std::string> get_with_token(int port, const std::string& path,
                                                   const std::string& token) {
  return curl_call(local_url(port, path), "GET", token);
}

// GET (or another verb without a body) on `url`; returns (status, body).
inline std::pair<long, std::string> http_call(const std::string& url,
                                              const std::string& verb = "GET") {
  return curl_call(url, verb);
}

} // namespace vigil::test
