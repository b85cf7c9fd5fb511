#include "runtime/kube/kube_config.hpp"

#include <fstream>
#include <sstream>
#include <sys/stat.h>

#include <yaml-cpp/yaml.h>

namespace vigil::kube {

namespace {

bool file_exists(const std::string& path) {
  struct stat st {};
  return !path.empty() && ::stat(path.c_str(), &st) == 0;
}

expected<std::string> read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return failure{path, "cannot be read"};
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string directory_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string resolve(const std::string& dir, const std::string& path) {
  return path.empty() || path[0] == '/' ? path : dir + "/" + path;
}

// Finds the entry called `name` in a kubeconfig list (clusters, users,
// contexts) and returns its inner map (`field`).
expected<YAML::Node> named_entry(const YAML::Node& root, const std::string& list,
                                 const std::string& field, const std::string& name,
                                 const std::string& origin) {
  const YAML::Node entries = root[list];
  if (entries && !entries.IsSequence())
    return failure{origin, list + ": expected a list"};
  if (entries)
    for (const auto& entry : entries)
      if (entry.IsMap() && entry["name"] && entry["name"].as<std::string>("") == name) {
        YAML::Node inner = entry[field];
        if (!inner || !inner.IsMap())
          return failure{origin, list + "[" + name + "]." + field + ": missing"};
        return inner;
      }
  return failure{origin, list + ": no entry named '" + name + "'"};
}

// A string field, or "" when absent; a non-scalar is an error naming it.
expected<std::string> scalar(const YAML::Node& map, const std::string& key,
                             const std::string& where) {
  const YAML::Node node = map[key];
  if (!node || node.IsNull())
    return std::string{};
  if (!node.IsScalar())
    return failure{where + "." + key, "expected a string"};
  return node.as<std::string>();
}

// Fills `data` from key-data (base64) and `file` from key (a path).
status read_pem(const YAML::Node& map, const std::string& key, const std::string& where,
                const std::string& dir, std::string& file, std::string& data) {
  auto path = scalar(map, key, where);
  if (!path)
    return path.error();
  file = resolve(dir, *path);
  auto encoded = scalar(map, key + "-data", where);
  if (!encoded)
    return encoded.error();
  if (!encoded->empty()) {
    auto decoded = base64_decode(*encoded);
    if (!decoded)
      return failure{where + "." + key + "-data", decoded.error().what};
    data = std::move(*decoded);
  }
  if (data.empty() && !file.empty() && !file_exists(file))
    return failure{where + "." + key, "file '" + file + "' cannot be read"};
  return ok();
}

} // namespace

expected<std::string> base64_decode(const std::string& text) {
  std::string out;
  unsigned buffer = 0;
  int bits = 0;
  for (char c : text) {
    int v;
    if (c >= 'A' && c <= 'Z')
      v = c - 'A';
    else if (c >= 'a' && c <= 'z')
      v = c - 'a' + 26;
    else if (c >= '0' && c <= '9')
      v = c - '0' + 52;
    else if (c == '+' || c == '-')
      v = 62;
    else if (c == '/' || c == '_')
      v = 63;
    else if (c == '=' || c == ' ' || c == '\n' || c == '\r' || c == '\t')
      continue;
    else
      return failure{"", std::string("not base64: unexpected character '") + c + "'"};
    buffer = (buffer << 6) | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((buffer >> bits) & 0xFF);
    }
  }
  return out;
}

expected<kube_connection> parse_kubeconfig(const std::string& yaml,
                                           const std::string& origin,
                                           const std::string& context) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return failure{origin, std::string("not valid YAML: ") + e.what()};
  }
  if (!root.IsMap())
    return failure{origin, "expected a kubeconfig mapping"};
  auto current = scalar(root, "current-context", "current-context");
  if (!current)
    return failure{origin, current.error().to_string()};
  const std::string name = context.empty() ? *current : context;
  if (name.empty())
    return failure{origin, "current-context: not set and no --context given"};
  auto ctx = named_entry(root, "contexts", "context", name, origin);
  if (!ctx)
    return ctx.error();
  const std::string where_ctx = "contexts[" + name + "].context";
  auto cluster_name = scalar(*ctx, "cluster", where_ctx);
  auto user_name = scalar(*ctx, "user", where_ctx);
  auto ns = scalar(*ctx, "namespace", where_ctx);
  for (auto* field : {&cluster_name, &user_name, &ns})
    if (!*field)
      return failure{origin, field->error().to_string()};
  if (cluster_name->empty())
    return failure{origin, where_ctx + ".cluster: missing"};

  const std::string dir = directory_of(origin);
  kube_connection conn;
  conn.source = "kubeconfig " + origin + " (context " + name + ")";
  if (!ns->empty())
    conn.default_namespace = *ns;

  auto cluster = named_entry(root, "clusters", "cluster", *cluster_name, origin);
  if (!cluster)
    return cluster.error();
  const std::string where_cluster = "clusters[" + *cluster_name + "].cluster";
  auto server = scalar(*cluster, "server", where_cluster);
  if (!server)
    return failure{origin, server.error().to_string()};
  if (server->empty())
    return failure{origin, where_cluster + ".server: missing"};
  conn.server = *server;
  if (auto st = read_pem(*cluster, "certificate-authority", where_cluster, dir,
                         conn.ca_file, conn.ca_data);
      !st)
    return failure{origin, st.error().to_string()};
  auto insecure = scalar(*cluster, "insecure-skip-tls-verify", where_cluster);
  if (!insecure)
    return failure{origin, insecure.error().to_string()};
  conn.insecure_skip_tls_verify = *insecure == "true";

  if (user_name->empty())
    return conn;
  auto user = named_entry(root, "users", "user", *user_name, origin);
  if (!user)
    return user.error();
  const std::string where_user = "users[" + *user_name + "].user";
  auto token = scalar(*user, "token", where_user);
  auto token_file = scalar(*user, "tokenFile", where_user);
  if (!token || !token_file)
    return failure{origin, (!token ? token : token_file).error().to_string()};
  conn.token = *token;
  conn.token_file = resolve(dir, *token_file);
  if (!conn.token_file.empty() && !file_exists(conn.token_file))
    return failure{origin, where_user + ".tokenFile: file '" + conn.token_file
                             + "' cannot be read"};
  for (auto [key, file, data] :
       {std::tuple{"client-certificate", &conn.client_cert_file, &conn.client_cert_data},
        std::tuple{"client-key", &conn.client_key_file, &conn.client_key_data}})
    if (auto st = read_pem(*user, key, where_user, dir, *file, *data); !st)
      return failure{origin, st.error().to_string()};
  return conn;
}

expected<kube_connection> load_kubeconfig(const std::string& path,
                                          const std::string& context) {
  auto text = read_file(path);
  if (!text)
    return failure{path, "kubeconfig cannot be read"};
  return parse_kubeconfig(*text, path, context);
}

expected<kube_connection> in_cluster_connection(const env_lookup& env,
                                                const std::string& account_dir) {
  const std::string host = env("KUBERNETES_SERVICE_HOST");
  const std::string port = env("KUBERNETES_SERVICE_PORT");
  if (host.empty() || port.empty())
    return failure{"KUBERNETES_SERVICE_HOST", "not set: not running in a pod"};
  kube_connection conn;
  conn.source = "in-cluster";
  conn.server = "https://"
                + (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":"
                + port;
  conn.token_file = account_dir + "/token";
  if (!file_exists(conn.token_file))
    return failure{conn.token_file, "service account token cannot be read"};
  conn.ca_file = account_dir + "/ca.crt";
  if (!file_exists(conn.ca_file))
    return failure{conn.ca_file, "service account CA bundle cannot be read"};
  if (auto ns = read_file(account_dir + "/namespace"); ns && !ns->empty())
    conn.default_namespace = *ns;
  return conn;
}

expected<kube_connection> resolve_connection(const std::string& kubeconfig_flag,
                                             const std::string& context_flag,
                                             const env_lookup& env) {
  if (!kubeconfig_flag.empty())
    return load_kubeconfig(kubeconfig_flag, context_flag);
  std::stringstream list(env("KUBECONFIG"));
  for (std::string path; std::getline(list, path, ':');)
    if (file_exists(path))
      return load_kubeconfig(path, context_flag);
  if (!env("KUBERNETES_SERVICE_HOST").empty())
    return in_cluster_connection(env);
  const std::string home = env("HOME");
  const std::string fallback = (home.empty() ? std::string(".") : home) + "/.kube/config";
  if (file_exists(fallback))
    return load_kubeconfig(fallback, context_flag);
  return failure{"kubeconfig", "none found: pass --kubeconfig, set KUBECONFIG, or run "
                               "in a pod"};
}

} // namespace vigil::kube
