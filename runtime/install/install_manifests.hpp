// `vigil install`: every object a cluster needs to run vigil, built from the
// effective configuration, so that what is deployed and what the processes
// read cannot disagree (the ports, the namespaces, the names of the reset
// script's ConfigMap and the Jobs' ServiceAccounts all come from vigil.yaml).
#pragma once

#include <string>
#include <vector>

#include "messages/expected.hpp"
#include "runtime/install/manifest_yaml.hpp"

namespace vigil::install {

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
