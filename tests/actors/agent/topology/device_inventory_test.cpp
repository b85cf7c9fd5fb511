#include "actors/agent/topology/device_inventory.hpp"

#include <fstream>

#include <gtest/gtest.h>

#include "tests/support/fresh_directory.hpp"

namespace vigil::agent {
namespace {

const wall_time at = from_unix(1'800'000'000, 0);

device_inventory eight_gpus(const std::string& boot) {
  device_inventory inv;
  inv.boot_id = boot;
  for (int i = 0; i < 8; ++i)
    inv.gpus["GPU-" + std::to_string(i)] = "0000:1" + std::to_string(i) + ":00.0";
  inv.nics = {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"};
  return inv;
}

TEST(device_inventory, comes_from_the_metadata_gpus_with_a_uuid_and_its_nic_devices) {
  gpu_metadata m;
  m.gpus = {{0, "0000:18:00.0", 0, "GPU-a", "", "", "", {}},
            {1, "0000:2a:00.0", 0, "", "", "", "", {}}};
  m.nic_topology = {{"mlx5_0", {"0000:18:00.0"}}, {"mlx5_1", {}}};
  auto inv = inventory_of(m, "boot-1");
  EXPECT_EQ(inv.boot_id, "boot-1");
  EXPECT_EQ(inv.gpus, (std::map<std::string, std::string>{{"GPU-a", "0000:18:00.0"}}));
  EXPECT_EQ(inv.nics, (std::set<std::string>{"mlx5_0", "mlx5_1"}));
}

TEST(device_inventory, a_gpu_and_a_nic_missing_after_a_reboot_are_faults) {
  auto before = eight_gpus("boot-1");
  auto now = eight_gpus("boot-2");
  now.gpus.erase("GPU-3");
  now.nics.erase("mlx5_2");
  auto events = devices_missing_after_boot(before, now, "node-1", at);
  ASSERT_EQ(events.size(), 2u);
  const auto& gpu = events[0];
  EXPECT_EQ(gpu.component_class, "GPU");
  EXPECT_EQ(gpu.check_name, gpu_missing_check);
  EXPECT_TRUE(gpu.is_fatal);
  EXPECT_FALSE(gpu.is_healthy);
  EXPECT_EQ(gpu.action, recommended_action::replace_vm);
  EXPECT_EQ(gpu.node_name, "node-1");
  EXPECT_EQ(gpu.entities,
            (std::vector<entity>{{"GPU_UUID", "GPU-3"}, {"PCI", "0000:13:00.0"}}));
  EXPECT_EQ(gpu.id, "node-1/boot-2/gpu-missing/GPU-3");
  const auto& nic = events[1];
  EXPECT_EQ(nic.component_class, "NIC");
  EXPECT_EQ(nic.check_name, nic_missing_check);
  EXPECT_EQ(nic.entities, (std::vector<entity>{{"NIC", "mlx5_2"}}));
  // Every event survives the wire format.
  for (const auto& e : events)
    EXPECT_TRUE(decode_health_event(encode_health_event(e)).has_value());
}

TEST(device_inventory, nothing_on_a_first_start_the_same_boot_or_more_devices) {
  auto now = eight_gpus("boot-2");
  EXPECT_TRUE(devices_missing_after_boot({}, now, "n", at).empty());
  auto same_boot = eight_gpus("boot-2");
  same_boot.gpus["GPU-9"] = "0000:99:00.0"; // an agent restart says nothing
  EXPECT_TRUE(devices_missing_after_boot(same_boot, now, "n", at).empty());
  auto fewer = eight_gpus("boot-1");
  fewer.gpus.erase("GPU-0");
  EXPECT_TRUE(devices_missing_after_boot(fewer, now, "n", at).empty());
}

// A GPU swapped under RMA has a new UUID in the same slot; NIC names can be
// renumbered by a driver or udev change: neither is a missing device.
TEST(device_inventory, a_replaced_gpu_or_renamed_nics_are_not_missing) {
  auto before = eight_gpus("boot-1");
  auto now = eight_gpus("boot-2");
  const auto slot = now.gpus["GPU-3"];
  now.gpus.erase("GPU-3");
  now.gpus["GPU-new"] = slot;
  now.nics = {"mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7"};
  EXPECT_TRUE(devices_missing_after_boot(before, now, "n", at).empty());
}

TEST(device_inventory, an_inventory_that_could_not_be_taken_is_said_not_acted_on) {
  auto e = inventory_unchecked("node-1", "boot-2", "nvidia-smi timed out", at);
  EXPECT_FALSE(e.is_fatal);
  EXPECT_EQ(e.action, recommended_action::none);
  EXPECT_EQ(e.check_name, inventory_unchecked_check);
  EXPECT_NE(e.message.find("nvidia-smi timed out"), std::string::npos);
  EXPECT_TRUE(decode_health_event(encode_health_event(e)).has_value());
}

TEST(device_inventory, round_trips_through_its_file_and_names_what_is_wrong) {
  const auto path = test::fresh_directory() + "/device-inventory.json";
  auto none = load_device_inventory(path);
  ASSERT_TRUE(none.has_value());
  EXPECT_FALSE(none->has_value());
  auto inv = eight_gpus("boot-1");
  ASSERT_TRUE(save_device_inventory(path, inv).has_value());
  auto loaded = load_device_inventory(path);
  ASSERT_TRUE(loaded.has_value());
  ASSERT_TRUE(loaded->has_value());
  EXPECT_EQ(**loaded, inv);

  EXPECT_NE(decode_device_inventory("[1,2").error().to_string().find("JSON object"),
            std::string::npos);
  EXPECT_NE(decode_device_inventory("{}").error().to_string().find("bootId"),
            std::string::npos);
  EXPECT_NE(decode_device_inventory(R"({"bootId":"b","gpus":[1]})")
              .error()
              .to_string()
              .find("gpus"),
            std::string::npos);
  EXPECT_NE(decode_device_inventory(R"({"bootId":"b","nics":[7]})")
              .error()
              .to_string()
              .find("nics"),
            std::string::npos);
  std::ofstream(path) << "garbage";
  auto corrupt = load_device_inventory(path);
  ASSERT_FALSE(corrupt.has_value());
  EXPECT_NE(corrupt.error().to_string().find(path), std::string::npos);
}

} // namespace
} // namespace vigil::agent
