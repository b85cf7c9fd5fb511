// Fabric Manager's state from a fake host /sys and /proc, laid out as an HGX
// H100 node shows them (NVSwitches bound to nvidia-nvswitch, the daemon's
// comm cut to 15 characters) and as a GB200 or a VM shows them (the driver
// registered, no switch bound).
#include "actors/agent/fabric/fabric_manager.hpp"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "tests/support/fresh_directory.hpp"

namespace vigil::agent {
namespace {

namespace fs = std::filesystem;

struct host_tree {
  std::string root = vigil::test::fresh_directory();
  std::string sys = root + "/sys";
  std::string proc = root + "/proc";

  host_tree() {
    fs::create_directories(sys + "/bus/pci/drivers/nvidia-nvswitch");
    fs::create_directories(proc + "/self");
    for (auto name : {"bind", "unbind", "module", "new_id"})
      std::ofstream(sys + "/bus/pci/drivers/nvidia-nvswitch/" + name) << "";
    process(1, "systemd");
    process(2044, "nvidia-persiste");
  }
  void nvswitch(const std::string& pci) {
    fs::create_directories(sys + "/bus/pci/devices/" + pci);
    fs::create_directory_symlink("../../../devices/" + pci,
                                 sys + "/bus/pci/drivers/nvidia-nvswitch/" + pci);
  }
  void process(int pid, const std::string& comm) {
    fs::create_directories(proc + "/" + std::to_string(pid));
    std::ofstream(proc + "/" + std::to_string(pid) + "/comm") << comm << "\n";
  }
};

TEST(fabric_manager, an_hgx_node_needs_it_and_finds_it_running) {
  host_tree host;
  for (auto pci : {"0000:05:00.0", "0000:06:00.0", "0000:07:00.0", "0000:08:00.0"})
    host.nvswitch(pci);
  auto state = read_fabric_manager(host.sys, host.proc);
  EXPECT_EQ(state.nvswitches, 4u);
  EXPECT_FALSE(state.running);
  EXPECT_TRUE(state.missing());
  host.process(3120, "nv-fabricmanage"); // the kernel's 15 characters
  state = read_fabric_manager(host.sys, host.proc);
  EXPECT_TRUE(state.running);
  EXPECT_FALSE(state.missing());
}

TEST(fabric_manager, a_node_without_local_nvswitches_expects_nothing) {
  host_tree host; // the driver registered (the H200 VM showed it), no switch bound
  auto state = read_fabric_manager(host.sys, host.proc);
  EXPECT_EQ(state.nvswitches, 0u);
  EXPECT_FALSE(state.missing());
  EXPECT_EQ(local_nvswitches(host.root + "/nowhere"), 0u);
  EXPECT_FALSE(process_running(host.root + "/nowhere", fabric_manager_process));
}

TEST(fabric_manager, odd_entries_are_skipped) {
  host_tree host;
  fs::create_directories(host.sys + "/bus/pci/drivers/nvidia-nvswitch/0000:zz:00.0");
  EXPECT_EQ(local_nvswitches(host.sys), 0u);
  fs::create_directories(host.proc + "/4242"); // exited: no comm
  EXPECT_FALSE(process_running(host.proc, "nv-hostengine"));
  EXPECT_TRUE(process_running(host.proc, "systemd"));
}

} // namespace
} // namespace vigil::agent
