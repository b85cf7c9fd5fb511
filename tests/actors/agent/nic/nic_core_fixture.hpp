// The fixture of the NIC monitor core tests: a poller over four single-port
// InfiniBand compute cards and one management NIC, with helpers to take ports
// down and up and to run the first (baseline) poll.
#pragma once

#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "tests/actors/agent/nic/nic_test_support.hpp"

namespace vigil::agent::test_support {

// Four single-port InfiniBand compute cards, PXB to the GPUs of NUMA 0, and
// one management NIC on NUMA 1 (no GPU there).
class nic_core : public nic_fixture {
protected:
  void SetUp() override {
    nic_fixture::SetUp();
    metadata.gpus = {gpu(0, 0), gpu(1, 0)};
    for (int i = 0; i < 4; ++i)
      add_ib("mlx5_" + std::to_string(i), 0x0c + i);
    test::fake_nic mgmt;
    mgmt.name = "mlx5_9";
    mgmt.pci = "0000:a1:00.0";
    mgmt.numa_node = 1;
    sys.add_nic(mgmt);
    metadata.nic_topology["mlx5_9"] = {"SYS", "SYS"};
  }

  void add_ib(const std::string& name, int bus, int numa = 0) {
    test::fake_nic nic;
    nic.name = name;
    char pci[32];
    std::snprintf(pci, sizeof pci, "0000:%02x:00.0", bus);
    nic.pci = pci;
    nic.numa_node = numa;
    nic.sriov_totalvfs = 8;
    sys.add_nic(nic);
    metadata.nic_topology[name] = {"PXB", "SYS"};
  }

  void down(const std::string& name, const char* phys = "3: Disabled") {
    sys.set_state(name, 1, "1: DOWN", phys);
  }
  void up(const std::string& name) { sys.set_state(name, 1, "4: ACTIVE", "5: LinkUp"); }

  // Starts and runs the first poll, checking it is the expected baseline.
  void settle() {
    start();
    auto first = poll();
    ASSERT_TRUE(first.baseline);
  }
};

} // namespace vigil::agent::test_support
