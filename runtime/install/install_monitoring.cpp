// Prometheus Operator objects (ServiceMonitors, the PrometheusRule) and the
// Grafana dashboard: what an operator watches vigil with.
#include "runtime/install/install_assets.hpp"
#include "runtime/install/install_support.hpp"

namespace vigil::install::detail {

namespace {

std::string replace_all(std::string text, const std::string& from,
                        const std::string& to) {
  for (auto at = text.find(from); at != std::string::npos;
       at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

object service_monitor(const install_context& ctx, const std::string& name,
                       const std::string& component, object endpoint) {
  auto m = header("monitoring.coreos.com/v1", "ServiceMonitor", name, ctx.ns, component);
  m["spec"] = {{"selector", {{"matchLabels", selector_labels(component)}}},
               {"endpoints", object::array({std::move(endpoint)})}};
  return m;
}

} // namespace

std::vector<manifest> monitoring_manifests(const install_context& ctx) {
  std::vector<manifest> out;
  // The control plane's certificate is checked against the CA the agents
  // use; Prometheus reads the Secret from this namespace.
  out.push_back(
    {"The control plane's /metrics: the pipeline, the breaker, the journal and, with\n"
     "janitor.in_process, the gpu_reset_* and reboot_node_* series of seed 001.",
     service_monitor(
       ctx, "vigil-control", "control",
       {{"port", "https"},
        {"scheme", "https"},
        {"path", "/metrics"},
        {"interval", "30s"},
        // Prometheus's own ServiceAccount token, which vigil-control checks
        // by TokenReview against control.metrics_readers.
        {"bearerTokenFile", "/var/run/secrets/kubernetes.io/serviceaccount/token"},
        {"tlsConfig",
         {{"serverName", ctx.control_service_host()},
          {"ca", {{"secret", {{"name", control_ca_secret}, {"key", "ca.crt"}}}}}}}})});
  out.push_back(
    {"Every agent's /metrics (spool, send failures, monitors).",
     service_monitor(ctx, "vigil-agent", "agent",
                     {{"port", "metrics"}, {"path", "/metrics"}, {"interval", "30s"}})});
  if (!ctx.config.janitor.in_process)
    out.push_back({"The janitor's /metrics (gpu_reset_*, reboot_node_*).",
                   service_monitor(
                     ctx, "vigil-janitor", "janitor",
                     {{"port", "metrics"}, {"path", "/metrics"}, {"interval", "30s"}})});

  const auto rules_text = asset("vigil-rules.yaml");
  auto rules = parse_yaml(rules_text, "vigil-rules.yaml");
  rules["metadata"]["namespace"] = ctx.ns;
  // VigilJanitorUnavailable watches the Deployment that runs the controllers.
  const auto janitor = ctx.config.janitor.in_process ? "vigil-control" : "vigil-janitor";
  for (auto& group : rules["spec"]["groups"])
    for (auto& rule : group["rules"])
      if (rule.value("alert", "") == "VigilJanitorUnavailable")
        rule["expr"] = replace_all(
          replace_all(rule["expr"].get<std::string>(), "namespace=\"vigil\"",
                      "namespace=\"" + ctx.ns + "\""),
          "deployment=\"vigil-control\"", std::string("deployment=\"") + janitor + "\"");
  out.push_back({leading_comment(rules_text), std::move(rules)});

  auto dashboard = header("v1", "ConfigMap", "vigil-dashboard", ctx.ns, "control");
  // Grafana's dashboard sidecar loads ConfigMaps with this label.
  dashboard["metadata"]["labels"]["grafana_dashboard"] = "1";
  dashboard["data"] = {{"vigil.json", std::string(asset("vigil-dashboard.json"))}};
  out.push_back(
    {"Grafana: the pipeline (events, journal lag), quarantines and the breaker,\n"
     "drains, remediations, seed 001's gpu_reset_* panels and the agents.",
     std::move(dashboard)});
  return out;
}

} // namespace vigil::install::detail
