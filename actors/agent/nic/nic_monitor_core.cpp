#include "actors/agent/nic/nic_monitor_core.hpp"

#include <algorithm>

namespace vigil::agent {

namespace {

bool matches_any(const std::vector<std::regex>& patterns, const std::string& name) {
  return !name.empty()
         && std::any_of(patterns.begin(), patterns.end(), [&](const std::regex& re) {
              return std::regex_search(name, re);
            });
}

} // namespace

status validate_nic_metadata(const gpu_metadata& metadata, const std::string& path,
                             bool inclusion_override) {
  // seed 002 §12.2 and §4 "hard dependency on metadata": no silent fallback.
  if (metadata.nic_topology.empty())
    return failure{path, "nic_topology is missing or empty; the NIC monitor needs the "
                         "GPU-NIC topology matrix of the metadata collector"};
  if (inclusion_override)
    return ok(); // the override skips the NUMA gate
  // seed 002 §4.1.2 GPU edge case: without GPU NUMA nodes the gate cannot
  // tell management NICs from compute NICs.
  if (gpu_numa_set(metadata).empty())
    return failure{path, "gpus[].numa_node: no GPU has a known NUMA node (all -1 or no "
                         "GPUs); cannot tell management NICs from compute NICs"};
  return ok();
}

expected<gpu_metadata> load_nic_metadata(const std::string& path,
                                         bool inclusion_override) {
  auto metadata = load_gpu_metadata(path);
  if (!metadata)
    return metadata.error(); // names the file already
  if (auto st = validate_nic_metadata(*metadata, path, inclusion_override); !st)
    return st.error();
  return metadata;
}

std::string resolve_default_route_device(const std::string& sysfs_root,
                                         const std::string& proc_net_route) {
  auto table = read_small_file(proc_net_route);
  if (!table)
    return "";
  return find_ib_device_for_interface(sysfs_root, parse_default_route_interface(*table));
}

expected<nic_poller> nic_poller::start(const nic_monitor_options& options,
                                       const gpu_metadata& metadata,
                                       const std::string& default_route_device,
                                       std::optional<nic_monitor_state> persisted) {
  const bool override = !options.nic_inclusion_regex_override.empty();
  if (auto st = validate_nic_metadata(metadata, options.metadata_path, override); !st)
    return st.error();
  if (options.node_name.empty())
    return failure{"--node-name", "not set"};
  auto exclusion =
    compile_name_patterns("--nic-exclusion-regex", options.nic_exclusion_regex);
  if (!exclusion)
    return exclusion.error();
  auto inclusion = compile_name_patterns("--nic-inclusion-regex-override",
                                         options.nic_inclusion_regex_override);
  if (!inclusion)
    return inclusion.error();
  nic_poller poller;
  poller.options_ = options;
  poller.classifier_ =
    nic_classifier{gpu_numa_set(metadata), metadata.nic_topology, default_route_device};
  poller.exclusion_ = std::move(*exclusion);
  poller.inclusion_override_ = std::move(*inclusion);
  poller.state_ = std::move(persisted);
  return poller;
}

std::optional<nic_classification> nic_poller::select(const nic_device& device,
                                                     nic_poll_result& result) const {
  if (!inclusion_override_.empty()) {
    // seed 002 §12.1 override: hand-pinned names; NUMA gate, topology and
    // exclusion skipped. Link layers stay apart for the homogeneity check.
    if (!matches_any(inclusion_override_, device.name))
      return std::nullopt;
    return result.roles[device.name] =
             device.link_layer() == "Ethernet"
               ? nic_classification{nic_role::storage, "inclusion override, Ethernet"}
               : nic_classification{nic_role::compute, "inclusion override"};
  }
  // seed 002 §12.1: excluded names are dropped before any classification.
  if (matches_any(exclusion_, device.name) || matches_any(exclusion_, device.net_dev))
    return std::nullopt;
  auto cls = classifier_.classify(
    {device.name, device.numa_node, device.link_layer(), device.hca_type});
  result.roles[device.name] = cls;
  return cls;
}

void add_gid_diagnostics(std::vector<health_event>& events, const std::string& sysfs_root,
                         std::vector<nic_diagnostic>& diagnostics) {
  for (auto& event : events) {
    auto layer = event.metadata.find("link_layer");
    if (layer == event.metadata.end() || layer->second != "Ethernet"
        || event.metadata.count("state") == 0)
      continue; // only RoCE port-state events
    std::string device, port;
    for (const auto& entity : event.entities) {
      if (entity.type == "NIC")
        device = entity.value;
      else if (entity.type == "NICPort")
        port = entity.value;
    }
    if (device.empty() || port.empty()
        || port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5)
      continue;
    auto table = read_gid_table(sysfs_root, device,
                                static_cast<unsigned>(std::stoul(port)), diagnostics);
    if (!table)
      continue;
    std::string ipv4;
    for (const auto& gid : *table)
      if (!gid.ipv4.empty() && ipv4.find(gid.ipv4) == std::string::npos)
        ipv4 += (ipv4.empty() ? "" : ",") + gid.ipv4;
    event.metadata["gid_count"] = std::to_string(table->size());
    event.metadata["gid_ipv4"] = ipv4;
    std::string problems;
    for (const auto& p : gid_problems(*table))
      problems += (problems.empty() ? "" : "; ") + p;
    if (!problems.empty())
      event.metadata["gid_problems"] = problems;
  }
}

expected<nic_poll_once_result> run_nic_poll_once(const nic_monitor_options& options,
                                                 wall_time now) {
  const bool override = !options.nic_inclusion_regex_override.empty();
  auto metadata = load_nic_metadata(options.metadata_path, override);
  if (!metadata)
    return metadata.error();
  nic_poll_once_result out;
  auto loaded = load_nic_state_file(options.state_file);
  if (loaded.problem)
    out.diagnostics.push_back(*loaded.problem);
  auto poller = nic_poller::start(
    options, *metadata,
    resolve_default_route_device(options.sysfs_root, options.proc_net_route),
    std::move(loaded.state));
  if (!poller)
    return poller.error();
  auto snapshot = read_nic_snapshot(options.sysfs_root);
  out.diagnostics.insert(out.diagnostics.end(), snapshot.diagnostics.begin(),
                         snapshot.diagnostics.end());
  std::string boot_id;
  if (auto id = read_boot_id(options.boot_id_path))
    boot_id = *id;
  else
    out.diagnostics.push_back(id.error());
  auto result = poller->poll(snapshot, boot_id, now);
  add_gid_diagnostics(result.events, options.sysfs_root, out.diagnostics);
  out.events = std::move(result.events);
  out.roles = std::move(result.roles);
  out.diagnostics.insert(out.diagnostics.end(), result.diagnostics.begin(),
                         result.diagnostics.end());
  if (poller->state())
    if (auto st = save_nic_state_file(options.state_file, *poller->state()); !st)
      out.diagnostics.push_back(st.error());
  return out;
}

} // namespace vigil::agent
