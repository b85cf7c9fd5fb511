// Shared pieces of the NIC monitor tests: metadata builders, a poller
// fixture over a fake sysfs tree, and event lookups.
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "actors/agent/nic/nic_monitor_core.hpp"
#include "messages/health_event.hpp"
#include "messages/wall_time.hpp"
#include "tests/support/fake_sysfs.hpp"

namespace vigil::agent::test_support {

inline gpu_info gpu(int id, int numa) {
  gpu_info g;
  g.gpu_id = id;
  char pci[32];
  std::snprintf(pci, sizeof pci, "0000:%02x:00.0", 0x80 + id);
  g.pci_address = pci;
  g.numa_node = numa;
  g.uuid = "GPU-" + std::to_string(id);
  return g;
}

/// Events about one NIC (any entity "NIC" with that value).
inline std::vector<health_event> about(const std::vector<health_event>& events,
                                       const std::string& device) {
  std::vector<health_event> out;
  for (const auto& e : events)
    for (const auto& ent : e.entities)
      if (ent.type == "NIC" && ent.value == device) {
        out.push_back(e);
        break;
      }
  return out;
}

inline std::string describe(const std::vector<health_event>& events) {
  std::string out;
  for (const auto& e : events)
    out +=
      "\n  " + e.check_name + (e.is_healthy ? " healthy: " : " unhealthy: ") + e.message;
  return out.empty() ? " (no events)" : out;
}

/// A poller over a fake sysfs tree, with a clock that only moves when told.
class nic_fixture : public ::testing::Test {
protected:
  void SetUp() override {
    options.node_name = "gpu-node-42";
    options.sysfs_root = sys.root();
    options.metadata_path = sys.path("gpu_metadata.json");
    options.state_file = sys.path("state.json");
    options.boot_id_path = sys.path("boot_id");
    options.proc_net_route = sys.path("route");
  }

  /// Starts (or restarts, as a new pod would) the poller.
  void start(std::optional<nic_monitor_state> persisted = std::nullopt,
             const std::string& default_route_device = "") {
    auto started =
      nic_poller::start(options, metadata, default_route_device, std::move(persisted));
    ASSERT_TRUE(started.has_value()) << started.error().to_string();
    poller.emplace(std::move(*started));
  }

  /// A pod restart on the same host: the new poller gets the old state.
  void restart() {
    auto state = poller->state();
    poller.reset();
    start(state);
  }

  /// One poll `seconds` after the previous one.
  nic_poll_result poll(int seconds = 1) {
    now += std::chrono::seconds(seconds);
    last = poller->poll(read_nic_snapshot(sys.root()), boot_id, now);
    return last;
  }

  test::fake_sysfs sys;
  gpu_metadata metadata;
  nic_monitor_options options;
  std::optional<nic_poller> poller;
  std::string boot_id = "boot-1";
  wall_time now = from_unix(1760000000, 0);
  nic_poll_result last;
};

} // namespace vigil::agent::test_support
