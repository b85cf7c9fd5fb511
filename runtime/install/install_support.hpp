// What the manifest builders of `vigil install` share: the settings every
// object is built from, and the metadata every object carries.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/config.hpp"
#include "runtime/install/install_manifests.hpp"
#include "runtime/install/manifest_yaml.hpp"

namespace vigil::install::detail {

/// Where the mounted Secrets and the ConfigMap appear in the containers; the
/// effective vigil.yaml points at these (install owns those keys).
inline constexpr const char* config_dir = "/etc/vigil";
inline constexpr const char* tls_dir = "/etc/vigil/tls";
inline constexpr const char* ca_dir = "/etc/vigil/ca";
inline constexpr const char* ingest_token_dir = "/var/run/vigil/ingest";
inline constexpr const char* agent_token_dir = "/var/run/secrets/vigil";

/// The Secrets the operator creates (README "Deploy to a cluster"); vigil
/// install never prints key material.
inline constexpr const char* ingest_token_secret = "vigil-ingest-token";
inline constexpr const char* control_tls_secret = "vigil-control-tls";
inline constexpr const char* control_ca_secret = "vigil-control-ca";
inline constexpr const char* journal_secret = "vigil-journal";

inline constexpr std::uint16_t agent_metrics_port = 2112;

/// The ServiceAccount that may read the control plane's /metrics unless the
/// configuration names others: kube-prometheus' Prometheus.
inline constexpr const char* default_metrics_reader = "monitoring/prometheus-k8s";

struct install_context {
  std::string ns;     // control plane, agents, their accounts
  std::string job_ns; // janitor.job_namespace: the privileged Jobs
  std::string image;
  std::string dcgm_url;    // the agents' --dcgm-url; "none": --no-dcgm
  vigil_config config;     // as the processes will read it
  std::string config_yaml; // the text of the vigil-config ConfigMap
  std::uint16_t control_port = 8443;
  std::uint16_t janitor_port = 8080;

  std::string control_service_host() const { return "vigil-control." + ns + ".svc"; }
};

/// The settings of an installation: the operator's vigil.yaml with the keys
/// install owns set, checked by the same parser the processes use. Where a
/// key the operator set was changed, `notes` says so.
expected<install_context> make_context(const install_options& options,
                                       std::vector<std::string>& notes);

/// The labels every object carries; `component` says which part of vigil.
object labels(const std::string& component);
/// The labels a workload's pods are selected by.
object selector_labels(const std::string& component);

/// apiVersion, kind and metadata (name, the namespace when not empty, labels).
object header(const std::string& api_version, const std::string& kind,
              const std::string& name, const std::string& ns,
              const std::string& component);

std::vector<manifest> namespace_manifests(const install_context& ctx);
std::vector<manifest> crd_manifests();
std::vector<manifest> rbac_manifests(const install_context& ctx);
std::vector<manifest> config_map_manifests(const install_context& ctx);
std::vector<manifest> workload_manifests(const install_context& ctx);
std::vector<manifest> network_policy_manifests(const install_context& ctx);
std::vector<manifest> monitoring_manifests(const install_context& ctx);

} // namespace vigil::install::detail
