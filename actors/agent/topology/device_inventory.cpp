#include "actors/agent/topology/device_inventory.hpp"

#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "actors/agent/state_file.hpp"

namespace vigil::agent {

device_inventory inventory_of(const gpu_metadata& metadata, std::string boot_id) {
  device_inventory inventory;
  inventory.boot_id = std::move(boot_id);
  for (const auto& gpu : metadata.gpus)
    if (!gpu.uuid.empty())
      inventory.gpus[gpu.uuid] = gpu.pci_address;
  for (const auto& [device, gpus] : metadata.nic_topology)
    inventory.nics.insert(device);
  return inventory;
}

std::string encode_device_inventory(const device_inventory& inventory) {
  nlohmann::json j{
    {"bootId", inventory.boot_id}, {"gpus", inventory.gpus}, {"nics", inventory.nics}};
  return j.dump();
}

expected<device_inventory> decode_device_inventory(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object())
    return failure{"device inventory", "is not a JSON object"};
  device_inventory inventory;
  auto boot = j.find("bootId");
  if (boot == j.end() || !boot->is_string())
    return failure{"bootId", "missing or not a string"};
  inventory.boot_id = boot->get<std::string>();
  if (auto gpus = j.find("gpus"); gpus != j.end()) {
    if (!gpus->is_object())
      return failure{"gpus", "is not an object of UUID to PCI address"};
    for (const auto& [uuid, pci] : gpus->items()) {
      if (!pci.is_string())
        return failure{"gpus." + uuid, "is not a string"};
      inventory.gpus[uuid] = pci.get<std::string>();
    }
  }
  if (auto nics = j.find("nics"); nics != j.end()) {
    if (!nics->is_array())
      return failure{"nics", "is not an array of device names"};
    for (const auto& nic : *nics) {
      if (!nic.is_string())
        return failure{"nics", "holds something other than a device name"};
      inventory.nics.insert(nic.get<std::string>());
    }
  }
  return inventory;
}

expected<std::optional<device_inventory>> load_device_inventory(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return std::optional<device_inventory>{};
  std::ostringstream text;
  text << in.rdbuf();
  auto inventory = decode_device_inventory(text.str());
  if (!inventory)
    return failure{path, inventory.error().to_string()};
  return std::optional<device_inventory>{std::move(*inventory)};
}

status save_device_inventory(const std::string& path, const device_inventory& inventory) {
  return replace_file(path, encode_device_inventory(inventory));
}

namespace {

health_event missing(const std::string& node, wall_time at, const device_inventory& now) {
  health_event e;
  e.agent = inventory_agent;
  e.is_fatal = true;
  e.action = recommended_action::replace_vm;
  e.node_name = node;
  e.generated = at;
  e.metadata["bootId"] = now.boot_id;
  return e;
}

} // namespace

std::vector<health_event> devices_missing_after_boot(const device_inventory& before,
                                                     const device_inventory& now,
                                                     const std::string& node,
                                                     wall_time at) {
  std::vector<health_event> out;
  if (before.empty() || before.boot_id == now.boot_id)
    return out;
  // GPUs by bus address: a GPU swapped under RMA has a new UUID in the same
  // slot, and is not missing.
  std::set<std::string> present_slots;
  for (const auto& [uuid, pci] : now.gpus)
    present_slots.insert(pci);
  for (const auto& [uuid, pci] : before.gpus) {
    if (present_slots.count(pci) != 0)
      continue;
    auto e = missing(node, at, now);
    e.component_class = "GPU";
    e.check_name = gpu_missing_check;
    e.entities = {{"GPU_UUID", uuid}, {"PCI", pci}};
    e.message = "GPU " + uuid + " (" + pci
                + ") was present before the reboot and is missing after it";
    e.id = node + "/" + now.boot_id + "/gpu-missing/" + uuid;
    out.push_back(std::move(e));
  }
  // NICs by count first: device names can be renumbered (a driver or udev
  // change), which is no fault as long as none is gone.
  if (now.nics.size() >= before.nics.size())
    return out;
  for (const auto& nic : before.nics) {
    if (now.nics.count(nic) != 0)
      continue;
    auto e = missing(node, at, now);
    e.component_class = "NIC";
    e.check_name = nic_missing_check;
    e.entities = {{"NIC", nic}};
    e.message = "NIC " + nic + " was present before the reboot and is missing after it ("
                + std::to_string(now.nics.size()) + " of "
                + std::to_string(before.nics.size()) + " NICs now)";
    e.id = node + "/" + now.boot_id + "/nic-missing/" + nic;
    out.push_back(std::move(e));
  }
  return out;
}

health_event inventory_unchecked(const std::string& node, const std::string& boot_id,
                                 const std::string& why, wall_time at) {
  health_event e;
  e.agent = inventory_agent;
  e.component_class = "GPU";
  e.check_name = inventory_unchecked_check;
  e.is_fatal = false;
  e.action = recommended_action::none;
  e.node_name = node;
  e.generated = at;
  e.metadata["bootId"] = boot_id;
  e.message = "the GPUs and NICs after this reboot could not be listed (" + why
              + "); missing devices are not checked";
  e.id = node + "/" + boot_id + "/inventory-unchecked";
  return e;
}

} // namespace vigil::agent
