// The agent's topology collector: runs `nvidia-smi topo -m` and
// `nvidia-smi --query-gpu=…` (or reads their saved output from files) and
// writes gpu_metadata.json for the XID and NIC monitors (seed 002 §12.2).
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "actors/agent/topology/gpu_metadata.hpp"
#include "messages/expected.hpp"

namespace vigil::agent {

/// Runs a command and returns its standard output; a failure when it cannot
/// run or exits non-zero. Tests pass a fake.
using command_runner = std::function<expected<std::string>(const std::string& command)>;

/// How long one nvidia-smi call may take by default: a wedged driver can hang
/// it for good, and the monitors must not wait on it forever.
inline constexpr std::chrono::milliseconds default_command_timeout{30'000};

/// The real runner: `command` through /bin/sh in a process group of its own,
/// stdout captured, stdin and stderr on /dev/null. When it has not finished
/// within `timeout`, the whole group is killed (SIGKILL, so a child that
/// ignores signals or holds stdout open goes too) and the failure names the
/// command and says it timed out. Blocking: call it at startup, not from an
/// actor.
expected<std::string> run_command(const std::string& command,
                                  std::chrono::milliseconds timeout);

/// run_command with `timeout`, as a command_runner.
command_runner timed_command_runner(std::chrono::milliseconds timeout);

struct topology_sources {
  std::string nvidia_smi = "nvidia-smi"; ///< the binary (a path, or found on PATH)
  std::string
    topo_file; ///< saved `nvidia-smi topo -m` output; runs nvidia-smi when empty
  std::string gpus_file; ///< saved `--query-gpu` CSV; runs nvidia-smi when empty
  /// saved `nvidia-smi nvlink -R` output; when empty, nvidia-smi is run only
  /// if it runs for the other two (a set of saved files stays self-contained)
  std::string nvlink_file;
};

/// The outputs (from files or commands) parsed and merged. `nvlink -R` is
/// optional: when it fails (old driver, no NVLink) the GPUs have no nvlinks
/// and the node no nvswitches, and the collection still succeeds.
expected<gpu_metadata> collect_gpu_metadata(const std::string& node_name,
                                            const topology_sources& sources,
                                            const command_runner& run);

/// Collects and writes `path` atomically (temporary file, then rename).
status write_gpu_metadata(const std::string& path, const gpu_metadata& metadata);

} // namespace vigil::agent
