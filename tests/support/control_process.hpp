// `vigil control` as a child process for the drivers that run the real
// binary (the chaos run, the load run): its own identity (POD_NAME, the
// Lease holder's name), its output appended to a log file, killed and started
// again as the driver says, and killed with the driver. Also a free port to
// give it and a probe of its /readyz.
#pragma once

#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <string>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <type_traits>
#include <unistd.h>
#include <vector>

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <sys/socket.h>

extern char** environ;

namespace vigil::test {

/// A port on 127.0.0.1 that was free a moment ago (for a child's config).
inline std::uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t size = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size);
  ::close(fd);
  return ntohs(address.sin_port);
}

/// True when the plain-HTTP server on `port` answers /readyz with 200.
inline bool ready(std::uint16_t port) {
  CURL* curl = curl_easy_init();
  const auto url = "http://127.0.0.1:" + std::to_string(port) + "/readyz";
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 1000L);
  long status = 0;
  if (curl_easy_perform(curl) == CURLE_OK)
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(curl);
  return status == 200;
}

/// Writes a kubeconfig for the API test server at `server_url` (bearer
/// `token`) to `path`, as the control replicas of the drivers read it.
inline void write_kubeconfig(const std::string& path, const std::string& server_url,
                             const std::string& token) {
  std::ofstream(path) << "apiVersion: v1\nkind: Config\nclusters: [{name: t, cluster: "
                         "{server: \""
                      << server_url << "\"}}]\nusers: [{name: u, user: {token: " << token
                      << "}}]\ncontexts: [{name: c, context: {cluster: t, user: u}}]\n"
                      << "current-context: c\n";
}

/// A driver's numeric option: the next argument, whole and not negative
/// (`out` integral) or any number not negative; false when there is none.
template <class T>
bool read_option_number(int argc, char** argv, int& i, T& out) {
  if (i + 1 >= argc)
    return false;
  char* end = nullptr;
  const double value = std::strtod(argv[++i], &end);
  if (end == argv[i] || *end != '\0' || value < 0
      || (std::is_integral_v<
            T> && value != static_cast<double>(static_cast<long long>(value))))
    return false;
  out = static_cast<T>(value);
  return true;
}

class control_process {
public:
  control_process(std::string binary, std::string config, std::string identity,
                  std::string log)
    : binary_(std::move(binary)), config_(std::move(config)),
      identity_(std::move(identity)), log_(std::move(log)) {}
  ~control_process() { signal(SIGKILL); }
  control_process(const control_process&) = delete;
  control_process& operator=(const control_process&) = delete;

  const std::string& identity() const { return identity_; }

  /// Starts the process (when it is not running); false when it cannot.
  bool start() {
    if (running())
      return true;
    std::vector<std::string> env{"POD_NAME=" + identity_};
    for (char** e = environ; *e != nullptr; ++e)
      if (std::string(*e).rfind("POD_NAME=", 0) != 0)
        env.emplace_back(*e);
    std::vector<char*> envp;
    for (auto& e : env)
      envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<std::string> args{binary_, "control", "--config", config_};
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    // fork rather than posix_spawn: the child asks to be killed when the
    // driver dies, so an aborted run leaves no replica behind.
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent)
        ::_exit(127);
      const int log = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (log >= 0) {
        ::dup2(log, STDOUT_FILENO);
        ::dup2(log, STDERR_FILENO);
      }
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    const bool started = pid_ > 0;
    if (!started)
      pid_ = -1;
    else
      ++starts_;
    return started;
  }

  /// Sends `sig`. After SIGKILL, waits for the exit; after SIGTERM, waits as
  /// the kubelet does (terminationGracePeriodSeconds, 30 s by default), then
  /// kills it. False when a SIGTERM had to be followed by SIGKILL.
  bool signal(int sig) {
    if (pid_ <= 0)
      return true;
    ::kill(pid_, sig);
    if (sig == SIGKILL)
      reap(true);
    if (sig != SIGTERM)
      return true;
    for (int waited_ms = 0; waited_ms < termination_grace_ms; waited_ms += 100) {
      if (reap(false)) {
        last_stop_ms_ = waited_ms;
        return true;
      }
      ::usleep(100 * 1000);
    }
    last_stop_ms_ = termination_grace_ms;
    ::kill(pid_, SIGKILL);
    reap(true);
    return false;
  }

  /// The kubelet's default terminationGracePeriodSeconds.
  static constexpr int termination_grace_ms = 30000;

  /// True while the process runs (reaps it when it has exited).
  bool running() { return pid_ > 0 && !reap(false); }

  int starts() const { return starts_; }
  /// How long the last SIGTERM took to end the process (to 100 ms).
  int last_stop_ms() const { return last_stop_ms_; }
  /// The process id while it runs; -1 otherwise.
  pid_t pid() const { return pid_; }

private:
  // True when the process has exited (and is reaped).
  bool reap(bool block) {
    if (pid_ <= 0)
      return true;
    int status = 0;
    if (::waitpid(pid_, &status, block ? 0 : WNOHANG) == 0)
      return false;
    pid_ = -1;
    return true;
  }

  std::string binary_, config_, identity_, log_;
  pid_t pid_ = -1;
  int starts_ = 0;
  int last_stop_ms_ = 0;
};

} // namespace vigil::test
