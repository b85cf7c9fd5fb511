#include "actors/agent/topology/topology_collector.hpp"

#include "actors/agent/state_file.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "actors/agent/text_input.hpp"
#include "actors/agent/topology/topo_parser.hpp"

namespace vigil::agent {

namespace {

// A file's text when `file` is set, else the command's output.
expected<std::string> output_of(const std::string& file, const std::string& command,
                                const command_runner& run) {
  return file.empty() ? run(command) : read_text_file(file);
}

// "30s", or "200ms" when not whole seconds.
std::string describe(std::chrono::milliseconds d) {
  return d.count() % 1000 == 0 ? std::to_string(d.count() / 1000) + "s"
                               : std::to_string(d.count()) + "ms";
}

std::string describe_exit(int wait_status) {
  if (WIFEXITED(wait_status))
    return "exited with status " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status))
    return "killed by signal " + std::to_string(WTERMSIG(wait_status));
  return "ended with wait status " + std::to_string(wait_status);
}

// /bin/sh -c `command` with stdout on `stdout_fd`, in a new process group (so
// the group can be killed whole), with the default signal mask: the agent
// blocks SIGTERM in its threads, and the child must not inherit that.
expected<pid_t> spawn_shell(const std::string& command, int stdout_fd) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, stdout_fd, STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none;
  sigemptyset(&none);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK
                                          | POSIX_SPAWN_SETSIGDEF);
  std::string shell = "sh";
  std::string flag = "-c";
  std::string text = command;
  char* argv[] = {shell.data(), flag.data(), text.data(), nullptr};
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, "/bin/sh", &actions, &attributes, argv, environ);
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0)
    return failure{command, std::string("cannot be started: ") + std::strerror(rc)};
  return pid;
}

struct command_output {
  std::string text;
  bool exited = false; ///< reaped before the deadline
  int wait_status = 0;
};

// Reads stdout until EOF, then waits for the exit, both until `deadline`. A
// command may close stdout and go on running, so EOF alone is not the end.
command_output collect_output(pid_t pid, int fd,
                              std::chrono::steady_clock::time_point deadline) {
  using namespace std::chrono;
  command_output out;
  bool reading = true;
  for (;;) {
    const auto left = duration_cast<milliseconds>(deadline - steady_clock::now());
    if (!reading) {
      const pid_t reaped = ::waitpid(pid, &out.wait_status, WNOHANG);
      if (reaped == pid || (reaped < 0 && errno != EINTR)) {
        out.exited = reaped == pid;
        return out;
      }
      if (left.count() <= 0)
        return out;
      ::poll(nullptr, 0, static_cast<int>(std::min<std::int64_t>(left.count(), 10)));
      continue;
    }
    if (left.count() <= 0)
      return out;
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()) + 1);
    if (ready < 0 && errno != EINTR)
      reading = false;
    if (ready <= 0)
      continue; // the deadline check above ends it
    char buf[4096];
    const auto n = ::read(fd, buf, sizeof buf);
    if (n > 0)
      out.text.append(buf, static_cast<std::size_t>(n));
    else if (n == 0 || errno != EINTR)
      reading = false;
  }
}

// SIGKILL to the whole process group, then reaps the shell.
void kill_group(pid_t pid) {
  ::kill(-pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

} // namespace

expected<std::string> run_command(const std::string& command,
                                  std::chrono::milliseconds timeout) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return failure{command, std::string("cannot be started: ") + std::strerror(errno)};
  auto pid = spawn_shell(command, fds[1]);
  ::close(fds[1]);
  if (!pid) {
    ::close(fds[0]);
    return pid.error();
  }
  auto out = collect_output(*pid, fds[0], std::chrono::steady_clock::now() + timeout);
  ::close(fds[0]);
  if (!out.exited) {
    kill_group(*pid);
    return failure{command, "timed out after " + describe(timeout) + "; killed"};
  }
  if (!WIFEXITED(out.wait_status) || WEXITSTATUS(out.wait_status) != 0)
    return failure{command, describe_exit(out.wait_status)};
  return std::move(out.text);
}

command_runner timed_command_runner(std::chrono::milliseconds timeout) {
  return [timeout](const std::string& command) { return run_command(command, timeout); };
}

expected<gpu_metadata> collect_gpu_metadata(const std::string& node_name,
                                            const topology_sources& sources,
                                            const command_runner& run) {
  auto topo = output_of(sources.topo_file, sources.nvidia_smi + " topo -m", run);
  if (!topo)
    return topo.error();
  auto matrix = parse_topo_matrix(*topo);
  if (!matrix)
    return failure{sources.topo_file.empty() ? "nvidia-smi topo -m" : sources.topo_file,
                   matrix.error().to_string()};
  auto csv = output_of(sources.gpus_file,
                       sources.nvidia_smi + " --query-gpu="
                         + std::string(gpu_query_fields) + " --format=csv,noheader",
                       run);
  if (!csv)
    return csv.error();
  auto gpus = parse_gpu_query_csv(*csv);
  if (!gpus)
    return failure{sources.gpus_file.empty() ? "nvidia-smi --query-gpu"
                                             : sources.gpus_file,
                   gpus.error().to_string()};
  auto metadata = build_gpu_metadata(node_name, *gpus, *matrix);
  if (!metadata)
    return metadata;
  // NVLinks, and through them the NVSwitches: an SXid names a switch and
  // port, the GPUs behind it are what it hits; Ampere NVSwitch boards cannot
  // reset one GPU alone (seed 001 "Scope of Support").
  if (!sources.nvlink_file.empty() || sources.topo_file.empty())
    if (auto links =
          output_of(sources.nvlink_file, sources.nvidia_smi + " nvlink -R", run))
      attach_nvlinks(*metadata, parse_nvlink_remotes(*links));
  return metadata;
}

status write_gpu_metadata(const std::string& path, const gpu_metadata& metadata) {
  return replace_file(path, encode_gpu_metadata(metadata));
}

} // namespace vigil::agent
