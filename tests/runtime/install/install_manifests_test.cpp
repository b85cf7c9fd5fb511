// `vigil install`'s manifests: complete, least-privilege, consistent with
// the configuration the processes will read, and refused with the key's
// name when the configuration cannot run on a cluster.
#include <algorithm>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "runtime/config.hpp"
#include "runtime/install/install_manifests.hpp"

namespace vigil::install {
namespace {

install_result install(install_options options = {}) {
  auto result = install_manifests(options);
  EXPECT_TRUE(result.has_value()) << (result ? "" : result.error().to_string());
  return result ? *result : install_result{};
}

const object* find(const install_result& r, const std::string& kind,
                   const std::string& name, const std::string& ns = "") {
  for (const auto& m : r.manifests) {
    const auto& meta = m.body["metadata"];
    if (m.body["kind"] == kind && meta["name"] == name
        && (ns.empty() || meta.value("namespace", "") == ns))
      return &m.body;
  }
  return nullptr;
}

std::vector<const object*> all_of(const install_result& r, const std::string& kind) {
  std::vector<const object*> out;
  for (const auto& m : r.manifests)
    if (m.body["kind"] == kind)
      out.push_back(&m.body);
  return out;
}

const object& pod_spec(const object& workload) {
  return workload["spec"]["template"]["spec"];
}

bool cluster_scoped(const std::string& kind) {
  static const std::set<std::string> kinds{"Namespace", "CustomResourceDefinition",
                                           "ClusterRole", "ClusterRoleBinding"};
  return kinds.count(kind) > 0;
}

TEST(install_manifests, every_object_a_cluster_needs) {
  auto r = install();
  for (const auto& [kind, name, ns] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
         {"Namespace", "vigil", ""},
         {"Namespace", "vigil-system", ""},
         {"CustomResourceDefinition", "gpuresets.vigil.dev", ""},
         {"CustomResourceDefinition", "rebootnodes.vigil.dev", ""},
         {"CustomResourceDefinition", "terminatenodes.vigil.dev", ""},
         {"ServiceAccount", "vigil-control", "vigil"},
         {"ServiceAccount", "vigil-agent", "vigil"},
         {"ServiceAccount", "vigil-gpu-reset", "vigil-system"},
         {"ServiceAccount", "vigil-reboot", "vigil-system"},
         {"ClusterRole", "vigil-control", ""},
         {"ClusterRole", "vigil-janitor", ""},
         {"Role", "vigil-control-lease", "vigil"},
         {"Role", "vigil-janitor-jobs", "vigil-system"},
         {"ConfigMap", "vigil-config", "vigil"},
         {"ConfigMap", "vigil-gpu-reset-script", "vigil-system"},
         {"ConfigMap", "vigil-dashboard", "vigil"},
         {"DaemonSet", "vigil-agent", "vigil"},
         {"Deployment", "vigil-control", "vigil"},
         {"Service", "vigil-control", "vigil"},
         {"PodDisruptionBudget", "vigil-control", "vigil"},
         {"NetworkPolicy", "vigil-default-deny-ingress", "vigil"},
         {"ServiceMonitor", "vigil-control", "vigil"},
         {"ServiceMonitor", "vigil-agent", "vigil"},
         {"PrometheusRule", "vigil-gpu-reset", "vigil"}})
    EXPECT_NE(find(r, kind, name, ns), nullptr) << kind << " " << ns << "/" << name;
  // janitor.in_process (the default): no janitor Deployment.
  EXPECT_EQ(find(r, "Deployment", "vigil-janitor"), nullptr);
  for (const auto& m : r.manifests) {
    const std::string kind = m.body["kind"];
    EXPECT_TRUE(m.body.contains("apiVersion")) << kind;
    EXPECT_FALSE(m.body["metadata"].value("name", "").empty()) << kind;
    EXPECT_EQ(m.body["metadata"].contains("namespace"), !cluster_scoped(kind))
      << kind << " " << m.body["metadata"]["name"];
  }
}

TEST(install_manifests, the_order_applies_namespaces_and_crds_first) {
  auto r = install();
  ASSERT_GE(r.manifests.size(), 5u);
  EXPECT_EQ(r.manifests[0].body["kind"], "Namespace");
  EXPECT_EQ(r.manifests[1].body["kind"], "Namespace");
  EXPECT_EQ(r.manifests[2].body["kind"], "CustomResourceDefinition");
}

TEST(install_manifests, rbac_names_every_verb_and_resource_and_the_agent_holds_none) {
  auto r = install();
  for (const char* kind : {"ClusterRole", "Role"})
    for (const auto* role : all_of(r, kind))
      for (const auto& rule : (*role)["rules"])
        for (const char* field : {"apiGroups", "resources", "verbs", "resourceNames"})
          for (const auto& value : rule.value(field, object::array()))
            EXPECT_NE(value, "*") << (*role)["metadata"]["name"] << " " << field;
  for (const char* kind : {"ClusterRoleBinding", "RoleBinding"})
    for (const auto* binding : all_of(r, kind))
      for (const auto& subject : (*binding)["subjects"])
        EXPECT_NE(subject["name"], "vigil-agent") << (*binding)["metadata"]["name"];
  const auto* agent = find(r, "ServiceAccount", "vigil-agent");
  ASSERT_NE(agent, nullptr);
  EXPECT_EQ((*agent)["automountServiceAccountToken"], false);
  for (const char* job_account : {"vigil-gpu-reset", "vigil-reboot"})
    EXPECT_EQ((*find(r, "ServiceAccount", job_account))["automountServiceAccountToken"],
              false);
  const auto& jobs_rules = (*find(r, "Role", "vigil-janitor-jobs"))["rules"];
  EXPECT_EQ(jobs_rules[2]["resourceNames"], object::array({"vigil-gpu-reset-script"}));
}

TEST(install_manifests, every_account_and_config_map_a_pod_uses_exists) {
  auto r = install({"", "", "janitor:\n  in_process: false\n", "vigil.yaml"});
  for (const char* kind : {"DaemonSet", "Deployment"})
    for (const auto* workload : all_of(r, kind)) {
      const auto& spec = pod_spec(*workload);
      const std::string ns = (*workload)["metadata"]["namespace"];
      EXPECT_NE(find(r, "ServiceAccount", spec["serviceAccountName"], ns), nullptr)
        << (*workload)["metadata"]["name"];
      std::set<std::string> volumes;
      for (const auto& volume : spec["volumes"]) {
        volumes.insert(volume["name"].get<std::string>());
        if (volume.contains("configMap")) {
          EXPECT_NE(find(r, "ConfigMap", volume["configMap"]["name"], ns), nullptr)
            << volume;
        }
      }
      // Every mount names a volume of the pod.
      for (const auto& container : spec["containers"])
        for (const auto& mount : container["volumeMounts"])
          EXPECT_EQ(volumes.count(mount["name"].get<std::string>()), 1u)
            << (*workload)["metadata"]["name"] << " mounts " << mount["name"];
    }
}

TEST(install_manifests, the_config_map_is_what_the_control_plane_reads) {
  auto r = install();
  const auto* cm = find(r, "ConfigMap", "vigil-config", "vigil");
  ASSERT_NE(cm, nullptr);
  auto config = parse_config((*cm)["data"]["vigil.yaml"].get<std::string>());
  ASSERT_TRUE(config.has_value()) << config.error().to_string();
  EXPECT_EQ(config->control.lease_namespace, "vigil");
  EXPECT_EQ(config->control.tls_cert_file, "/etc/vigil/tls/tls.crt");
  EXPECT_EQ(config->control.tls_key_file, "/etc/vigil/tls/tls.key");
  EXPECT_EQ(config->control.token_file, "/var/run/vigil/ingest/token");
  EXPECT_EQ(config->journal.url.rfind("postgresql://", 0), 0u);
  EXPECT_TRUE(config->control.token_review.enabled);

  // Each path it names is where the Deployment mounts the Secret.
  const auto& container =
    pod_spec(*find(r, "Deployment", "vigil-control"))["containers"][0];
  std::set<std::string> mounts;
  for (const auto& m : container["volumeMounts"])
    mounts.insert(m["mountPath"].get<std::string>());
  EXPECT_TRUE(mounts.count("/etc/vigil/tls"));
  EXPECT_TRUE(mounts.count("/var/run/vigil/ingest"));
  EXPECT_TRUE(mounts.count("/etc/vigil"));
  EXPECT_EQ(container["args"],
            object::array({"control", "--config", "/etc/vigil/vigil.yaml"}));
  const auto* script = find(r, "ConfigMap", "vigil-gpu-reset-script", "vigil-system");
  ASSERT_NE(script, nullptr);
  EXPECT_EQ((*script)["data"]["gpu-reset.sh"].get<std::string>().rfind("#!/", 0), 0u);
}

TEST(install_manifests, the_namespace_flag_moves_everything_and_the_lease) {
  install_options options;
  options.namespace_name = "ops";
  options.image = "registry.example/vigil:1.2";
  auto r = install(options);
  EXPECT_NE(find(r, "Namespace", "ops"), nullptr);
  EXPECT_EQ(find(r, "Namespace", "vigil"), nullptr);
  for (const auto& m : r.manifests) {
    const auto ns = m.body["metadata"].value("namespace", "");
    EXPECT_TRUE(ns.empty() || ns == "ops" || ns == "vigil-system") << m.body["metadata"];
  }
  for (const auto* binding : all_of(r, "ClusterRoleBinding"))
    EXPECT_EQ((*binding)["subjects"][0]["namespace"], "ops");
  auto config =
    parse_config((*find(r, "ConfigMap", "vigil-config"))["data"]["vigil.yaml"]);
  ASSERT_TRUE(config.has_value());
  EXPECT_EQ(config->control.lease_namespace, "ops");
  const auto& agent = pod_spec(*find(r, "DaemonSet", "vigil-agent"))["containers"][0];
  EXPECT_EQ(agent["image"], "registry.example/vigil:1.2");
  EXPECT_EQ(agent["args"][1], "--control-url=https://vigil-control.ops.svc:8443");
  // The agent reads the same vigil.yaml (its dcgm: thresholds).
  const auto& args = agent["args"];
  auto config_flag = std::find(args.begin(), args.end(), "--config");
  ASSERT_NE(config_flag, args.end());
  EXPECT_EQ(*std::next(config_flag), "/etc/vigil/vigil.yaml");
}

TEST(install_manifests, ports_come_from_the_configuration) {
  auto r = install({"", "", "control:\n  listen: 0.0.0.0:9443\n", "mine.yaml"});
  const auto& control =
    pod_spec(*find(r, "Deployment", "vigil-control"))["containers"][0];
  EXPECT_EQ(control["ports"][0]["containerPort"], 9443);
  EXPECT_EQ((*find(r, "Service", "vigil-control"))["spec"]["ports"][0]["port"], 9443);
  const auto& agent = pod_spec(*find(r, "DaemonSet", "vigil-agent"))["containers"][0];
  EXPECT_EQ(agent["args"][1], "--control-url=https://vigil-control.vigil.svc:9443");
}

TEST(install_manifests, the_agent_runs_everywhere_with_the_host_paths_it_reads) {
  auto r = install();
  const auto& spec = pod_spec(*find(r, "DaemonSet", "vigil-agent"));
  EXPECT_EQ(spec["tolerations"], object::array({{{"operator", "Exists"}}}));
  std::set<std::string> host_paths;
  for (const auto& v : spec["volumes"])
    if (v.contains("hostPath"))
      host_paths.insert(v["hostPath"]["path"].get<std::string>());
  EXPECT_EQ(host_paths,
            (std::set<std::string>{"/dev/kmsg", "/sys", "/proc", "/var/lib/vigil",
                                   "/var/lib/kubelet/pod-resources"}));
  const auto& control = *find(r, "Deployment", "vigil-control");
  EXPECT_EQ(control["spec"]["replicas"], 2);
  EXPECT_EQ(pod_spec(control)["containers"][0]["readinessProbe"]["httpGet"]["path"],
            "/readyz");
  EXPECT_EQ((*find(r, "PodDisruptionBudget", "vigil-control"))["spec"]["minAvailable"],
            1);
}

// The agent's pod has its own network: its localhost is not the node's, and
// an exporter on the host network answers at the node's IP, which the
// kubelet puts in the arguments.
TEST(install_manifests, the_agent_reads_dcgm_exporter_at_its_nodes_ip) {
  auto agent_of = [](const install_result& r) {
    return pod_spec(*find(r, "DaemonSet", "vigil-agent"))["containers"][0];
  };
  auto has = [](const object& args, const std::string& arg) {
    return std::find(args.begin(), args.end(), arg) != args.end();
  };
  auto agent = agent_of(install());
  EXPECT_TRUE(has(agent["args"], "--dcgm-url=http://$(HOST_IP):9400/metrics"));
  bool host_ip = false;
  for (const auto& env : agent["env"])
    host_ip = host_ip
              || (env["name"] == "HOST_IP"
                  && env["valueFrom"]["fieldRef"]["fieldPath"] == "status.hostIP");
  EXPECT_TRUE(host_ip);

  install_options service;
  service.dcgm_url = "http://nvidia-dcgm-exporter.gpu-operator.svc:9400/metrics";
  EXPECT_TRUE(has(agent_of(install(service))["args"], "--dcgm-url=" + service.dcgm_url));
  install_options none;
  none.dcgm_url = "none";
  const auto args = agent_of(install(none))["args"];
  EXPECT_TRUE(has(args, "--no-dcgm"));
  for (const auto& arg : args)
    EXPECT_EQ(arg.get<std::string>().rfind("--dcgm-url", 0), std::string::npos);

  install_options bad;
  bad.dcgm_url = "localhost:9400";
  auto refused = install_manifests(bad);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().to_string().find("--dcgm-url"), std::string::npos);
}

// Each agent proves its node with its own projected token (TokenReview);
// the shared static token only where the configuration turns that off.
TEST(install_manifests, agents_authenticate_with_a_projected_token) {
  auto token_volume = [](const install_result& r) {
    for (const auto& v : pod_spec(*find(r, "DaemonSet", "vigil-agent"))["volumes"])
      if (v["name"] == "agent-token" || v["name"] == "ingest-token")
        return v;
    return object{};
  };
  auto has_arg = [](const install_result& r, const std::string& arg) {
    const auto& args =
      pod_spec(*find(r, "DaemonSet", "vigil-agent"))["containers"][0]["args"];
    return std::find(args.begin(), args.end(), arg) != args.end();
  };
  auto r = install();
  const auto projected =
    token_volume(r)["projected"]["sources"][0]["serviceAccountToken"];
  EXPECT_EQ(projected["audience"], "vigil");
  EXPECT_EQ(projected["expirationSeconds"], 3600);
  EXPECT_TRUE(has_arg(r, "--token-file=/var/run/secrets/vigil/token"));
  bool may_review = false;
  for (const auto& rule : (*find(r, "ClusterRole", "vigil-control"))["rules"])
    may_review = may_review || rule["resources"] == object::array({"tokenreviews"});
  EXPECT_TRUE(may_review);

  auto shared =
    install({"", "", "control:\n  token_review:\n    enabled: false\n", "old.yaml"});
  EXPECT_EQ(token_volume(shared)["secret"]["secretName"], "vigil-ingest-token");
  EXPECT_TRUE(has_arg(shared, "--token-file=/var/run/vigil/ingest/token"));
  auto config =
    parse_config((*find(shared, "ConfigMap", "vigil-config"))["data"]["vigil.yaml"]);
  ASSERT_TRUE(config.has_value());
  EXPECT_FALSE(config->control.token_review.enabled);
}

TEST(install_manifests, a_separate_janitor_gets_its_deployment_and_account) {
  auto r = install(
    {"", "", "janitor:\n  in_process: false\n  listen: 0.0.0.0:9090\n", "j.yaml"});
  const auto* janitor = find(r, "Deployment", "vigil-janitor", "vigil");
  ASSERT_NE(janitor, nullptr);
  EXPECT_EQ(pod_spec(*janitor)["containers"][0]["ports"][0]["containerPort"], 9090);
  EXPECT_EQ((*find(r, "ClusterRoleBinding", "vigil-janitor"))["subjects"][0]["name"],
            "vigil-janitor");
  EXPECT_NE(find(r, "ServiceMonitor", "vigil-janitor"), nullptr);
}

// issue 19: the CR kinds of remediation.custom_actions are created and read
// by vigil-control, one rule per group; their controllers are the operator's.
TEST(install_manifests, custom_remediation_kinds_are_granted_to_the_control_plane) {
  auto r = install({"", "",
                    "remediation:\n  custom_actions:\n"
                    "    - {name: A, api_version: repair.example.com/v1, kind: Fix, "
                    "plural: fixes}\n"
                    "    - {name: B, api_version: repair.example.com/v2, kind: Fix, "
                    "plural: fixes}\n"
                    "    - {name: C, api_version: net.example.org/v1, kind: Reflash, "
                    "plural: reflashes}\n",
                    "c.yaml"});
  const auto* control = find(r, "ClusterRole", "vigil-control");
  ASSERT_NE(control, nullptr);
  std::vector<std::string> granted;
  for (const auto& rule : (*control)["rules"])
    if (rule["apiGroups"][0] == "repair.example.com"
        || rule["apiGroups"][0] == "net.example.org") {
      EXPECT_EQ(rule["verbs"], object::array({"get", "list", "create"}));
      for (const auto& resource : rule["resources"])
        granted.push_back(rule["apiGroups"][0].get<std::string>() + "/"
                          + resource.get<std::string>());
    }
  EXPECT_EQ(granted, (std::vector<std::string>{"net.example.org/reflashes",
                                               "repair.example.com/fixes"}));
  // Nothing of them for the janitor: it does not carry them out.
  for (const auto& rule : (*find(r, "ClusterRole", "vigil-janitor"))["rules"])
    EXPECT_NE(rule["apiGroups"][0], "repair.example.com");
}

TEST(install_manifests, the_janitor_alert_watches_the_deployment_that_runs_it) {
  auto expr_of = [](const install_result& r) {
    for (const auto& group :
         (*find(r, "PrometheusRule", "vigil-gpu-reset"))["spec"]["groups"])
      for (const auto& rule : group["rules"])
        if (rule.value("alert", "") == "VigilJanitorUnavailable")
          return rule["expr"].get<std::string>();
    return std::string{};
  };
  EXPECT_NE(
    expr_of(install()).find("{namespace=\"vigil\", deployment=\"vigil-control\"}"),
    std::string::npos)
    << expr_of(install());
  auto separate = install({"ops", "", "janitor:\n  in_process: false\n", "j.yaml"});
  EXPECT_NE(expr_of(separate).find("{namespace=\"ops\", deployment=\"vigil-janitor\"}"),
            std::string::npos)
    << expr_of(separate);
}

TEST(install_manifests, bad_configuration_is_refused_with_the_key) {
  auto unknown = install_manifests({"", "", "control:\n  bogus: 1\n", "mine.yaml"});
  ASSERT_FALSE(unknown.has_value());
  EXPECT_NE(unknown.error().to_string().find("mine.yaml: control.bogus"),
            std::string::npos)
    << unknown.error().to_string();
  auto sqlite =
    install_manifests({"", "", "journal:\n  url: sqlite:/tmp/j.db\n", "mine.yaml"});
  ASSERT_FALSE(sqlite.has_value());
  EXPECT_EQ(sqlite.error().where, "mine.yaml: journal.url");
  auto bad_ns = install_manifests({"Not_A_Namespace", "", "", "vigil.yaml"});
  ASSERT_FALSE(bad_ns.has_value());
  EXPECT_EQ(bad_ns.error().where, "--namespace");
  auto not_a_map = install_manifests({"", "", "control: 5\n", "mine.yaml"});
  ASSERT_FALSE(not_a_map.has_value());
  EXPECT_EQ(not_a_map.error().where, "mine.yaml: control");
  auto scalar = install_manifests({"", "", "just text\n", "mine.yaml"});
  ASSERT_FALSE(scalar.has_value());
  EXPECT_EQ(scalar.error().where, "mine.yaml");
  EXPECT_TRUE(install_manifests({"", "", "# only a comment\n", "mine.yaml"}).has_value());
  auto bad_yaml = install_manifests({"", "", "control: [", "mine.yaml"});
  ASSERT_FALSE(bad_yaml.has_value());
  EXPECT_EQ(bad_yaml.error().where.rfind("mine.yaml", 0), 0u)
    << bad_yaml.error().to_string();
}

TEST(install_manifests, a_key_install_owns_is_replaced_and_said_so) {
  auto r = install({"", "",
                    "control:\n  tls_cert_file: /mine/cert.pem\n"
                    "  metrics_readers: [ops/prometheus]\n"
                    "journal:\n  url: postgresql://vigil@db:5432/vigil\n",
                    "mine.yaml"});
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("control.tls_cert_file: '/mine/cert.pem' replaced"),
            std::string::npos)
    << r.notes[0];
  auto config =
    parse_config((*find(r, "ConfigMap", "vigil-config"))["data"]["vigil.yaml"]);
  ASSERT_TRUE(config.has_value());
  EXPECT_EQ(config->journal.url, "postgresql://vigil@db:5432/vigil");
  EXPECT_EQ(config->control.metrics_readers, std::vector<std::string>{"ops/prometheus"});
}

// /metrics is read by Prometheus with its own token, which vigil-control
// checks: kube-prometheus' account unless the configuration names another.
TEST(install_manifests, prometheus_reads_metrics_with_its_own_token) {
  auto r = install();
  auto config =
    parse_config((*find(r, "ConfigMap", "vigil-config"))["data"]["vigil.yaml"]);
  ASSERT_TRUE(config.has_value());
  EXPECT_EQ(config->control.metrics_readers,
            std::vector<std::string>{"monitoring/prometheus-k8s"});
  bool noted = false;
  for (const auto& note : r.notes)
    noted = noted || note.find("control.metrics_readers") != std::string::npos;
  EXPECT_TRUE(noted);
  const auto& endpoint =
    (*find(r, "ServiceMonitor", "vigil-control"))["spec"]["endpoints"][0];
  EXPECT_EQ(endpoint["bearerTokenFile"],
            "/var/run/secrets/kubernetes.io/serviceaccount/token");
  auto bad =
    install_manifests({"", "", "control:\n  metrics_readers: [prometheus]\n", "m.yaml"});
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().where, "m.yaml: control.metrics_readers");
}

TEST(install_manifests, the_printed_stream_reads_back_as_the_objects) {
  auto r = install();
  const auto text = to_yaml_stream(r.manifests);
  EXPECT_EQ(text, to_yaml_stream(install().manifests)); // deterministic
  auto documents = YAML::LoadAll(text);
  ASSERT_EQ(documents.size(), r.manifests.size());
  for (size_t i = 0; i < documents.size(); ++i)
    EXPECT_EQ(yaml_to_json(documents[i]), r.manifests[i].body)
      << r.manifests[i].body["kind"];
}

} // namespace
} // namespace vigil::install
