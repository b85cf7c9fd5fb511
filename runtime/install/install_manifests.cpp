#include "runtime/install/install_manifests.hpp"

#include "runtime/install/install_support.hpp"

namespace vigil::install {

namespace detail {

object labels(const std::string& component) {
  return {{"app.kubernetes.io/name", "vigil"},
          {"app.kubernetes.io/component", component}};
}

object selector_labels(const std::string& component) {
  return labels(component);
}

object header(const std::string& api_version, const std::string& kind,
              const std::string& name, const std::string& ns,
              const std::string& component) {
  object metadata = {{"name", name}};
  if (!ns.empty())
    metadata["namespace"] = ns;
  metadata["labels"] = labels(component);
  return {{"apiVersion", api_version}, {"kind", kind}, {"metadata", std::move(metadata)}};
}

} // namespace detail

expected<install_result> install_manifests(const install_options& options) {
  using namespace detail;
  install_result result;
  auto ctx = make_context(options, result.notes);
  if (!ctx)
    return ctx.error();
  for (auto part : {namespace_manifests(*ctx), crd_manifests(), rbac_manifests(*ctx),
                    config_map_manifests(*ctx), workload_manifests(*ctx),
                    network_policy_manifests(*ctx), monitoring_manifests(*ctx)})
    for (auto& m : part)
      result.manifests.push_back(std::move(m));
  return result;
}

} // namespace vigil::install
