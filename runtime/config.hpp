// vigil's configuration: typed structs loaded from YAML and validated before
// anything starts. config/vigil.yaml documents every field with unit and default;
// the defaults here and there must agree (a test checks it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actors/agent/dcgm/dcgm_thresholds.hpp"
#include "actors/control/ingest/alertmanager.hpp"
#include "actors/control/rules/node_conditions.hpp"
#include "messages/expected.hpp"
#include "messages/health_event.hpp"

namespace vigil {

enum class log_format { json, text };

struct log_config {
  log_format format = log_format::json;
  std::string level = "info"; ///< trace, debug, info, warn, error, critical, off
};

struct runtime_config {
  /// CAF scheduler workers; 0 = one per core (CAF's own default is at least 4).
  std::uint32_t scheduler_threads = 0;
  /// How long in-flight work may take to finish on SIGTERM before it is cancelled.
  std::uint32_t shutdown_grace_ms = 10000;
};

struct journal_config {
  /// "sqlite:PATH" or "postgresql://user:pass@host:port/db?sslmode=…".
  std::string url = "sqlite:vigil-journal.db";
  std::uint32_t batch_max_events = 512; ///< flush when this many appends wait
  /// … or when the oldest waited this long; 0 = group commit (write as soon
  /// as the writer is idle; appends arriving meanwhile form the next batch).
  std::uint32_t batch_max_delay_ms = 0;
  std::uint32_t queue_capacity = 65536; ///< appends waiting beyond this are refused
  std::uint32_t reconnect_initial_ms = 100;
  std::uint32_t reconnect_max_ms = 10000;
  /// Rows older than this many days are deleted once a fleet snapshot no
  /// longer needs them (control.snapshot_interval_seconds); 0: kept for good.
  std::uint32_t retention_days = 30;
};

struct ingest_config {
  decode_limits limits; ///< bounds on one HealthEvent
  std::uint32_t max_body_bytes = 8 * 1024 * 1024;
  /// Journal appends in flight beyond which a request is answered 503 at once.
  std::uint32_t max_pending_events = 32768;
};

/// `vigil control`: where it listens, how it reaches the API server.
struct control_config {
  std::string listen = "0.0.0.0:8443"; ///< ingest, /metrics, /healthz, /readyz
  std::string tls_cert_file;           ///< HTTPS; re-read when the files change
  std::string tls_key_file;
  bool plain_http = false; ///< serve without TLS (a warning); else the files are required
  std::string token_file;  ///< bearer token for POST /v1/events; empty: no authentication
  std::string kubeconfig;  ///< empty: in-cluster, else $KUBECONFIG, else ~/.kube/config
  /// The client-side limit on API requests (client-go's QPS and burst): the
  /// node actors' requests; the Leases and the in-process janitor have
  /// clients of their own. 0 turns the limiter off.
  std::uint32_t kube_api_qps = 50;
  std::uint32_t kube_api_burst = 100;
  bool dry_run = false; ///< decide and journal; write nothing to the API server
  std::string events_namespace = "default";
  std::string gpu_node_label = "nvidia.com/gpu.present=true"; ///< a label selector
  std::uint32_t ingest_deadline_ms = 5000; ///< answer 503 when the journal is slower
  std::uint32_t retry_after_seconds = 2;
  /// Only the replica holding the Lease acts; the others stand by.
  bool leader_election = true;
  std::string lease_namespace = "vigil";
  std::string lease_name = "vigil-control";
  std::uint32_t lease_seconds = 15;
  std::uint32_t renew_deadline_seconds = 10;
  std::uint32_t retry_period_seconds = 2;
  /// Node shards, each owned through its own Lease (issue 22); 1: one leader.
  std::uint32_t shards = 1;
  /// How often the fleet's rebuild snapshot is taken (issue 22), so a
  /// restart reads only the journal rows that still matter; 0: never.
  std::uint32_t snapshot_interval_seconds = 600;
  /// A GPU node whose agent sent no heartbeat or event for this long gets
  /// the VigilAgentReporting=False condition and an Event; 0: not watched.
  std::uint32_t agent_silence_seconds = 300;
  /// A GPU node whose Ready condition is False or Unknown this long gets a
  /// NodeNotReady HealthEvent from vigil recommending not_ready_action
  /// (seconds; 0: never); node-problem-detector's condition types that become
  /// events (True = a problem), with node_problem_action.
  std::uint32_t not_ready_after = 300;
  std::string not_ready_action = "RESTART_BM";
  std::vector<std::string> node_problem_conditions =
    control::node_condition_settings{}.problem_types;
  std::string node_problem_action = "NONE";
  /// Agents' projected ServiceAccount tokens checked by TokenReview; each
  /// agent may report for its own node only.
  struct token_review_config {
    bool enabled = false;
    std::string audience = "vigil";
    std::string agent_service_account = "vigil-agent"; ///< in lease_namespace
  } token_review;
  /// ServiceAccounts ("namespace/name") whose tokens may read /metrics
  /// (TokenReview); empty: /metrics is open.
  std::vector<std::string> metrics_readers;
};

/// One quarantine rule as configured (quarantine.rules[]); every match list
/// empty = any. Values are validated while parsing.
struct quarantine_rule_config {
  std::string name;
  std::vector<std::string> agents, component_classes, check_names, error_codes,
    recommended_actions, entity_types;
  std::optional<bool> is_fatal;
  bool cordon = true;
  struct taint_config {
    std::string key, value, effect = "NoSchedule";
  };
  std::vector<taint_config> taints;
  std::string condition_type;
};

struct quarantine_config {
  std::string opt_out_label = "vigil.dev/quarantine-opt-out";
  /// The quarantine stage's dry run: decide and journal, cordon nothing.
  /// The stages after it (drain, remediation) are dry too: they never act
  /// on a node vigil did not cordon.
  bool dry_run = false;
  /// Default: one rule, any fatal event cordons and taints vigil.dev/fault.
  std::vector<quarantine_rule_config> rules = {default_rule()};
  static quarantine_rule_config default_rule() {
    quarantine_rule_config r;
    r.name = "fatal";
    r.is_fatal = true;
    r.taints = {{"vigil.dev/fault", "true", "NoSchedule"}};
    return r;
  }
};

struct breaker_settings {
  double max_cordoned_percent = 10.0;
  std::uint32_t max_cordoned_nodes = 20; ///< 0 = unlimited
  std::uint32_t window_seconds = 300;
  std::string pool_label = "topology.kubernetes.io/rack";
  std::uint32_t max_concurrent_per_pool = 2; ///< 0 = unlimited
};

/// How a namespace's pods leave a node being drained.
struct drain_namespace_config {
  std::string namespace_pattern;     ///< whole-name regex ("namespace" in YAML)
  std::string mode = "Immediate";    ///< Immediate, AllowCompletion, DeleteAfterTimeout
  std::uint32_t timeout_minutes = 0; ///< DeleteAfterTimeout: wait this long, then delete
};

struct drain_section {
  bool dry_run = false; ///< plan and journal drains; evict nothing
  std::string default_mode = "Immediate";
  std::vector<drain_namespace_config> namespaces; ///< first match decides
  std::string system_namespaces =
    "kube-system|kube-public|kube-node-lease|vigil|gpu-operator|network-operator";
  std::uint32_t eviction_retry_seconds = 5; ///< after a 429 (PDB), doubling
  std::uint32_t eviction_retry_max_seconds = 120;
  std::uint32_t poll_seconds = 5; ///< re-list the node's pods while waiting
};

/// Thresholds of the correlation rules; times in seconds.
struct correlation_section {
  std::uint32_t dedup_window_seconds = 180;
  std::uint32_t xid_repeat_threshold = 5;      ///< bursts of fatal XIDs on one GPU …
  std::uint32_t xid_window_seconds = 86400;    ///< … within this → CONTACT_SUPPORT
  std::uint32_t xid_burst_seconds = 180;       ///< XIDs this close count as one burst
  std::uint32_t xid_sticky_seconds = 10800;    ///< the escalation outlives the last XID
  std::uint32_t nic_flap_threshold = 3;        ///< link_downed events on one port …
  std::uint32_t nic_flap_window_seconds = 600; ///< … within this → REPLACE_VM
  /// A port DOWN this long with no link_downed delta is dropped (seed 002 §6.2).
  std::uint32_t nic_drop_after_seconds = 240;
  std::string nic_drop_action = "REPLACE_VM";
  std::uint32_t remediation_repeat_threshold = 5;
  std::uint32_t remediation_window_seconds = 604800;
  std::uint32_t fabric_min_nodes = 3;        ///< NIC ports down on this many nodes …
  std::uint32_t fabric_window_seconds = 300; ///< … within this: one fabric incident
  std::uint32_t fabric_hold_seconds =
    30; ///< a link down waits this long for its incident
};

/// An operator's own remediation for CUSTOM events: the CR vigil creates for
/// those whose customRecommendedAction is `name` (remediation.custom_actions[]).
struct custom_action_config {
  std::string name;        ///< the customRecommendedAction ("RESEAT_CABLE")
  std::string api_version; ///< "<group>/<version>" of the CRD ("repair.example.com/v1")
  std::string kind;        ///< "CableReseat"
  std::string plural;      ///< "cablereseats"
};

/// Remediation and its escalation ladder; seconds.
struct remediation_section {
  bool enabled = true;                             ///< false: quarantine and drain only
  bool dry_run = false;                            ///< plan and journal; create no CR
  std::uint32_t poll_seconds = 10;                 ///< how often the CR in flight is read
  std::uint32_t cr_timeout_seconds = 7200;         ///< unfinished CR counts as failed
  std::uint32_t terminate_timeout_seconds = 86400; ///< the same for a TerminateNode
  std::string replace_with = "TerminateNode";      ///< REPLACE_VM: or "ProviderHook"
  bool allow_unknown_gpu_model = false;            ///< reset GPUs of no known generation
  std::uint32_t max_resets_per_gpu = 3;
  std::uint32_t reset_window_seconds = 86400;
  std::uint32_t max_reboots_per_node = 3;
  std::uint32_t reboot_window_seconds = 86400;
  std::string after_reboots = "REPLACE_VM"; ///< or CONTACT_SUPPORT
  std::uint32_t max_replaces_per_node = 1;
  std::uint32_t replace_window_seconds = 86400;
  std::uint32_t cooldown_seconds = 300;
  std::uint32_t backoff_initial_seconds = 120;
  double backoff_multiplier = 2.0;
  std::uint32_t backoff_max_seconds = 3600;
  std::uint32_t verify_reset_seconds = 600;
  std::uint32_t verify_reboot_seconds = 1800;
  std::uint32_t verify_replace_seconds = 3600;
  std::vector<custom_action_config> custom_actions; ///< CUSTOM events' CR kinds
  std::uint32_t max_custom_per_node = 3; ///< custom remediations per window, then support
  std::uint32_t custom_window_seconds = 86400;
  std::uint32_t verify_custom_seconds = 1800;
  /// Proof of recovery before the node returns (seed 003): a Job per kind.
  struct validation_job {
    bool enabled = true;
    std::string image = "nvcr.io/nvidia/cloud-native/dcgm:4.2.3-1-ubuntu22.04";
    std::vector<std::string> command; ///< empty: the built-in check
  };
  validation_job validate_reset;
  validation_job validate_reboot;
  std::uint32_t validation_timeout_seconds = 1800;
};

/// The GPUReset and RebootNode controllers (the janitor); seconds.
struct janitor_section {
  bool in_process = true; ///< `vigil control` runs the controllers too
  std::uint32_t poll_seconds = 5;
  /// Nodes whose CRs one pass works on at once (one node's stay serial).
  std::uint32_t max_concurrent_nodes = 16;
  /// The janitor's own client-side limit on API requests (0: off).
  std::uint32_t kube_api_qps = 50;
  std::uint32_t kube_api_burst = 100;
  std::string job_namespace = "vigil-system";
  std::string reset_image = "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04";
  std::string reset_service_account = "vigil-gpu-reset";
  std::string reset_script_config_map = "vigil-gpu-reset-script";
  std::string runtime_class; ///< "" leaves runtimeClassName out
  std::uint32_t teardown_timeout_seconds = 300;
  std::uint32_t redeploy_timeout_seconds = 300; ///< operands back after the restore
  std::string listen = "0.0.0.0:8080"; ///< `vigil janitor` alone: /metrics, /healthz
  std::uint32_t reset_timeout_seconds = 1500;
  std::string reboot_image = "busybox:1.36";
  std::string reboot_service_account = "vigil-reboot";
  std::uint32_t reboot_timeout_seconds = 1800;
  /// nvidia-bug-report.sh on the node before a reboot that follows a failed
  /// GPU reset, its output kept in `directory` on the node's disk.
  struct bug_report_section {
    bool enabled = true;
    std::string directory = "/var/log/vigil/bug-reports";
    std::uint32_t timeout_seconds = 600;
  } bug_report;
};

/// The agent's DCGM telemetry check (seed 004): what a dcgm-exporter page
/// must show to be a fault. The exporter's address and the interval are
/// `vigil agent` flags (--dcgm-url, --dcgm-interval).
struct dcgm_section {
  agent::dcgm_thresholds thresholds;
};

/// POST /v1/alertmanager: how an Alertmanager alert becomes a HealthEvent.
using alertmanager_section = control::alertmanager_mapping;

struct vigil_config {
  log_config log;
  runtime_config runtime;
  journal_config journal;
  ingest_config ingest;
  control_config control;
  quarantine_config quarantine;
  breaker_settings breaker;
  drain_section drain;
  correlation_section correlation;
  remediation_section remediation;
  janitor_section janitor;
  dcgm_section dcgm;
  alertmanager_section alertmanager;
};

/// Parses YAML text. Unknown keys, wrong types and out-of-range values fail
/// with the key's path, e.g. "journal.batch_max_events: 0 is out of range [1, 1000000]".
expected<vigil_config> parse_config(const std::string& yaml_text);

/// Reads and parses a file; an unreadable file fails with its name.
expected<vigil_config> load_config_file(const std::string& path);

/// "HOST:PORT" (IPv6 in brackets) of the config key `key`, or a failure naming it.
expected<std::pair<std::string, std::uint16_t>> split_listen(const std::string& listen,
                                                             const char* key);

} // namespace vigil
