// Where the API server is and how to authenticate: from a kubeconfig file
// (current-context or --context) or from inside a pod (service account).
#pragma once

#include <functional>
#include <string>

#include "messages/expected.hpp"

namespace vigil::kube {

/// Everything the client needs to connect. PEM data may come inline (*_data)
/// or from files (*_file); inline wins when both are set.
struct kube_connection {
  kube_connection() = default;
  /// Just a server: plain HTTP or a server the system CAs trust.
  explicit kube_connection(std::string url) : server(std::move(url)) {}

  std::string server; ///< "https://10.0.0.1:6443"
  std::string token;
  std::string token_file; ///< re-read whenever it changes (projected tokens rotate)
  std::string ca_file;
  std::string ca_data;
  std::string client_cert_file;
  std::string client_cert_data;
  std::string client_key_file;
  std::string client_key_data;
  bool insecure_skip_tls_verify = false;
  std::string default_namespace = "default";
  std::string source; ///< "kubeconfig /path (context ctx)" or "in-cluster"
};

/// Reads a kubeconfig. `context` overrides current-context. Relative file
/// paths are resolved against the kubeconfig's directory, as kubectl does.
/// Failures name the file and the field ("contexts[ctx].cluster: no cluster
/// named 'x'").
expected<kube_connection> load_kubeconfig(const std::string& path,
                                          const std::string& context = {});

/// Parses kubeconfig text (`origin` names it in errors and resolves paths).
expected<kube_connection> parse_kubeconfig(const std::string& yaml,
                                           const std::string& origin,
                                           const std::string& context = {});

using env_lookup = std::function<std::string(const std::string&)>;

/// In-cluster: KUBERNETES_SERVICE_HOST/PORT, the service account's token file
/// (kept as a path so rotation is seen), ca.crt and namespace.
expected<kube_connection> in_cluster_connection(
  const env_lookup& env,
  const std::string& account_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

/// kubectl's order: --kubeconfig, then $KUBECONFIG (first existing file of the
/// list), then in-cluster when KUBERNETES_SERVICE_HOST is set, then
/// ~/.kube/config.
expected<kube_connection> resolve_connection(const std::string& kubeconfig_flag,
                                             const std::string& context_flag,
                                             const env_lookup& env);

/// RFC 4648 base64 (kubeconfig *-data fields); whitespace ignored. A failure
/// for any other character.
expected<std::string> base64_decode(const std::string& text);

} // namespace vigil::kube
