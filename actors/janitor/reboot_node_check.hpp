// When a RebootNode has worked: the node's boot ID changed and the node is
// Ready again; or when it has run out of time.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "messages/wall_time.hpp"

namespace vigil::janitor {

enum class reboot_progress {
  waiting,   ///< same boot, or new boot not Ready yet
  succeeded, ///< new boot ID and Ready
  timed_out, ///< no Ready new boot within the timeout
};

std::string_view to_string(reboot_progress progress);

/// What the controller reads from the Node: status.nodeInfo.bootID and the
/// Ready condition.
struct node_boot_observation {
  std::string boot_id;
  bool ready = false;
};

/// `boot_id_before` is the boot ID recorded when the reboot was requested
/// (status.bootIdBefore); an empty observed boot ID (node object in flux)
/// never counts as changed.
reboot_progress
evaluate_reboot(std::string_view boot_id_before, const node_boot_observation& observed,
                wall_time requested_at, wall_time now,
                std::chrono::seconds timeout = std::chrono::seconds{1800});

} // namespace vigil::janitor
