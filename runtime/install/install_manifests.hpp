// `vigil install`: every object a cluster needs to run vigil, built from the
// effective configuration, so that what is deployed and what the processes
// read cannot disagree (the ports, the namespaces, the names of the reset
// script's ConfigMap and the Jobs' ServiceAccounts all come from vigil.yaml).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "messages/expected.hpp"
#include "runtime/install/manifest_yaml.hpp"

namespace vigil::install {

/// Where the agents read dcgm-exporter unless told otherwise: port 9400 of
/// the node's own IP, where an exporter on the host network (or with
/// hostPort 9400) answers. The agent's own default, localhost, is its pod's
/// loopback once installed, where no exporter runs.
inline constexpr std::string_view default_dcgm_url = "http://$(HOST_IP):9400/metrics";

struct install_options {
  /// Where the control plane, the agents and their accounts go; empty: the
  /// configuration's control.lease_namespace ("vigil" by default).
  std::string namespace_name;
  /// The image of every vigil container; empty: vigil:<version>.
  std::string image;
  /// The operator's vigil.yaml (empty: none, every default applies) and the
  /// name its errors are reported under.
  std::string config_text;
  std::string config_source = "vigil.yaml";
  /// The agents' dcgm-exporter page (`vigil agent --dcgm-url`); $(HOST_IP)
  /// is each node's IP, which the kubelet puts in the agent's arguments.
  /// "none": the agents read no exporter (--no-dcgm).
  std::string dcgm_url = std::string(default_dcgm_url);
};

struct install_result {
  std::vector<manifest> manifests;
  /// Where vigil install changed what the operator's file says (the keys it
  /// owns: mounted file paths, the Lease namespace), one line each.
  std::vector<std::string> notes;
};

/// The manifests in the order they can be applied: Namespaces, CRDs,
/// ServiceAccounts and RBAC, ConfigMaps, Services, workloads, disruption
/// budget, NetworkPolicies, monitoring. Fails, naming the key, on a
/// configuration vigil would refuse to start with or one a cluster
/// deployment cannot run (an SQLite journal under two replicas).
expected<install_result> install_manifests(const install_options& options);

} // namespace vigil::install
