#include "actors/agent/fabric/gpu_presence.hpp"

#include <cstdlib>
#include <set>
#include <utility>

#include "actors/agent/text_input.hpp"
#include "actors/agent/topology/gpu_metadata.hpp"
#include "actors/agent/xid/xid_catalog.hpp"

namespace vigil::agent {

namespace {

/// The XID whose action a GPU gone from nvidia-smi takes: "GPU has fallen
/// off the bus".
constexpr int fallen_off_the_bus_xid = 79;

constexpr std::string_view unreachable_prefix =
  "Unable to determine the device handle for GPU";

// nvidia-smi(1) RETURN VALUE 6, "object query unsuccessful": what it exits
// with when it prints "No devices were found".
constexpr int no_devices_status = 6;

// nvidia-smi(1) RETURN VALUE: the statuses that say the driver, not the setup, failed.
bool is_driver_status(int status) {
  return status == 9 || status == 10 || status == 15 || status == 255;
}

} // namespace

nvidia_smi_failure classify_nvidia_smi_failure(const failure& why) {
  const std::string_view what = why.what;
  if (what.rfind("timed out", 0) == 0)
    return nvidia_smi_failure::driver;
  constexpr std::string_view exited = "exited with status ";
  if (what.rfind(exited, 0) == 0) {
    const int status = std::atoi(std::string(what.substr(exited.size())).c_str());
    if (is_driver_status(status))
      return nvidia_smi_failure::driver;
    if (status == no_devices_status)
      return nvidia_smi_failure::no_devices;
  }
  return nvidia_smi_failure::setup;
}

split_answer split_unreachable(std::string_view answer) {
  split_answer out;
  while (!answer.empty()) {
    const auto end = answer.find('\n');
    const auto line = answer.substr(0, end);
    answer = end == std::string_view::npos ? std::string_view{} : answer.substr(end + 1);
    const auto text = trim_space(line);
    if (text.rfind(unreachable_prefix, 0) != 0) {
      out.rows.append(line.data(), line.size());
      out.rows += '\n';
      continue;
    }
    // "…for GPU0000:0B:00.0: Unknown Error": the address ends at ": ".
    auto address = trim_space(text.substr(unreachable_prefix.size()));
    address = address.substr(0, address.find(": "));
    if (!address.empty())
      out.unreachable.push_back(normalise_pci_address(address));
  }
  return out;
}

gpu_presence::gpu_presence(std::string node, std::vector<known_gpu> known,
                           const xid_catalog* catalog)
  : node_(std::move(node)), gone_action_(recommended_action::restart_bm) {
  if (catalog != nullptr)
    if (const auto* entry = catalog->find(fallen_off_the_bus_xid))
      if (auto action = action_for_bucket(entry->immediate))
        gone_action_ = *action;
  for (auto& gpu : known)
    if (!gpu.uuid.empty())
      gpu_at(gpu.uuid, gpu.pci);
}

health_event gpu_presence::make_event(std::string_view check, bool healthy,
                                      wall_time now) const {
  health_event e;
  e.agent = std::string(gpu_presence_agent_name);
  e.component_class = "GPU";
  e.check_name = std::string(check);
  e.is_healthy = healthy;
  e.node_name = node_;
  e.generated = now;
  e.metadata["source"] = "nvidia-smi";
  return e;
}

gpu_presence::gpu_state& gpu_presence::gpu_at(const std::string& uuid,
                                              const std::string& pci) {
  if (uuid.empty()) { // known only by its address: the GPU of that address, if any
    for (auto& [key, gpu] : gpus_)
      if (!pci.empty() && gpu.pci == pci)
        return gpu;
    auto& gpu = gpus_["pci/" + pci];
    gpu.pci = pci;
    return gpu;
  }
  auto known = gpus_.find(uuid);
  if (known == gpus_.end()) {
    // Listed at last, a GPU known only unreachable at that address takes
    // its UUID (and what was said of it).
    gpu_state adopted;
    if (auto by_address = gpus_.find("pci/" + pci);
        !pci.empty() && by_address != gpus_.end()) {
      adopted = by_address->second;
      gpus_.erase(by_address);
    }
    known = gpus_.emplace(uuid, std::move(adopted)).first;
  }
  auto& gpu = known->second;
  gpu.uuid = uuid;
  if (!pci.empty())
    gpu.pci = pci;
  return gpu;
}

std::vector<health_event>
gpu_presence::observe(const std::vector<fabric_row>& rows,
                      const std::vector<std::string>& unreachable, wall_time now) {
  std::vector<health_event> out;
  driver_failures_ = 0;
  if (driver_down_.value_or(true)) {
    auto e = make_event(nvidia_smi_check, true, now);
    e.message = driver_down_ ? "nvidia-smi answers again" : "nvidia-smi answers";
    out.push_back(std::move(e));
    driver_down_ = false;
  }
  std::set<std::string> listed;
  for (const auto& row : rows) {
    if (row.uuid.empty())
      continue;
    gpu_at(row.uuid, normalise_pci_address(row.pci));
    listed.insert(row.uuid);
  }
  std::set<std::string> unreachable_at(unreachable.begin(), unreachable.end());
  for (const auto& pci : unreachable)
    gpu_at("", pci);
  std::optional<health_event> first_healthy;
  for (auto& [key, gpu] : gpus_) {
    const bool there = !gpu.uuid.empty() && listed.count(gpu.uuid) > 0
                       && unreachable_at.count(gpu.pci) == 0;
    gpu.missing_readings = there ? 0 : gpu.missing_readings + 1;
    std::vector<entity> entities;
    if (!gpu.uuid.empty())
      entities.push_back({"GPU_UUID", gpu.uuid});
    if (!gpu.pci.empty())
      entities.push_back({"PCI", gpu.pci});
    if (there && gpu.gone.value_or(true)) {
      if (!gpu.gone) { // the first answer: one event for every GPU there
        if (!first_healthy) {
          first_healthy = make_event(gpu_presence_check, true, now);
          first_healthy->message = "listed by nvidia-smi";
        }
        first_healthy->entities.push_back({"GPU_UUID", gpu.uuid});
      } else {
        auto e = make_event(gpu_presence_check, true, now);
        e.entities = std::move(entities);
        e.message = "GPU " + gpu.uuid + " is listed by nvidia-smi again";
        out.push_back(std::move(e));
      }
      gpu.gone = false;
    } else if (!there && gpu.missing_readings >= readings_to_raise
               && !gpu.gone.value_or(false)) {
      auto e = make_event(gpu_presence_check, false, now);
      e.entities = std::move(entities);
      e.is_fatal = true;
      e.action = gone_action_;
      e.error_codes = {"GPU_MISSING"};
      const auto name = gpu.uuid.empty()
                          ? "at " + gpu.pci
                          : gpu.uuid + (gpu.pci.empty() ? "" : " (" + gpu.pci + ")");
      e.message = "GPU " + name
                  + (unreachable_at.count(gpu.pci) > 0
                       ? " is unreachable: nvidia-smi cannot get its device handle"
                       : " is gone from nvidia-smi's list")
                  + " in " + std::to_string(gpu.missing_readings)
                  + " readings in a row: fallen off the bus or lost by the driver";
      out.push_back(std::move(e));
      gpu.gone = true;
    }
  }
  if (first_healthy)
    out.push_back(std::move(*first_healthy));
  return out;
}

std::vector<health_event> gpu_presence::query_failed(const failure& why, wall_time now) {
  switch (classify_nvidia_smi_failure(why)) {
    case nvidia_smi_failure::no_devices: return observe({}, {}, now);
    case nvidia_smi_failure::setup: driver_failures_ = 0; return {};
    case nvidia_smi_failure::driver: break;
  }
  // A driver that stops answering, not one that never did since the agent
  // started: without a GPU listed (or collected into this boot's
  // gpu_metadata), a failing nvidia-smi may as well be the agent's setup,
  // and a whole fleet would be rebooted for it. A driver that did not load
  // at boot is the device inventory check's (a GPU of the last boot gone).
  if (gpus_.empty())
    return {};
  if (++driver_failures_ < readings_to_raise || driver_down_.value_or(false))
    return {};
  auto e = make_event(nvidia_smi_check, false, now);
  e.is_fatal = true;
  e.action = recommended_action::restart_bm;
  e.error_codes = {"NVIDIA_SMI_FAILED"};
  e.message = "nvidia-smi failed " + std::to_string(driver_failures_)
              + " times in a row (" + why.to_string() + "): the driver does not answer";
  driver_down_ = true;
  return {std::move(e)};
}

} // namespace vigil::agent
