// Whether nvidia-smi still reaches every GPU of the node (seed 003 "Card
// Dropout": the GPU disappears from nvidia-smi's output or nvidia-smi exits
// non-zero; "Driver Failures": nvidia-smi hangs or returns errors). A GPU
// that has fallen off the bus does not always leave an XID in the kernel log
// (NVSentinel's issue 155); nvidia-smi's own answer is the second opinion.
// Plain code; the agent's fabric_monitor, which asks nvidia-smi every
// interval, feeds it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actors/agent/fabric/fabric_health.hpp"
#include "messages/expected.hpp"
#include "messages/health_event.hpp"
#include "messages/wall_time.hpp"

namespace vigil::agent {

class xid_catalog;

inline constexpr std::string_view gpu_presence_agent_name = "gpu-presence-monitor";
/// Per GPU: listed by nvidia-smi, or gone from its answer.
inline constexpr std::string_view gpu_presence_check = "GPUPresence";
/// Per node: nvidia-smi answers, or the driver behind it does not.
inline constexpr std::string_view nvidia_smi_check = "NvidiaSmiResponds";

/// A fault is raised only when this many readings in a row show it: a GPU
/// being reset is briefly out of nvidia-smi's reach, and one reading a poll
/// interval later no longer is.
inline constexpr int readings_to_raise = 2;

/// What a failed nvidia-smi run says, by its exit status (nvidia-smi(1),
/// RETURN VALUE).
enum class nvidia_smi_failure {
  /// The driver does not answer: a run that timed out (hung), 9 (driver not
  /// loaded), 10 (an interrupt issue with a GPU), 15 (a GPU has fallen off
  /// the bus), 255 (internal driver error).
  driver,
  /// 6 ("No devices were found"): the driver answers and lists no GPU. Of
  /// a node with GPUs, every one is gone.
  no_devices,
  /// vigil's deployment, not the node's GPUs: not installed or not started,
  /// no permission, an argument this driver lacks, the NVML library missing.
  setup,
};

/// Reads the failure run_command wrote ("exited with status 15", "timed out
/// after …").
nvidia_smi_failure classify_nvidia_smi_failure(const failure& why);

/// nvidia-smi's answer split: the lines of the GPUs it could not reach
/// ("Unable to determine the device handle for GPU0000:0B:00.0: Unknown
/// Error", with or without a space before the address) taken out, their PCI
/// addresses normalised; the rest as it was.
struct split_answer {
  std::string rows;
  std::vector<std::string> unreachable;
};
split_answer split_unreachable(std::string_view answer);

/// A GPU the node is known to have (the agent's gpu_metadata, and every GPU
/// nvidia-smi has listed since the agent started).
struct known_gpu {
  std::string uuid;
  std::string pci; ///< normalised, "" when not known
};

class gpu_presence {
public:
  /// `catalog` (may be null) gives the action for a GPU gone: XID 79's
  /// (RESTART_BM without it).
  gpu_presence(std::string node, std::vector<known_gpu> known,
               const xid_catalog* catalog = nullptr);

  /// nvidia-smi answered: `rows` the GPUs it lists, `unreachable` the PCI
  /// addresses it could not reach. A known GPU that is not listed (or is
  /// unreachable) readings_to_raise times in a row is gone: fatal, one
  /// event per GPU; listed again, it is healthy again. The first answer
  /// also says which GPUs are there, in one healthy event (clearing what an
  /// earlier run left), and that nvidia-smi answers.
  std::vector<health_event> observe(const std::vector<fabric_row>& rows,
                                    const std::vector<std::string>& unreachable,
                                    wall_time now);

  /// nvidia-smi failed. A driver failure readings_to_raise times in a row,
  /// of a node with a GPU known, is a node fault (fatal, RESTART_BM: the
  /// driver is reloaded by a reboot);
  /// no devices is an answer that lists none of the known GPUs; a setup
  /// failure is no verdict on the node (the caller logs it).
  std::vector<health_event> query_failed(const failure& why, wall_time now);

private:
  struct gpu_state {
    std::string uuid; ///< "" for a GPU known only by the address it is unreachable at
    std::string pci;
    int missing_readings = 0;
    std::optional<bool> gone; ///< what was last sent
  };

  health_event make_event(std::string_view check, bool healthy, wall_time now) const;
  gpu_state& gpu_at(const std::string& uuid, const std::string& pci);

  std::string node_;
  recommended_action gone_action_;
  /// By UUID, or "pci/" + the address for a GPU only known unreachable.
  std::map<std::string, gpu_state> gpus_;
  int driver_failures_ = 0;
  std::optional<bool> driver_down_; ///< what was last sent
};

} // namespace vigil::agent
