#include "actors/agent/nic/nic_roles.hpp"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <sstream>

namespace vigil::agent {

namespace {

bool has_level(const std::vector<std::string>& row,
               std::initializer_list<const char*> levels) {
  return std::any_of(row.begin(), row.end(), [&](const std::string& level) {
    return std::any_of(levels.begin(), levels.end(),
                       [&](const char* wanted) { return level == wanted; });
  });
}

bool parse_hex(const std::string& text, unsigned long& out) {
  if (text.empty() || text.size() > 16)
    return false;
  char* end = nullptr;
  out = std::strtoul(text.c_str(), &end, 16);
  return end == text.c_str() + text.size();
}

} // namespace

std::string_view to_string(nic_role role) {
  switch (role) {
    case nic_role::management: return "Management";
    case nic_role::compute: return "Compute";
    case nic_role::storage: return "Storage";
  }
  return "Management";
}

std::string parse_default_route_interface(std::string_view route_text) {
  // Iface Destination Gateway Flags RefCnt Use Metric Mask MTU Window IRTT
  constexpr unsigned long rtf_up = 0x1;
  std::istringstream in{std::string(route_text)};
  std::string line;
  std::string best;
  unsigned long best_metric = std::numeric_limits<unsigned long>::max();
  while (std::getline(in, line)) {
    std::istringstream fields{line};
    std::string iface, destination, gateway, flags, refcnt, use, metric, mask;
    if (!(fields >> iface >> destination >> gateway >> flags >> refcnt >> use >> metric
          >> mask))
      continue;
    unsigned long flag_bits = 0;
    unsigned long metric_value = 0;
    if (!parse_hex(flags, flag_bits) || (flag_bits & rtf_up) == 0)
      continue; // the header line fails here too
    if (destination != "00000000" || mask != "00000000")
      continue;
    char* end = nullptr;
    metric_value = std::strtoul(metric.c_str(), &end, 10);
    if (end != metric.c_str() + metric.size())
      continue;
    if (best.empty() || metric_value < best_metric) {
      best = iface;
      best_metric = metric_value;
    }
  }
  return best;
}

std::set<int> gpu_numa_set(const gpu_metadata& metadata) {
  std::set<int> out;
  for (const auto& gpu : metadata.gpus)
    if (gpu.numa_node >= 0)
      out.insert(gpu.numa_node);
  return out;
}

bool is_bluefield_dpu(std::string_view hca_type) {
  return hca_type == "MT41682" || hca_type == "MT41686" || hca_type == "MT41692";
}

nic_classifier::nic_classifier(std::set<int> gpu_numa,
                               std::map<std::string, std::vector<std::string>> topo,
                               std::string default_route_device)
  : gpu_numa_(std::move(gpu_numa)), topo_(std::move(topo)),
    default_route_device_(std::move(default_route_device)) {}

nic_classification nic_classifier::classify(const nic_facts& nic) const {
  // seed 002 §4.2.2 step 1: the default-route NIC carries host networking.
  if (!default_route_device_.empty() && nic.name == default_route_device_)
    return {nic_role::management, "carries the default route"};
  // seed 002 §4.1.2: a NIC on a NUMA node without GPUs, or of unknown NUMA
  // (-1, §4.1.2 NIC edge case), is a management NIC.
  if (nic.numa_node < 0)
    return {nic_role::management, "NUMA node unknown (-1)"};
  if (gpu_numa_.count(nic.numa_node) == 0)
    return {nic_role::management,
            "NUMA node " + std::to_string(nic.numa_node) + " has no GPU"};
  static const std::vector<std::string> no_row;
  auto it = topo_.find(nic.name);
  const auto& row = it == topo_.end() ? no_row : it->second;
  if (has_level(row, {"PIX", "PXB"}))
    return {nic_role::compute, "PIX/PXB to a GPU"};
  if (nic.link_layer == "InfiniBand")
    return {nic_role::compute, "InfiniBand link layer"};
  if (has_level(row, {"NODE", "PHB"}))
    return {nic_role::storage, "NODE/PHB to a GPU, Ethernet"};
  // seed 002 §4.2.4: in the all-SYS branch a BlueField DPU is management.
  if (is_bluefield_dpu(nic.hca_type))
    return {nic_role::management, "BlueField DPU (" + nic.hca_type + ")"};
  return {nic_role::storage, it == topo_.end() ? "no nic_topology row, Ethernet"
                                               : "all-SYS fallback, Ethernet"};
}

std::string pci_card(std::string_view pci_address) {
  auto normal = normalise_pci_address(pci_address);
  auto dot = normal.rfind('.');
  return dot == std::string::npos ? "" : normal.substr(0, dot);
}

int peer_mode(const std::vector<int>& active_counts) {
  std::map<int, int> frequency;
  for (int count : active_counts)
    ++frequency[count];
  int mode = 0;
  int best = 0;
  for (const auto& [count, times] : frequency) // ascending: ties keep the larger
    if (times >= best) {
      mode = count;
      best = times;
    }
  return mode;
}

std::vector<card_verdict> check_card_homogeneity(const std::vector<card_ports>& cards) {
  std::map<nic_role, std::vector<int>> counts;
  for (const auto& card : cards)
    counts[card.role].push_back(card.active_ports);
  std::vector<card_verdict> out;
  for (const auto& card : cards) {
    const int mode = peer_mode(counts[card.role]);
    out.push_back(
      {card.card, card.role, card.active_ports, mode, card.active_ports < mode});
  }
  return out;
}

} // namespace vigil::agent
