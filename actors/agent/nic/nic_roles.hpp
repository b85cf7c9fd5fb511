// Which NICs the monitor watches and whom they are compared with: the default
// route, the NUMA gate, role classification and card homogeneity (seed 002 §4).
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "actors/agent/topology/gpu_metadata.hpp"
#include "messages/expected.hpp"

namespace vigil::agent {

/// seed 002 §4.2.3: the three tiers. Management NICs are not monitored.
enum class nic_role { management, compute, storage };

/// "Management", "Compute", "Storage".
std::string_view to_string(nic_role role);

/// The interface of the default route in /proc/net/route text: destination
/// and mask 00000000, RTF_UP set, lowest metric first. "" when there is none
/// or the text is not a routing table.
std::string parse_default_route_interface(std::string_view route_text);

/// seed 002 §4.1.2: the distinct GPU NUMA nodes, ignoring -1 (unknown).
std::set<int> gpu_numa_set(const gpu_metadata& metadata);

/// seed 002 §4.2.4: BlueField-2 (MT41682, MT41686) and BlueField-3 (MT41692).
bool is_bluefield_dpu(std::string_view hca_type);

/// What classification needs to know about one NIC.
struct nic_facts {
  std::string name;
  int numa_node = -1;
  std::string link_layer; ///< "InfiniBand" or "Ethernet"
  std::string hca_type;
};

/// A role and the rule that chose it, for logs and the console.
struct nic_classification {
  nic_role role = nic_role::management;
  std::string reason;
};

/// seed 002 §4.1 and §4.2: classifies NICs against the GPU NUMA set, the
/// topo matrix and the default-route device.
class nic_classifier {
public:
  nic_classifier() = default;
  nic_classifier(std::set<int> gpu_numa,
                 std::map<std::string, std::vector<std::string>> topo,
                 std::string default_route_device);

  /// seed 002 §4.2.2, in order: default route → Management; NUMA not in the
  /// GPU set (or -1) → Management; any PIX/PXB → Compute; InfiniBand →
  /// Compute; any NODE/PHB → Storage; BlueField DPU → Management; else Storage.
  nic_classification classify(const nic_facts& nic) const;

  const std::string& default_route_device() const { return default_route_device_; }

private:
  std::set<int> gpu_numa_;
  std::map<std::string, std::vector<std::string>> topo_;
  std::string default_route_device_;
};

/// "0000:47:00.1" → "0000:47:00": the physical card (PCI bus:device) of a
/// function (seed 002 §4.3.2). "" when `pci_address` is not one.
std::string pci_card(std::string_view pci_address);

/// seed 002 §4.3.3: the most common value; on a tie the larger, so that a
/// card that lost a port is the one flagged.
int peer_mode(const std::vector<int>& active_counts);

/// One physical card in a role group, with its active (ACTIVE + LinkUp) ports.
struct card_ports {
  std::string card;
  nic_role role = nic_role::compute;
  int active_ports = 0;
};

/// A card's active-port count against its role group's mode.
struct card_verdict {
  std::string card;
  nic_role role = nic_role::compute;
  int active_ports = 0;
  int expected_ports = 0;
  bool anomalous = false;
};

/// seed 002 §4.3.3: the mode per role group; cards below it are anomalous.
std::vector<card_verdict> check_card_homogeneity(const std::vector<card_ports>& cards);

} // namespace vigil::agent
