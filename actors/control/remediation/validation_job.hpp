// The validation Job that proves a fix before the node returns (seed 003:
// validate before uncordon; a reset or reboot can "succeed" while CUDA, DCGM
// or NCCL still fail): built by the control plane on the remediated node,
// read back as pass, fail or still running. Pure code; the node actor sends
// the requests through the gateway.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "actors/control/remediation/remediation_machine.hpp"
#include "messages/expected.hpp"

namespace vigil::control {

/// What one kind of remediation is validated with
/// (config remediation.validation.reset / .reboot).
struct validation_job_spec {
  std::string image = "nvcr.io/nvidia/cloud-native/dcgm:4.2.3-1-ubuntu22.04";
  /// The container's command; empty: default_validation_command(). It sees
  /// VIGIL_GPU_UUIDS (comma-separated, empty: every GPU) and
  /// VIGIL_EXPECTED_GPUS (the node's GPU count before the fix, may be empty).
  std::vector<std::string> command;
};

/// Config `remediation.validation.*` beyond the machine's policy.
struct validation_job_options {
  std::string job_namespace = "vigil-system"; ///< janitor.job_namespace
  std::string service_account = "vigil-gpu-reset";
  std::string runtime_class; ///< e.g. "nvidia"; empty: the cluster's default
  validation_job_spec reset;
  validation_job_spec reboot;
};

/// The default check: every GPU the node had is there (nvidia-smi -L), then
/// `dcgmi diag -r 2` on the GPUs named (all when none), with a host engine
/// of its own when none answers.
std::vector<std::string> default_validation_command();

/// The batch/v1 Job: pinned to the node by nodeName, tolerating every taint
/// (the node is quarantined), privileged with every GPU visible, no retries,
/// an activeDeadlineSeconds of the validation timeout, labelled as vigil's
/// own (app.kubernetes.io/managed-by=vigil: the drain never evicts it).
nlohmann::json build_validation_job(const remediation_command::run_validation& run,
                                    const std::string& node,
                                    const validation_job_options& options,
                                    std::chrono::seconds timeout);

/// A Job's status as the machine reads it: done when it succeeded or failed
/// (the Failed condition's reason and message say why).
expected<validation_progress> read_validation_job(const nlohmann::json& job);

} // namespace vigil::control
