// The effective vigil.yaml of an installation, the ConfigMaps, the
// Namespaces and the CRDs.
#include <optional>
#include <regex>

#include "runtime/install/install_assets.hpp"
#include "runtime/install/install_support.hpp"
#include "runtime/version.hpp"

namespace vigil::install::detail {

namespace {

// A key `vigil install` owns: it must point where the manifests mount things.
struct owned_key {
  const char* section;
  const char* key;
  std::string value;
  const char* why;
};

std::vector<owned_key> owned_keys(const std::string& ns) {
  return {
    {"control", "tls_cert_file", std::string(tls_dir) + "/tls.crt",
     "the Secret vigil-control-tls is mounted there"},
    {"control", "tls_key_file", std::string(tls_dir) + "/tls.key",
     "the Secret vigil-control-tls is mounted there"},
    {"control", "token_file", std::string(ingest_token_dir) + "/token",
     "the Secret vigil-ingest-token is mounted there"},
    {"control", "kubeconfig", "", "the control plane uses its in-cluster ServiceAccount"},
    {"control", "lease_namespace", ns, "the control plane is installed there"},
  };
}

bool is_dns_label(const std::string& name) {
  static const std::regex label{"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"};
  return std::regex_match(name, label);
}

// document[section][key] when it is a scalar, else "".
std::string setting(const YAML::Node& document, const char* section, const char* key) {
  const auto part = document[section];
  if (!part || !part.IsMap())
    return {};
  const auto value = part[key];
  return value && value.IsScalar() ? value.Scalar() : std::string{};
}

// Sets document[section][key]; the section must be a map or absent.
std::optional<failure> set_setting(YAML::Node& document, const std::string& source,
                                   const char* section, const char* key,
                                   const std::string& value) {
  const YAML::Node& read = document;
  if (read[section] && !read[section].IsMap())
    return failure{source + ": " + section, "must be a map"};
  document[section][key] = value;
  return std::nullopt;
}

} // namespace

expected<install_context> make_context(const install_options& options,
                                       std::vector<std::string>& notes) {
  const auto& source = options.config_source;
  YAML::Node document;
  try {
    document = YAML::Load(options.config_text);
  } catch (const YAML::Exception& e) {
    return failure{source, e.what()};
  }
  if (document.IsNull() || !document.IsDefined())
    document = YAML::Node(YAML::NodeType::Map); // empty, or only comments
  else if (!document.IsMap())
    return failure{source, "must be a map of sections (log, journal, control, …)"};

  install_context ctx;
  ctx.ns = options.namespace_name;
  if (ctx.ns.empty())
    ctx.ns = setting(document, "control", "lease_namespace");
  if (ctx.ns.empty())
    ctx.ns = vigil_config{}.control.lease_namespace;
  if (!is_dns_label(ctx.ns))
    return failure{options.namespace_name.empty() ? source + ": control.lease_namespace"
                                                  : "--namespace",
                   "'" + ctx.ns + "' is not a Kubernetes namespace name"};
  ctx.image =
    options.image.empty() ? std::string("vigil:") + version_string() : options.image;
  ctx.dcgm_url = options.dcgm_url;
  if (ctx.dcgm_url != "none" && ctx.dcgm_url.rfind("http://", 0) != 0
      && ctx.dcgm_url.rfind("https://", 0) != 0)
    return failure{"--dcgm-url", "'" + ctx.dcgm_url
                                   + "' is neither an http:// or https:// URL nor none"};

  // The two control replicas share one journal: an SQLite file is one process's.
  const auto journal_url = setting(document, "journal", "url");
  if (journal_url.empty()) {
    const auto url =
      "postgresql://vigil@vigil-postgresql." + ctx.ns + ".svc:5432/vigil?sslmode=require";
    if (auto problem = set_setting(document, source, "journal", "url", url))
      return *problem;
    notes.push_back(
      "journal.url is not set: " + url
      + " (the password comes from the Secret vigil-journal, key password)");
  } else if (journal_url.rfind("postgresql://", 0) != 0
             && journal_url.rfind("postgres://", 0) != 0) {
    return failure{source + ": journal.url",
                   "'" + journal_url
                     + "': the control plane runs as two replicas that share "
                       "one journal; give a postgresql:// URL"};
  }
  for (const auto& owned : owned_keys(ctx.ns)) {
    const auto current = setting(document, owned.section, owned.key);
    if (!current.empty() && current != owned.value)
      notes.push_back(std::string(owned.section) + "." + owned.key + ": '" + current
                      + "' replaced by '" + owned.value + "' (" + owned.why + ")");
    if (auto problem =
          set_setting(document, source, owned.section, owned.key, owned.value))
      return *problem;
  }

  // Agents prove their node with a projected token unless the file turns it
  // off (clusters before Kubernetes 1.30 cannot: their tokens name no node).
  YAML::Node control_section = document["control"]; // a map: the owned keys are set
  const YAML::Node& read = control_section;
  const auto review = read["token_review"];
  if (review && !review.IsMap())
    return failure{source + ": control.token_review", "must be a map"};
  if (!review || !review["enabled"])
    control_section["token_review"]["enabled"] = true;
  // /metrics is read by Prometheus with its own ServiceAccount's token.
  if (!read["metrics_readers"]) {
    control_section["metrics_readers"].push_back(default_metrics_reader);
    notes.push_back(std::string("control.metrics_readers is not set: ")
                    + default_metrics_reader
                    + " (kube-prometheus' account) may read /metrics; name yours there");
  }

  YAML::Emitter out;
  out << document;
  ctx.config_yaml =
    "# vigil.yaml as `vigil install` wrote it. A key not set here has its default\n"
    "# (config/vigil.yaml in the source, /usr/share/vigil/vigil.yaml in the image).\n"
    "# vigil install sets control.tls_cert_file, tls_key_file, token_file, kubeconfig\n"
    "# and lease_namespace: where the Deployment mounts the Secrets, and its namespace.\n"
    + std::string(out.c_str()) + "\n";
  auto effective = parse_config(ctx.config_yaml);
  if (!effective)
    return failure{source + ": " + effective.error().where, effective.error().what};
  ctx.config = std::move(*effective);
  ctx.job_ns = ctx.config.janitor.job_namespace;

  auto control = split_listen(ctx.config.control.listen, "control.listen");
  if (!control)
    return failure{source + ": " + control.error().where, control.error().what};
  ctx.control_port = control->second;
  auto janitor = split_listen(ctx.config.janitor.listen, "janitor.listen");
  if (!janitor)
    return failure{source + ": " + janitor.error().where, janitor.error().what};
  ctx.janitor_port = janitor->second;
  return ctx;
}

std::vector<manifest> namespace_manifests(const install_context& ctx) {
  auto privileged = [](object ns) {
    auto& labels = ns["metadata"]["labels"];
    for (const char* mode : {"enforce", "audit", "warn"})
      labels[std::string("pod-security.kubernetes.io/") + mode] = "privileged";
    return ns;
  };
  std::vector<manifest> out;
  out.push_back(
    {"The control plane, the agents and their accounts. The agent DaemonSet is\n"
     "privileged (/dev/kmsg, nvidia-smi against every GPU, the host's /sys),\n"
     "so Pod Security Admission must admit privileged pods here.",
     privileged(header("v1", "Namespace", ctx.ns, "", "control"))});
  if (ctx.job_ns != ctx.ns)
    out.push_back(
      {"janitor.job_namespace: the GPU reset Job (privileged, seed 001\n"
       "\"Security\"), the reboot, bug report and validation Jobs. Put nothing\n"
       "else here: whoever may create pods here may create privileged ones.",
       privileged(header("v1", "Namespace", ctx.job_ns, "", "janitor"))});
  return out;
}

std::vector<manifest> crd_manifests() {
  std::vector<manifest> out;
  for (const auto& file : embedded_files()) {
    if (file.name.rfind("crds/", 0) != 0)
      continue;
    out.push_back({leading_comment(file.text), parse_yaml(file.text, file.name)});
  }
  return out;
}

std::vector<manifest> config_map_manifests(const install_context& ctx) {
  auto config = header("v1", "ConfigMap", "vigil-config", ctx.ns, "control");
  config["data"] = {{"vigil.yaml", ctx.config_yaml}};
  const auto& janitor = ctx.config.janitor;
  auto script =
    header("v1", "ConfigMap", janitor.reset_script_config_map, ctx.job_ns, "janitor");
  script["data"] = {{"gpu-reset.sh", std::string(asset("gpu-reset.sh"))}};
  return {
    {"The effective vigil.yaml of `vigil control` (mounted at /etc/vigil).", config},
    {"The GPU reset Job's script (seed 001), mounted at /opt/vigil; source:\n"
     "runtime/install/assets/gpu-reset.sh.",
     script},
  };
}

} // namespace vigil::install::detail
