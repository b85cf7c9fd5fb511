#include "actors/agent/fabric/fabric_manager.hpp"

#include <cctype>
#include <filesystem>
#include <fstream>

#include "actors/agent/text_input.hpp"
#include "actors/agent/topology/gpu_metadata.hpp"

namespace vigil::agent {

namespace {

bool all_digits(std::string_view name) {
  if (name.empty())
    return false;
  for (char c : name)
    if (!std::isdigit(static_cast<unsigned char>(c)))
      return false;
  return true;
}

} // namespace

std::size_t local_nvswitches(const std::string& sysfs_root) {
  std::error_code ec;
  std::size_t count = 0;
  const auto dir = sysfs_root + "/bus/pci/drivers/nvidia-nvswitch";
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec))
    if (!normalise_pci_address(it->path().filename().string()).empty())
      ++count;
  return count;
}

bool process_running(const std::string& proc_root, std::string_view name) {
  constexpr std::size_t comm_length = 15; // TASK_COMM_LEN - 1
  const auto wanted = name.substr(0, comm_length);
  std::error_code ec;
  for (std::filesystem::directory_iterator it(proc_root, ec), end; !ec && it != end;
       it.increment(ec)) {
    const auto pid = it->path().filename().string();
    if (!all_digits(pid))
      continue;
    std::ifstream comm(it->path() / "comm");
    std::string line;
    if (comm && std::getline(comm, line) && trim_space(line) == wanted)
      return true;
  }
  return false;
}

fabric_manager_state read_fabric_manager(const std::string& sysfs_root,
                                         const std::string& proc_root) {
  fabric_manager_state state;
  state.nvswitches = local_nvswitches(sysfs_root);
  // The process table is read only where Fabric Manager is expected.
  if (state.nvswitches > 0)
    state.running = process_running(proc_root, fabric_manager_process);
  return state;
}

} // namespace vigil::agent
