// The agent DaemonSet, the control plane's Deployment, Service and
// PodDisruptionBudget, the janitor when it runs on its own, and the
// NetworkPolicies around them.
#include "runtime/install/install_support.hpp"

namespace vigil::install::detail {

namespace {

using strings = std::vector<std::string>;

object volume_mount(const std::string& name, const std::string& path, bool read_only) {
  object m = {{"name", name}, {"mountPath", path}};
  if (read_only)
    m["readOnly"] = true;
  return m;
}

object host_path(const std::string& name, const std::string& path,
                 const std::string& type) {
  return {{"name", name}, {"hostPath", {{"path", path}, {"type", type}}}};
}

object secret_volume(const std::string& name, const std::string& secret) {
  return {{"name", name}, {"secret", {{"secretName", secret}}}};
}

object http_probe(const std::string& path, const std::string& port,
                  const std::string& scheme, int period, int timeout, int failures) {
  object get = {{"path", path}, {"port", port}};
  if (scheme != "HTTP")
    get["scheme"] = scheme;
  return {{"httpGet", get},
          {"periodSeconds", period},
          {"timeoutSeconds", timeout},
          {"failureThreshold", failures}};
}

object env_from_field(const std::string& name, const std::string& field) {
  return {{"name", name}, {"valueFrom", {{"fieldRef", {{"fieldPath", field}}}}}};
}

object port(const std::string& name, int number) {
  return {{"name", name}, {"containerPort", number}, {"protocol", "TCP"}};
}

object pod_template(const std::string& component, object spec) {
  return {{"metadata", {{"labels", selector_labels(component)}}},
          {"spec", std::move(spec)}};
}

// Non-root, read-only root file system, no privilege escalation, no
// capabilities: what the control plane and the janitor need.
object restricted_security() {
  return {{"runAsNonRoot", true},
          {"allowPrivilegeEscalation", false},
          {"readOnlyRootFilesystem", true},
          {"capabilities", {{"drop", strings{"ALL"}}}},
          {"seccompProfile", {{"type", "RuntimeDefault"}}}};
}

manifest agent_daemon_set(const install_context& ctx) {
  const auto metrics = std::to_string(agent_metrics_port);
  // With TokenReview the agent's credential is its own projected token, bound
  // to its pod (so to its node) and rotated by the kubelet; else the shared
  // static token.
  const auto& review = ctx.config.control.token_review;
  const std::string token_dir = review.enabled ? agent_token_dir : ingest_token_dir;
  object token_volume =
    review.enabled ? object{{"name", "agent-token"},
                            {"projected",
                             {{"sources", object::array({{{"serviceAccountToken",
                                                           {{"audience", review.audience},
                                                            {"expirationSeconds", 3600},
                                                            {"path", "token"}}}}})}}}}
                   : secret_volume("ingest-token", ingest_token_secret);
  object container = {
    {"name", "agent"},
    {"image", ctx.image},
    {"args",
     strings{
       "agent",
       "--control-url=https://" + ctx.control_service_host() + ":"
         + std::to_string(ctx.control_port),
       "--token-file=" + token_dir + "/token",
       "--ca-file=" + std::string(ca_dir) + "/ca.crt",
       "--state-dir=/var/lib/vigil",
       "--log-source=kmsg",
       "--log-path=/dev/kmsg",
       "--sysfs-root=/host/sys",
       "--proc-net-route=/host/proc/net/route",
       "--proc-root=/host/proc",
       "--boot-id-path=/host/proc/sys/kernel/random/boot_id",
       "--state-polling-interval=1s",
       "--nvidia-smi-timeout=30s",
       "--metrics-port=" + metrics,
       "--heartbeat-interval=60s",
       "--pod-resources-socket=/var/lib/kubelet/pod-resources/kubelet.sock",
       ctx.dcgm_url == "none" ? std::string("--no-dcgm") : "--dcgm-url=" + ctx.dcgm_url,
       // The same vigil.yaml as control: its dcgm: section is the agent's
       // DCGM thresholds.
       "--config",
       std::string(config_dir) + "/vigil.yaml",
     }},
    {"ports", object::array({port("metrics", agent_metrics_port)})},
    // Topology collection runs before the port opens: two nvidia-smi calls
    // of up to --nvidia-smi-timeout each. Every component answers within 2 s.
    {"startupProbe", http_probe("/healthz", "metrics", "HTTP", 5, 5, 24)},
    {"livenessProbe", http_probe("/healthz", "metrics", "HTTP", 20, 5, 3)},
    {"readinessProbe", http_probe("/healthz", "metrics", "HTTP", 10, 5, 1)},
    {"env",
     object::array({env_from_field("NODE_NAME", "spec.nodeName"),
                    // For $(HOST_IP) in --dcgm-url: the kubelet expands it.
                    env_from_field("HOST_IP", "status.hostIP"),
                    // The NVIDIA container runtime mounts nvidia-smi for the
                    // topology collector; no GPU is allocated to the agent.
                    {{"name", "NVIDIA_VISIBLE_DEVICES"}, {"value", "all"}},
                    {{"name", "NVIDIA_DRIVER_CAPABILITIES"}, {"value", "utility"}}})},
    // /dev/kmsg and nvidia-smi against every GPU; the image's user is 65532.
    {"securityContext", {{"privileged", true}, {"runAsUser", 0}}},
    // 20 MiB RSS measured on a 34-device node (BENCHMARKS.md).
    {"resources",
     {{"requests", {{"cpu", "20m"}, {"memory", "48Mi"}}},
      {"limits", {{"memory", "128Mi"}}}}},
    {"volumeMounts",
     object::array({volume_mount("sys", "/host/sys", true),
                    volume_mount("proc", "/host/proc", true),
                    volume_mount("kmsg", "/dev/kmsg", true),
                    volume_mount("state", "/var/lib/vigil", false),
                    volume_mount("pod-resources", "/var/lib/kubelet/pod-resources", true),
                    // /etc/vigil before the CA inside it, as control's
                    volume_mount("config", config_dir, true),
                    volume_mount(token_volume["name"], token_dir, true),
                    volume_mount("control-ca", ca_dir, true)})},
  };
  object spec = {
    {"serviceAccountName", "vigil-agent"},
    {"automountServiceAccountToken", false},
    {"priorityClassName", "system-node-critical"},
    {"nodeSelector", {{"nvidia.com/gpu.present", "true"}}},
    // A quarantined node must keep reporting, or its recovery is never seen.
    {"tolerations", object::array({{{"operator", "Exists"}}})},
    {"containers", object::array({container})},
    {"volumes",
     object::array(
       {host_path("sys", "/sys", "Directory"),
        host_path("proc", "/proc", "Directory"),
        host_path("kmsg", "/dev/kmsg", "CharDevice"),
        host_path("state", "/var/lib/vigil", "DirectoryOrCreate"),
        host_path("pod-resources", "/var/lib/kubelet/pod-resources", "Directory"),
        token_volume,
        secret_volume("control-ca", control_ca_secret),
        {{"name", "config"}, {"configMap", {{"name", "vigil-config"}}}}})},
  };
  auto ds = header("apps/v1", "DaemonSet", "vigil-agent", ctx.ns, "agent");
  ds["spec"] = {
    {"selector", {{"matchLabels", selector_labels("agent")}}},
    {"updateStrategy",
     {{"type", "RollingUpdate"}, {"rollingUpdate", {{"maxUnavailable", "10%"}}}}},
    {"template", pod_template("agent", std::move(spec))}};
  return {"`vigil agent` on every GPU node: the XID monitor (/dev/kmsg), the NIC\n"
          "monitor (seed 002: the host's /sys, routing table and boot ID), the\n"
          "kubelet's PodResources (which pod holds which GPU) and the forwarder to\n"
          "vigil-control. Its state (log position, NIC snapshots, counter baselines,\n"
          "the spool) stays on the host, so a new pod compares against what the old\n"
          "one saw (seed 002 §2.2). /healthz does not depend on the control plane:\n"
          "an outage must not restart every agent; events wait in the spool.",
          std::move(ds)};
}

manifest control_deployment(const install_context& ctx) {
  object container = {
    {"name", "control"},
    {"image", ctx.image},
    {"args", strings{"control", "--config", std::string(config_dir) + "/vigil.yaml"}},
    {"env",
     object::array(
       {env_from_field("POD_NAME", "metadata.name"),
        {{"name", "PGPASSWORD"},
         {"valueFrom",
          {{"secretKeyRef",
            {{"name", journal_secret}, {"key", "password"}, {"optional", true}}}}}}})},
    {"ports", object::array({port("https", ctx.control_port)})},
    // The standby answers /readyz 503, so the Service sends agents to the leader.
    {"readinessProbe", http_probe("/readyz", "https", "HTTPS", 5, 5, 1)},
    {"livenessProbe", http_probe("/healthz", "https", "HTTPS", 10, 5, 3)},
    {"securityContext", restricted_security()},
    // 12.4 KiB per idle node actor (BENCHMARKS.md): 10,000 nodes fit in about
    // 125 MiB beside the journal's queue; the limit leaves room for bursts.
    {"resources",
     {{"requests", {{"cpu", "100m"}, {"memory", "256Mi"}}},
      {"limits", {{"memory", "1Gi"}}}}},
    {"volumeMounts",
     object::array({volume_mount("config", config_dir, true),
                    volume_mount("tls", tls_dir, true),
                    volume_mount("ingest-token", ingest_token_dir, true)})},
  };
  object spec = {
    {"serviceAccountName", "vigil-control"},
    {"securityContext",
     {{"runAsNonRoot", true}, {"runAsUser", 65532}, {"fsGroup", 65532}}},
    // One replica per node, so a node's drain or reboot takes one at most.
    {"affinity",
     {{"podAntiAffinity",
       {{"preferredDuringSchedulingIgnoredDuringExecution",
         object::array(
           {{{"weight", 100},
             {"podAffinityTerm",
              {{"topologyKey", "kubernetes.io/hostname"},
               {"labelSelector", {{"matchLabels", selector_labels("control")}}}}}}})}}}}},
    {"containers", object::array({container})},
    {"volumes",
     object::array({{{"name", "config"}, {"configMap", {{"name", "vigil-config"}}}},
                    secret_volume("tls", control_tls_secret),
                    secret_volume("ingest-token", ingest_token_secret)})},
  };
  auto deployment = header("apps/v1", "Deployment", "vigil-control", ctx.ns, "control");
  deployment["spec"] = {{"replicas", 2},
                        {"selector", {{"matchLabels", selector_labels("control")}}},
                        {"template", pod_template("control", std::move(spec))}};
  return {"`vigil control`: two replicas, one acts (the Lease control.lease_name);\n"
          "both share the PostgreSQL journal (journal.url, the password from the\n"
          "Secret vigil-journal). Ingest, /metrics, /healthz and /readyz on HTTPS.",
          std::move(deployment)};
}

manifest janitor_deployment(const install_context& ctx) {
  object container = {
    {"name", "janitor"},
    {"image", ctx.image},
    {"args", strings{"janitor", "--config", std::string(config_dir) + "/vigil.yaml"}},
    {"ports", object::array({port("metrics", ctx.janitor_port)})},
    {"livenessProbe", http_probe("/healthz", "metrics", "HTTP", 10, 5, 3)},
    {"securityContext", restricted_security()},
    {"resources",
     {{"requests", {{"cpu", "20m"}, {"memory", "64Mi"}}},
      {"limits", {{"memory", "256Mi"}}}}},
    {"volumeMounts", object::array({volume_mount("config", config_dir, true)})},
  };
  object spec = {
    {"serviceAccountName", "vigil-janitor"},
    {"securityContext", {{"runAsNonRoot", true}, {"runAsUser", 65532}}},
    {"containers", object::array({container})},
    {"volumes",
     object::array({{{"name", "config"}, {"configMap", {{"name", "vigil-config"}}}}})},
  };
  auto deployment = header("apps/v1", "Deployment", "vigil-janitor", ctx.ns, "janitor");
  deployment["spec"] = {{"replicas", 1},
                        {"strategy", {{"type", "Recreate"}}},
                        {"selector", {{"matchLabels", selector_labels("janitor")}}},
                        {"template", pod_template("janitor", std::move(spec))}};
  return {
    "`vigil janitor` on its own (janitor.in_process: false). One replica, replaced\n"
    "rather than rolled: two controllers must never run the same reset.",
    std::move(deployment)};
}

object service(const std::string& name, const install_context& ctx,
               const std::string& component, const std::string& port_name, int number,
               bool headless) {
  auto s = header("v1", "Service", name, ctx.ns, component);
  s["spec"] = {{"selector", selector_labels(component)}};
  if (headless)
    s["spec"]["clusterIP"] = "None";
  s["spec"]["ports"] = object::array({{{"name", port_name},
                                       {"port", number},
                                       {"targetPort", port_name},
                                       {"protocol", "TCP"}}});
  return s;
}

} // namespace

std::vector<manifest> workload_manifests(const install_context& ctx) {
  std::vector<manifest> out;
  out.push_back(
    {"Agents post events and heartbeats here; the standby is not ready, so\n"
     "only the leader gets them.",
     service("vigil-control", ctx, "control", "https", ctx.control_port, false)});
  out.push_back(
    {"The agents' /metrics, for the ServiceMonitor (one endpoint per node).",
     service("vigil-agent-metrics", ctx, "agent", "metrics", agent_metrics_port, true)});
  if (!ctx.config.janitor.in_process)
    out.push_back(
      {"The janitor's /metrics (gpu_reset_*, reboot_node_*).",
       service("vigil-janitor", ctx, "janitor", "metrics", ctx.janitor_port, false)});
  out.push_back(agent_daemon_set(ctx));
  out.push_back(control_deployment(ctx));
  if (!ctx.config.janitor.in_process)
    out.push_back(janitor_deployment(ctx));
  auto pdb =
    header("policy/v1", "PodDisruptionBudget", "vigil-control", ctx.ns, "control");
  pdb["spec"] = {{"minAvailable", 1},
                 {"selector", {{"matchLabels", selector_labels("control")}}}};
  out.push_back(
    {"A drain or an upgrade keeps one control replica running.", std::move(pdb)});
  return out;
}

std::vector<manifest> network_policy_manifests(const install_context& ctx) {
  auto policy = [&](const std::string& name, const std::string& ns,
                    const std::string& component, object selector, object ingress) {
    auto p = header("networking.k8s.io/v1", "NetworkPolicy", name, ns, component);
    p["spec"] = {{"podSelector", std::move(selector)},
                 {"policyTypes", strings{"Ingress"}}};
    if (!ingress.empty())
      p["spec"]["ingress"] = std::move(ingress);
    return p;
  };
  auto open_port = [](const std::string& name) {
    return object::array(
      {{{"ports", object::array({{{"protocol", "TCP"}, {"port", name}}})}}});
  };
  std::vector<manifest> out;
  out.push_back(
    {"Nothing reaches vigil's pods but what the policies below allow. Egress\n"
     "is not restricted: the API server and the journal's PostgreSQL are\n"
     "outside any pod selector.",
     policy("vigil-default-deny-ingress", ctx.ns, "control", object::object(),
            object::array())});
  out.push_back(
    {"Ingest from the agents (bearer token, TLS) and /metrics from Prometheus,\n"
     "wherever they run.",
     policy("vigil-control-ingress", ctx.ns, "control",
            {{"matchLabels", selector_labels("control")}}, open_port("https"))});
  out.push_back(
    {"The agents' /metrics.",
     policy("vigil-agent-metrics-ingress", ctx.ns, "agent",
            {{"matchLabels", selector_labels("agent")}}, open_port("metrics"))});
  if (!ctx.config.janitor.in_process)
    out.push_back(
      {"The janitor's /metrics.",
       policy("vigil-janitor-metrics-ingress", ctx.ns, "janitor",
              {{"matchLabels", selector_labels("janitor")}}, open_port("metrics"))});
  if (ctx.job_ns != ctx.ns)
    out.push_back(
      {"The Jobs serve nothing.", policy("vigil-default-deny-ingress", ctx.job_ns,
                                         "janitor", object::object(), object::array())});
  return out;
}

} // namespace vigil::install::detail
