#include "runtime/config.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "actors/janitor/gpu_reset_plan.hpp"
#include "messages/user_regex.hpp"

namespace vigil {

namespace {

// Reads the keys of one YAML mapping into typed fields, remembering which keys
// it consumed so that anything left over is reported as unknown.
class section_reader {
public:
  section_reader(YAML::Node node, std::string path, std::vector<failure>& errors)
    : node_(std::move(node)), path_(std::move(path)), errors_(errors) {
    if (node_.IsDefined() && !node_.IsNull() && !node_.IsMap())
      fail(path_, "expected a mapping");
  }

  section_reader section(const char* key) {
    consumed_.insert(key);
    const YAML::Node& node = node_;
    return section_reader(valid() ? node[key] : YAML::Node{}, join(key), errors_);
  }

  void read(const char* key, std::string& out) {
    if (auto value = take(key)) {
      if (!value->IsScalar())
        fail(join(key), "expected a string");
      else
        out = value->Scalar();
    }
  }

  template <class Int>
  void read(const char* key, Int& out, Int min, Int max) {
    auto value = take(key);
    if (!value)
      return;
    long long parsed = 0;
    if (!value->IsScalar() || !YAML::convert<long long>::decode(*value, parsed)) {
      fail(join(key), "expected an integer");
      return;
    }
    if (parsed < static_cast<long long>(min) || parsed > static_cast<long long>(max)) {
      fail(join(key), std::to_string(parsed) + " is out of range [" + std::to_string(min)
                        + ", " + std::to_string(max) + "]");
      return;
    }
    out = static_cast<Int>(parsed);
  }

  void read(const char* key, bool& out) {
    if (auto value = take(key)) {
      bool parsed = false;
      if (!value->IsScalar() || !YAML::convert<bool>::decode(*value, parsed))
        fail(join(key), "expected true or false");
      else
        out = parsed;
    }
  }

  void read(const char* key, double& out, double min, double max) {
    auto value = take(key);
    if (!value)
      return;
    double parsed = 0;
    if (!value->IsScalar() || !YAML::convert<double>::decode(*value, parsed)) {
      fail(join(key), "expected a number");
      return;
    }
    if (!(parsed >= min && parsed <= max)) {
      fail(join(key), value->Scalar() + " is out of range [" + std::to_string(min) + ", "
                        + std::to_string(max) + "]");
      return;
    }
    out = parsed;
  }

  void read(const char* key, std::vector<std::string>& out) {
    auto value = take(key);
    if (!value)
      return;
    if (!value->IsSequence()) {
      fail(join(key), "expected a list of strings");
      return;
    }
    out.clear();
    for (std::size_t i = 0; i < value->size(); ++i) {
      if (!(*value)[i].IsScalar()) {
        fail(join(key) + "[" + std::to_string(i) + "]", "expected a string");
        continue;
      }
      out.push_back((*value)[i].Scalar());
    }
  }

  /// The mappings of a list under `key` (absent: none; present: replaces defaults).
  std::optional<std::vector<section_reader>> items(const char* key) {
    auto value = take(key);
    if (!value)
      return std::nullopt;
    std::vector<section_reader> out;
    if (!value->IsSequence()) {
      fail(join(key), "expected a list");
      return out;
    }
    for (std::size_t i = 0; i < value->size(); ++i)
      out.emplace_back((*value)[i], join(key) + "[" + std::to_string(i) + "]", errors_);
    return out;
  }

  const std::string& path() const { return path_; }
  bool has(const char* key) const {
    return valid() && node_[key].IsDefined() && !node_[key].IsNull();
  }
  void error(const char* key, std::string what) { fail(join(key), std::move(what)); }

  void read_one_of(const char* key, std::string& out,
                   std::initializer_list<const char*> allowed) {
    std::string value = out;
    read(key, value);
    for (const char* a : allowed)
      if (value == a) {
        out = value;
        return;
      }
    std::string list;
    for (const char* a : allowed)
      list += list.empty() ? a : std::string(", ") + a;
    fail(join(key), "'" + value + "' is not one of: " + list);
  }

  /// Reports the keys nobody asked for; call after reading every field.
  void finish() {
    if (!valid())
      return;
    for (const auto& kv : node_) {
      const auto key = kv.first.Scalar();
      if (consumed_.count(key) == 0)
        fail(join(key.c_str()), "unknown key");
    }
  }

private:
  bool valid() const { return node_.IsDefined() && node_.IsMap(); }

  // The value under `key`, or nothing when it is absent or null.
  std::optional<YAML::Node> take(const char* key) {
    consumed_.insert(key);
    if (!valid())
      return std::nullopt;
    const YAML::Node& node = node_;
    auto value = node[key];
    if (!value.IsDefined() || value.IsNull())
      return std::nullopt;
    return value;
  }

  std::string join(const char* key) const {
    return path_.empty() ? key : path_ + "." + key;
  }

  void fail(std::string where, std::string what) {
    errors_.push_back(failure{std::move(where), std::move(what)});
  }

  YAML::Node node_;
  std::string path_;
  std::vector<failure>& errors_;
  std::set<std::string> consumed_;
};

void read_log(section_reader s, log_config& c) {
  std::string format = c.format == log_format::json ? "json" : "text";
  s.read_one_of("format", format, {"json", "text"});
  c.format = format == "text" ? log_format::text : log_format::json;
  s.read_one_of("level", c.level,
                {"trace", "debug", "info", "warn", "error", "critical", "off"});
  s.finish();
}

void read_runtime(section_reader s, runtime_config& c) {
  s.read("scheduler_threads", c.scheduler_threads, 0u, 256u);
  s.read("shutdown_grace_ms", c.shutdown_grace_ms, 0u, 600000u);
  s.finish();
}

void read_journal(section_reader s, journal_config& c, std::vector<failure>& errors) {
  s.read("url", c.url);
  if (c.url.rfind("sqlite:", 0) != 0 && c.url.rfind("postgresql://", 0) != 0
      && c.url.rfind("postgres://", 0) != 0)
    errors.push_back(
      {"journal.url", "'" + c.url + "' is neither sqlite:PATH nor postgresql://…"});
  s.read("batch_max_events", c.batch_max_events, 1u, 1000000u);
  s.read("batch_max_delay_ms", c.batch_max_delay_ms, 0u, 60000u);
  s.read("queue_capacity", c.queue_capacity, 1u, 100000000u);
  s.read("reconnect_initial_ms", c.reconnect_initial_ms, 1u, 600000u);
  s.read("reconnect_max_ms", c.reconnect_max_ms, 1u, 3600000u);
  if (c.reconnect_max_ms < c.reconnect_initial_ms)
    errors.push_back({"journal.reconnect_max_ms", "is below reconnect_initial_ms"});
  s.read("retention_days", c.retention_days, 0u, 36500u);
  s.finish();
}

void read_ingest(section_reader s, ingest_config& c) {
  auto& l = c.limits;
  s.read("max_body_bytes", c.max_body_bytes, 1024u, 1024u * 1024u * 1024u);
  s.read("max_event_bytes", l.max_event_bytes, size_t{256}, size_t{16} << 20);
  s.read("max_message_bytes", l.max_message_bytes, size_t{16}, size_t{1} << 20);
  s.read("max_string_bytes", l.max_string_bytes, size_t{16}, size_t{1} << 20);
  s.read("max_entities", l.max_entities, size_t{1}, size_t{100000});
  s.read("max_error_codes", l.max_error_codes, size_t{1}, size_t{100000});
  s.read("max_metadata_entries", l.max_metadata_entries, size_t{0}, size_t{100000});
  s.read("max_pending_events", c.max_pending_events, 1u, 100000000u);
  s.finish();
}

bool valid_label_key(const std::string& key) {
  if (key.empty() || key.size() > 316)
    return false;
  for (char c : key)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'
          || c == '/'))
      return false;
  return true;
}

void read_control(section_reader s, control_config& c) {
  s.read("listen", c.listen);
  if (c.listen.rfind(':') == std::string::npos)
    s.error("listen", "'" + c.listen + "' is not HOST:PORT");
  s.read("tls_cert_file", c.tls_cert_file);
  s.read("tls_key_file", c.tls_key_file);
  if (c.tls_cert_file.empty() != c.tls_key_file.empty())
    s.error(c.tls_cert_file.empty() ? "tls_cert_file" : "tls_key_file",
            "tls_cert_file and tls_key_file go together");
  s.read("plain_http", c.plain_http);
  s.read("token_file", c.token_file);
  s.read("kubeconfig", c.kubeconfig);
  s.read("kube_api_qps", c.kube_api_qps, 0u, 100000u);
  s.read("kube_api_burst", c.kube_api_burst, 1u, 100000u);
  s.read("dry_run", c.dry_run);
  s.read("events_namespace", c.events_namespace);
  s.read("gpu_node_label", c.gpu_node_label);
  s.read("ingest_deadline_ms", c.ingest_deadline_ms, 1u, 600000u);
  s.read("retry_after_seconds", c.retry_after_seconds, 1u, 3600u);
  s.read("leader_election", c.leader_election);
  s.read("lease_namespace", c.lease_namespace);
  s.read("lease_name", c.lease_name);
  s.read("lease_seconds", c.lease_seconds, 2u, 3600u);
  s.read("renew_deadline_seconds", c.renew_deadline_seconds, 1u, 3600u);
  s.read("retry_period_seconds", c.retry_period_seconds, 1u, 3600u);
  s.read("shards", c.shards, 1u, 4096u);
  if (c.shards > 1 && !c.leader_election)
    s.error("shards", "more than one shard needs leader_election: true");
  s.read("snapshot_interval_seconds", c.snapshot_interval_seconds, 0u, 86400u);
  s.read("agent_silence_seconds", c.agent_silence_seconds, 0u, 86400u);
  s.read("not_ready_after", c.not_ready_after, 0u, 86400u);
  s.read("not_ready_action", c.not_ready_action);
  if (!parse_recommended_action(c.not_ready_action))
    s.error("not_ready_action",
            "'" + c.not_ready_action + "' is not a recommendedAction");
  s.read("node_problem_conditions", c.node_problem_conditions);
  s.read("node_problem_action", c.node_problem_action);
  if (!parse_recommended_action(c.node_problem_action))
    s.error("node_problem_action",
            "'" + c.node_problem_action + "' is not a recommendedAction");
  auto review = s.section("token_review");
  review.read("enabled", c.token_review.enabled);
  review.read("audience", c.token_review.audience);
  review.read("agent_service_account", c.token_review.agent_service_account);
  if (c.token_review.enabled && c.token_review.audience.empty())
    review.error("audience", "must not be empty");
  review.finish();
  s.read("metrics_readers", c.metrics_readers);
  for (const auto& reader : c.metrics_readers) {
    const auto slash = reader.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == reader.size()
        || reader.find('/', slash + 1) != std::string::npos)
      s.error("metrics_readers", "'" + reader + "' is not namespace/name");
  }
  if (c.renew_deadline_seconds >= c.lease_seconds)
    s.error("renew_deadline_seconds", "must be less than lease_seconds");
  if (c.retry_period_seconds >= c.renew_deadline_seconds)
    s.error("retry_period_seconds", "must be less than renew_deadline_seconds");
  s.finish();
}

void read_rule(section_reader s, quarantine_rule_config& r) {
  s.read("name", r.name);
  if (r.name.empty())
    s.error("name", "every rule needs a name");
  auto m = s.section("match");
  m.read("agents", r.agents);
  m.read("component_classes", r.component_classes);
  m.read("check_names", r.check_names);
  m.read("error_codes", r.error_codes);
  m.read("entity_types", r.entity_types);
  m.read("recommended_actions", r.recommended_actions);
  for (const auto& a : r.recommended_actions)
    if (!parse_recommended_action(a))
      m.error("recommended_actions", "'" + a + "' is not a recommendedAction");
  if (m.has("is_fatal")) {
    bool fatal = false;
    m.read("is_fatal", fatal);
    r.is_fatal = fatal;
  }
  m.finish();
  s.read("cordon", r.cordon);
  if (auto taints = s.items("taints")) {
    for (auto& t : *taints) {
      quarantine_rule_config::taint_config taint;
      t.read("key", taint.key);
      if (!valid_label_key(taint.key))
        t.error("key", "'" + taint.key + "' is not a valid taint key");
      t.read("value", taint.value);
      t.read_one_of("effect", taint.effect,
                    {"NoSchedule", "PreferNoSchedule", "NoExecute"});
      t.finish();
      r.taints.push_back(taint);
    }
  }
  s.read("condition_type", r.condition_type);
  s.finish();
}

void read_quarantine(section_reader s, quarantine_config& c) {
  s.read("opt_out_label", c.opt_out_label);
  s.read("dry_run", c.dry_run);
  if (auto rules = s.items("rules")) {
    c.rules.clear();
    std::set<std::string> names;
    for (auto& item : *rules) {
      quarantine_rule_config r;
      r.taints.clear();
      read_rule(item, r);
      if (!r.name.empty() && !names.insert(r.name).second)
        item.error("name", "'" + r.name + "' is used by an earlier rule");
      c.rules.push_back(std::move(r));
    }
  }
  s.finish();
}

void read_breaker(section_reader s, breaker_settings& c) {
  s.read("max_cordoned_percent", c.max_cordoned_percent, 0.0, 100.0);
  s.read("max_cordoned_nodes", c.max_cordoned_nodes, 0u, 1000000u);
  s.read("window_seconds", c.window_seconds, 1u, 86400u * 7);
  s.read("pool_label", c.pool_label);
  s.read("max_concurrent_per_pool", c.max_concurrent_per_pool, 0u, 1000000u);
  s.finish();
}

// A whole-name regex the drain matches namespaces with; names the key when bad.
void check_regex(section_reader& s, const char* key, const std::string& pattern) {
  if (auto problem = user_regex_problem(pattern)) {
    s.error(key, "'" + pattern.substr(0, 80) + "' is not accepted: " + *problem);
    return;
  }
  try {
    std::regex re(pattern);
  } catch (const std::regex_error& e) {
    s.error(key, "'" + pattern + "' is not a valid regex (" + e.what() + ")");
  }
}

void read_drain(section_reader s, drain_section& c) {
  const std::initializer_list<const char*> modes = {"Immediate", "AllowCompletion",
                                                    "DeleteAfterTimeout"};
  s.read("dry_run", c.dry_run);
  s.read_one_of("default_mode", c.default_mode, modes);
  if (c.default_mode == "DeleteAfterTimeout")
    s.error("default_mode", "DeleteAfterTimeout needs a timeout: use it in namespaces[]");
  if (auto entries = s.items("namespaces")) {
    for (auto& e : *entries) {
      drain_namespace_config n;
      e.read("namespace", n.namespace_pattern);
      if (n.namespace_pattern.empty())
        e.error("namespace", "every entry needs a namespace pattern");
      check_regex(e, "namespace", n.namespace_pattern);
      e.read_one_of("mode", n.mode, modes);
      e.read("timeout_minutes", n.timeout_minutes, 0u, 60u * 24 * 30);
      if (n.mode == "DeleteAfterTimeout" && n.timeout_minutes == 0)
        e.error("timeout_minutes", "DeleteAfterTimeout needs a positive timeout");
      e.finish();
      c.namespaces.push_back(std::move(n));
    }
  }
  s.read("system_namespaces", c.system_namespaces);
  check_regex(s, "system_namespaces", c.system_namespaces);
  s.read("eviction_retry_seconds", c.eviction_retry_seconds, 1u, 3600u);
  s.read("eviction_retry_max_seconds", c.eviction_retry_max_seconds, 1u, 86400u);
  if (c.eviction_retry_max_seconds < c.eviction_retry_seconds)
    s.error("eviction_retry_max_seconds", "must be >= eviction_retry_seconds");
  s.read("poll_seconds", c.poll_seconds, 1u, 3600u);
  s.finish();
}

void read_correlation(section_reader s, correlation_section& c) {
  constexpr std::uint32_t week = 7 * 86400;
  s.read("dedup_window_seconds", c.dedup_window_seconds, 0u, 86400u);
  s.read("xid_repeat_threshold", c.xid_repeat_threshold, 1u, 1000u);
  s.read("xid_window_seconds", c.xid_window_seconds, 1u, week);
  s.read("xid_burst_seconds", c.xid_burst_seconds, 0u, 86400u);
  s.read("xid_sticky_seconds", c.xid_sticky_seconds, 0u, week);
  s.read("nic_flap_threshold", c.nic_flap_threshold, 1u, 1000u);
  s.read("nic_flap_window_seconds", c.nic_flap_window_seconds, 1u, week);
  s.read("nic_drop_after_seconds", c.nic_drop_after_seconds, 1u, week);
  s.read("nic_drop_action", c.nic_drop_action);
  if (!parse_recommended_action(c.nic_drop_action))
    s.error("nic_drop_action", "'" + c.nic_drop_action + "' is not a recommendedAction");
  s.read("remediation_repeat_threshold", c.remediation_repeat_threshold, 1u, 1000u);
  s.read("remediation_window_seconds", c.remediation_window_seconds, 1u, 4 * week);
  s.read("fabric_min_nodes", c.fabric_min_nodes, 2u, 100000u);
  s.read("fabric_window_seconds", c.fabric_window_seconds, 1u, 86400u);
  s.read("fabric_hold_seconds", c.fabric_hold_seconds, 0u, 3600u);
  // A held report must still find its incident open when it is released.
  if (c.fabric_hold_seconds >= c.fabric_window_seconds)
    s.error("fabric_hold_seconds", "must be below fabric_window_seconds ("
                                     + std::to_string(c.fabric_window_seconds) + ")");
  s.finish();
}

// A lower-case RFC 1123 label or subdomain, as CRD groups and plurals are.
bool dns_name(const std::string& text) {
  static const std::regex name{
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"};
  return text.size() <= 253 && std::regex_match(text, name);
}

// remediation.custom_actions[]: each names its customRecommendedAction once,
// and a CRD by group/version, kind and plural (issue 19: NVSentinel's CUSTOM
// action, carried to a CR the operator's controller carries out).
void read_custom_actions(section_reader& s, remediation_section& c) {
  auto entries = s.items("custom_actions");
  if (!entries)
    return;
  for (auto& e : *entries) {
    custom_action_config a;
    e.read("name", a.name);
    e.read("api_version", a.api_version);
    e.read("kind", a.kind);
    e.read("plural", a.plural);
    if (a.name.empty())
      e.error("name", "every entry needs the customRecommendedAction it answers");
    for (const auto& earlier : c.custom_actions)
      if (!a.name.empty() && earlier.name == a.name)
        e.error("name", "'" + a.name + "' is named by an earlier entry");
    const auto slash = a.api_version.find('/');
    if (slash == std::string::npos || !dns_name(a.api_version.substr(0, slash))
        || a.api_version.substr(0, slash).find('.') == std::string::npos
        || !dns_name(a.api_version.substr(slash + 1)))
      e.error("api_version", "'" + a.api_version
                               + "' is not <group>/<version> of a custom resource "
                                 "(group with a dot, e.g. repair.example.com/v1)");
    static const std::regex kind{"[A-Z][A-Za-z0-9]*"};
    if (!std::regex_match(a.kind, kind))
      e.error("kind", "'" + a.kind + "' is not a kind (CamelCase, e.g. CableReseat)");
    if (!dns_name(a.plural) || a.plural.find('.') != std::string::npos)
      e.error("plural", "'" + a.plural
                          + "' is not a resource name (lower case, e.g. "
                            "cablereseats)");
    e.finish();
    c.custom_actions.push_back(std::move(a));
  }
}

void read_remediation(section_reader s, remediation_section& c) {
  constexpr std::uint32_t week = 7 * 86400;
  s.read("enabled", c.enabled);
  s.read("dry_run", c.dry_run);
  s.read("poll_seconds", c.poll_seconds, 1u, 3600u);
  s.read("cr_timeout_seconds", c.cr_timeout_seconds, 60u, 7u * 86400u);
  s.read("terminate_timeout_seconds", c.terminate_timeout_seconds, 60u, 30u * 86400u);
  s.read_one_of("replace_with", c.replace_with, {"TerminateNode", "ProviderHook"});
  s.read("allow_unknown_gpu_model", c.allow_unknown_gpu_model);
  s.read("max_resets_per_gpu", c.max_resets_per_gpu, 1u, 100u);
  s.read("reset_window_seconds", c.reset_window_seconds, 60u, 4 * week);
  s.read("max_reboots_per_node", c.max_reboots_per_node, 1u, 100u);
  s.read("reboot_window_seconds", c.reboot_window_seconds, 60u, 4 * week);
  s.read_one_of("after_reboots", c.after_reboots, {"REPLACE_VM", "CONTACT_SUPPORT"});
  s.read("max_replaces_per_node", c.max_replaces_per_node, 1u, 100u);
  s.read("replace_window_seconds", c.replace_window_seconds, 60u, 4 * week);
  s.read("cooldown_seconds", c.cooldown_seconds, 0u, week);
  s.read("backoff_initial_seconds", c.backoff_initial_seconds, 0u, week);
  s.read("backoff_multiplier", c.backoff_multiplier, 1.0, 10.0);
  s.read("backoff_max_seconds", c.backoff_max_seconds, 0u, week);
  if (c.backoff_max_seconds < c.backoff_initial_seconds)
    s.error("backoff_max_seconds", "must be >= backoff_initial_seconds");
  s.read("verify_reset_seconds", c.verify_reset_seconds, 1u, week);
  s.read("verify_reboot_seconds", c.verify_reboot_seconds, 1u, week);
  s.read("verify_replace_seconds", c.verify_replace_seconds, 1u, week);
  read_custom_actions(s, c);
  s.read("max_custom_per_node", c.max_custom_per_node, 1u, 100u);
  s.read("custom_window_seconds", c.custom_window_seconds, 60u, 4 * week);
  s.read("verify_custom_seconds", c.verify_custom_seconds, 1u, week);
  s.read("validation_timeout_seconds", c.validation_timeout_seconds, 60u, 86400u);
  auto validation = s.section("validation");
  for (auto [key, job] :
       {std::pair{"reset", &c.validate_reset}, std::pair{"reboot", &c.validate_reboot}}) {
    auto v = validation.section(key);
    v.read("enabled", job->enabled);
    v.read("image", job->image);
    if (job->image.empty())
      v.error("image", "must name an image");
    v.read("command", job->command);
    v.finish();
  }
  validation.finish();
  s.finish();
}

void read_janitor(section_reader s, janitor_section& c) {
  s.read("in_process", c.in_process);
  s.read("poll_seconds", c.poll_seconds, 1u, 3600u);
  s.read("max_concurrent_nodes", c.max_concurrent_nodes, 1u, 1024u);
  s.read("kube_api_qps", c.kube_api_qps, 0u, 100000u);
  s.read("kube_api_burst", c.kube_api_burst, 1u, 100000u);
  s.read("job_namespace", c.job_namespace);
  if (c.job_namespace.empty())
    s.error("job_namespace", "must not be empty");
  s.read("reset_image", c.reset_image);
  s.read("reset_service_account", c.reset_service_account);
  s.read("reset_script_config_map", c.reset_script_config_map);
  s.read("runtime_class", c.runtime_class);
  s.read("teardown_timeout_seconds", c.teardown_timeout_seconds, 1u, 86400u);
  s.read("redeploy_timeout_seconds", c.redeploy_timeout_seconds, 1u, 86400u);
  s.read("reset_timeout_seconds", c.reset_timeout_seconds, 1u, 86400u);
  s.read("reboot_image", c.reboot_image);
  s.read("reboot_service_account", c.reboot_service_account);
  s.read("reboot_timeout_seconds", c.reboot_timeout_seconds, 1u, 86400u);
  auto bug_report = s.section("bug_report");
  bug_report.read("enabled", c.bug_report.enabled);
  bug_report.read("directory", c.bug_report.directory);
  if (c.bug_report.directory.empty() || c.bug_report.directory.front() != '/'
      || c.bug_report.directory.find('\'') != std::string::npos)
    bug_report.error("directory", "must be an absolute path without quotes");
  bug_report.read("timeout_seconds", c.bug_report.timeout_seconds, 30u, 7200u);
  bug_report.finish();
  s.read("listen", c.listen);
  s.finish();
}

// A {raise, clear} band: clear may not exceed raise.
void read_band(section_reader s, agent::dcgm_band& band, double max) {
  s.read("raise", band.raise, 0.0, max);
  s.read("clear", band.clear, 0.0, max);
  if (band.clear > band.raise)
    s.error("clear", "must be <= raise (the hysteresis band)");
  s.finish();
}

void read_dcgm(section_reader s, dcgm_section& d) {
  auto& t = d.thresholds;
  read_band(s.section("gpu_temp_c"), t.gpu_temp_c, 200.0);
  read_band(s.section("memory_temp_c"), t.memory_temp_c, 200.0);
  read_band(s.section("power_violation_share"), t.power_violation_share, 1.0);
  read_band(s.section("thermal_violation_share"), t.thermal_violation_share, 1.0);
  s.read("violation_counter_seconds", t.violation_counter_seconds, 1e-12, 1.0);
  read_band(s.section("nvlink_crc_per_second"), t.nvlink_crc_per_second, 1e12);
  read_band(s.section("nvlink_replay_per_second"), t.nvlink_replay_per_second, 1e12);
  read_band(s.section("nvlink_recovery_per_second"), t.nvlink_recovery_per_second, 1e12);
  s.read("retired_pages_replace", t.retired_pages_replace, 1.0, 1e6);
  s.finish();
}

void read_alertmanager(section_reader s, alertmanager_section& a) {
  s.read("node_labels", a.node_labels);
  if (a.node_labels.empty())
    s.error("node_labels", "must name at least one label");
  s.read("gpu_labels", a.gpu_labels);
  s.read("pci_labels", a.pci_labels);
  s.read("agent", a.agent);
  if (a.agent.empty())
    s.error("agent", "must not be empty");
  s.read("component_class", a.component_class);
  std::string action(to_string(a.default_action));
  s.read("default_action", action);
  if (auto parsed = parse_recommended_action(action))
    a.default_action = *parsed;
  else
    s.error("default_action", "'" + action + "' is not a recommendedAction");
  s.read("fatal_severities", a.fatal_severities);
  s.finish();
}

// The longest a janitor may take over one CR by its own timeouts: a GPU
// reset (janitor::longest_gpu_reset), or a reboot with its bug report first.
std::uint64_t janitor_longest_run_seconds(const janitor_section& j) {
  using std::chrono::seconds;
  const auto reset =
    std::uint64_t(janitor::longest_gpu_reset(seconds(j.teardown_timeout_seconds),
                                             seconds(j.reset_timeout_seconds),
                                             seconds(j.redeploy_timeout_seconds))
                    .count());
  const std::uint64_t reboot =
    std::uint64_t(j.reboot_timeout_seconds)
    + (j.bug_report.enabled ? j.bug_report.timeout_seconds : 0u);
  return std::max(reset, reboot);
}

} // namespace

expected<vigil_config> parse_config(const std::string& yaml_text) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return failure{"", "invalid YAML at line " + std::to_string(e.mark.line + 1) + ": "
                         + e.msg};
  }
  vigil_config config;
  std::vector<failure> errors;
  section_reader top(root, "", errors);
  read_log(top.section("log"), config.log);
  read_runtime(top.section("runtime"), config.runtime);
  read_journal(top.section("journal"), config.journal, errors);
  read_ingest(top.section("ingest"), config.ingest);
  read_control(top.section("control"), config.control);
  read_quarantine(top.section("quarantine"), config.quarantine);
  read_breaker(top.section("breaker"), config.breaker);
  read_drain(top.section("drain"), config.drain);
  read_correlation(top.section("correlation"), config.correlation);
  read_remediation(top.section("remediation"), config.remediation);
  read_janitor(top.section("janitor"), config.janitor);
  read_dcgm(top.section("dcgm"), config.dcgm);
  read_alertmanager(top.section("alertmanager"), config.alertmanager);
  top.finish();
  // A CR the node actor gives up on while the janitor still works on it is
  // escalated under it (a full drain and a RebootNode that waits on the
  // janitor's node lock), so the node actor must wait longer.
  if (const auto longest = janitor_longest_run_seconds(config.janitor);
      config.remediation.cr_timeout_seconds <= longest)
    errors.push_back(
      {"remediation.cr_timeout_seconds",
       "must exceed the janitor's longest run by its own timeouts ("
         + std::to_string(longest)
         + " s: janitor.teardown_timeout_seconds + reset_timeout_seconds + "
         + std::to_string(
           (janitor::job_deadline_grace + janitor::reset_pod_exit_wait).count())
         + " + twice redeploy_timeout_seconds, or reboot_timeout_seconds + "
           "bug_report.timeout_seconds)"});
  if (errors.empty())
    return config;
  // Report every problem at once, so one edit fixes them all.
  failure all = errors.front();
  for (size_t i = 1; i < errors.size(); ++i)
    all.what += "; " + errors[i].to_string();
  return all;
}

expected<vigil_config> load_config_file(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return failure{path, "cannot read the configuration file"};
  std::stringstream buffer;
  buffer << in.rdbuf();
  auto parsed = parse_config(buffer.str());
  if (!parsed)
    return failure{path + ": " + parsed.error().where, parsed.error().what};
  return parsed;
}

expected<std::pair<std::string, std::uint16_t>> split_listen(const std::string& listen,
                                                             const char* key) {
  auto colon = listen.rfind(':');
  if (colon == std::string::npos)
    return failure{key, "'" + listen + "' is not HOST:PORT"};
  auto host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  char* end = nullptr;
  auto port = std::strtoul(listen.c_str() + colon + 1, &end, 10);
  if (end == listen.c_str() + colon + 1 || *end != '\0' || port > 65535)
    return failure{key, "'" + listen + "' has no valid port"};
  return std::make_pair(host, static_cast<std::uint16_t>(port));
}

} // namespace vigil
