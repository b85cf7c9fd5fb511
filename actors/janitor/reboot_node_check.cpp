#include "actors/janitor/reboot_node_check.hpp"

namespace vigil::janitor {

std::string_view to_string(reboot_progress progress) {
  switch (progress) {
    case reboot_progress::succeeded: return "succeeded";
    case reboot_progress::timed_out: return "timed_out";
    case reboot_progress::waiting: break;
  }
  return "waiting";
}

reboot_progress evaluate_reboot(std::string_view boot_id_before,
                                const node_boot_observation& observed,
                                wall_time requested_at, wall_time now,
                                std::chrono::seconds timeout) {
  bool new_boot = !observed.boot_id.empty() && observed.boot_id != boot_id_before;
  if (new_boot && observed.ready)
    return reboot_progress::succeeded;
  if (now - requested_at >= timeout)
    return reboot_progress::timed_out;
  return reboot_progress::waiting;
}

} // namespace vigil::janitor
