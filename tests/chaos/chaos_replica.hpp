// One `vigil control` replica of the chaos run: a child process with its own
// identity (POD_NAME, the Lease holder's name), its output appended to a log
// file, killed and started again as the chaos schedule says, and killed
// with the driver.
#pragma once

#include <csignal>
#include <cstdint>
#include <fcntl.h>
#include <string>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

extern char** environ;

namespace vigil::chaos {

class replica {
public:
  replica(std::string binary, std::string config, std::string identity, std::string log)
    : binary_(std::move(binary)), config_(std::move(config)),
      identity_(std::move(identity)), log_(std::move(log)) {}
  ~replica() { signal(SIGKILL); }
  replica(const replica&) = delete;
  replica& operator=(const replica&) = delete;

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

  /// Sends `sig`; SIGKILL and SIGTERM also wait for the exit.
  void signal(int sig) {
    if (pid_ <= 0)
      return;
    ::kill(pid_, sig);
    if (sig == SIGKILL || sig == SIGTERM)
      reap(true);
  }

  /// True while the process runs (reaps it when it has exited).
  bool running() { return pid_ > 0 && !reap(false); }

  int starts() const { return starts_; }

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
};

} // namespace vigil::chaos
