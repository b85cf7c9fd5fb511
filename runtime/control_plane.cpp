#include "runtime/control_plane.hpp"

#include <algorithm>

#include <caf/all.hpp>

#include "actors/control/auth/authenticator.hpp"
#include "actors/control/breaker/breaker_actor.hpp"
#include "actors/control/fleet/fleet_actor.hpp"
#include "actors/control/fleet/snapshot_actor.hpp"
#include "actors/control/ingest/ingest_actor.hpp"
#include "actors/control/leader/leader_actor.hpp"
#include "actors/control/leader/shard_elector.hpp"
#include "actors/gateway/kube_gateway.hpp"
#include "actors/journal/journal_actor.hpp"
#include "actors/supervisor/memory_keeper.hpp"
#include "runtime/logging.hpp"

namespace vigil {

decision_policy decision_policy_from(const vigil_config& config) {
  decision_policy p;
  p.quarantine = quarantine_policy_from(config.quarantine);
  p.correlation = correlation_config_from(config.correlation);
  p.remediation = remediation_settings_from(config.remediation).options;
  return p;
}

control::quarantine_policy quarantine_policy_from(const quarantine_config& config) {
  control::quarantine_policy policy;
  policy.opt_out_label = config.opt_out_label;
  for (const auto& r : config.rules) {
    control::quarantine_rule rule;
    rule.name = r.name;
    rule.match.agents = r.agents;
    rule.match.component_classes = r.component_classes;
    rule.match.check_names = r.check_names;
    rule.match.error_codes = r.error_codes;
    rule.match.entity_types = r.entity_types;
    rule.match.is_fatal = r.is_fatal;
    for (const auto& a : r.recommended_actions)
      if (auto action = parse_recommended_action(a)) // validated while parsing
        rule.match.actions.push_back(*action);
    rule.cordon = r.cordon;
    for (const auto& t : r.taints)
      rule.taints.push_back({t.key, t.value,
                             control::parse_taint_effect(t.effect).value_or(
                               control::taint_effect::no_schedule)});
    rule.condition_type = r.condition_type;
    policy.rules.push_back(std::move(rule));
  }
  return policy;
}

control::breaker_config breaker_config_from(const breaker_settings& s) {
  control::breaker_config c;
  c.max_cordoned_percent = s.max_cordoned_percent;
  if (s.max_cordoned_nodes > 0)
    c.max_cordoned_nodes = s.max_cordoned_nodes;
  c.window = std::chrono::seconds{s.window_seconds};
  c.pool_label = s.pool_label;
  c.max_concurrent_per_pool = s.max_concurrent_per_pool;
  return c;
}

drain_settings drain_settings_from(const drain_section& s, bool dry_run) {
  auto mode_of = [](const std::string& name) {
    if (name == "AllowCompletion")
      return control::drain_mode::allow_completion;
    if (name == "DeleteAfterTimeout")
      return control::drain_mode::delete_after_timeout;
    return control::drain_mode::immediate;
  };
  drain_settings d;
  d.dry_run = dry_run || s.dry_run;
  d.config.default_mode = mode_of(s.default_mode);
  for (const auto& n : s.namespaces)
    d.config.namespaces.push_back(
      {n.namespace_pattern, mode_of(n.mode), std::chrono::minutes{n.timeout_minutes}});
  d.config.system_namespaces = s.system_namespaces;
  d.config.eviction_retry = std::chrono::seconds{s.eviction_retry_seconds};
  d.config.eviction_retry_max = std::chrono::seconds{s.eviction_retry_max_seconds};
  d.poll_interval = std::chrono::seconds{s.poll_seconds};
  return d;
}

control::correlation_config correlation_config_from(const correlation_section& s) {
  using std::chrono::seconds;
  control::correlation_config c;
  c.dedup_window = seconds{s.dedup_window_seconds};
  c.xid_repeat_threshold = s.xid_repeat_threshold;
  c.xid_window = seconds{s.xid_window_seconds};
  c.xid_burst = seconds{s.xid_burst_seconds};
  c.xid_sticky = seconds{s.xid_sticky_seconds};
  c.nic_flap_threshold = s.nic_flap_threshold;
  c.nic_flap_window = seconds{s.nic_flap_window_seconds};
  c.nic_drop_after = seconds{s.nic_drop_after_seconds};
  c.nic_drop_action =
    parse_recommended_action(s.nic_drop_action).value_or(recommended_action::replace_vm);
  c.remediation_repeat_threshold = s.remediation_repeat_threshold;
  c.remediation_window = seconds{s.remediation_window_seconds};
  c.fabric_min_nodes = s.fabric_min_nodes;
  c.fabric_window = seconds{s.fabric_window_seconds};
  c.fabric_hold = seconds{s.fabric_hold_seconds};
  return c;
}

remediation_settings remediation_settings_from(const remediation_section& s) {
  using std::chrono::seconds;
  remediation_settings r;
  r.validation.after_reset = s.validate_reset.enabled;
  r.validation.after_reboot = s.validate_reboot.enabled;
  r.validation.timeout = seconds{s.validation_timeout_seconds};
  r.validation_jobs.reset = {s.validate_reset.image, s.validate_reset.command};
  r.validation_jobs.reboot = {s.validate_reboot.image, s.validate_reboot.command};
  r.enabled = s.enabled;
  r.dry_run = s.dry_run;
  r.poll = seconds{s.poll_seconds};
  r.cr_timeout = seconds{s.cr_timeout_seconds};
  r.terminate_timeout = seconds{s.terminate_timeout_seconds};
  r.options.replace = s.replace_with == "ProviderHook"
                        ? control::replace_target::provider_hook
                        : control::replace_target::terminate_node;
  r.options.allow_unknown_model = s.allow_unknown_gpu_model;
  for (const auto& a : s.custom_actions) {
    const auto slash = a.api_version.find('/'); // checked by the config reader
    r.options.custom_actions.push_back({a.name, a.api_version.substr(0, slash),
                                        a.api_version.substr(slash + 1), a.kind,
                                        a.plural});
  }
  auto& e = r.escalation;
  e.max_resets_per_gpu = s.max_resets_per_gpu;
  e.reset_window = seconds{s.reset_window_seconds};
  e.max_reboots_per_node = s.max_reboots_per_node;
  e.reboot_window = seconds{s.reboot_window_seconds};
  e.after_reboots =
    parse_recommended_action(s.after_reboots).value_or(recommended_action::replace_vm);
  e.max_replaces_per_node = s.max_replaces_per_node;
  e.replace_window = seconds{s.replace_window_seconds};
  e.cooldown = seconds{s.cooldown_seconds};
  e.backoff_initial = seconds{s.backoff_initial_seconds};
  e.backoff_multiplier = s.backoff_multiplier;
  e.backoff_max = seconds{s.backoff_max_seconds};
  e.verify_reset_timeout = seconds{s.verify_reset_seconds};
  e.verify_reboot_timeout = seconds{s.verify_reboot_seconds};
  e.verify_replace_timeout = seconds{s.verify_replace_seconds};
  e.max_custom_per_node = s.max_custom_per_node;
  e.custom_window = seconds{s.custom_window_seconds};
  e.verify_custom_timeout = seconds{s.verify_custom_seconds};
  return r;
}

janitor_settings janitor_settings_from(const janitor_section& s) {
  using std::chrono::seconds;
  janitor_settings j;
  j.poll = seconds{s.poll_seconds};
  j.max_concurrent_nodes = s.max_concurrent_nodes;
  auto& g = j.gpu_reset;
  g.job_namespace = s.job_namespace;
  g.image = s.reset_image;
  g.service_account = s.reset_service_account;
  g.script_config_map = s.reset_script_config_map;
  g.runtime_class = s.runtime_class;
  g.teardown_timeout = seconds{s.teardown_timeout_seconds};
  g.redeploy_timeout = seconds{s.redeploy_timeout_seconds};
  g.job_timeout = seconds{s.reset_timeout_seconds};
  auto& r = j.reboot;
  r.job_namespace = s.job_namespace;
  r.image = s.reboot_image;
  r.service_account = s.reboot_service_account;
  r.timeout = seconds{s.reboot_timeout_seconds};
  r.bug_report.enabled = s.bug_report.enabled;
  r.bug_report.host_directory = s.bug_report.directory;
  r.bug_report.timeout = seconds{s.bug_report.timeout_seconds};
  return j;
}

expected<std::shared_ptr<node_settings>> node_settings_from(const vigil_config& config) {
  const auto& cc = config.control;
  auto settings = std::make_shared<node_settings>();
  settings->quarantine = quarantine_policy_from(config.quarantine);
  auto gpu_nodes = control::label_selector::parse(cc.gpu_node_label);
  if (!gpu_nodes)
    return failure{"control.gpu_node_label", gpu_nodes.error().to_string()};
  settings->gpu_nodes = std::move(*gpu_nodes);
  settings->events_namespace = cc.events_namespace;
  settings->shards = cc.leader_election ? cc.shards : 1;
  settings->breaker_window = breaker_config_from(config.breaker).window;
  settings->agent_silence = std::chrono::seconds{cc.agent_silence_seconds};
  settings->conditions.not_ready_after = std::chrono::seconds{cc.not_ready_after};
  settings->conditions.not_ready_action = *parse_recommended_action(cc.not_ready_action);
  settings->conditions.problem_types = cc.node_problem_conditions;
  settings->conditions.problem_action = *parse_recommended_action(cc.node_problem_action);
  // Each stage's dry run covers the stages after it: no drain on a node
  // vigil did not cordon, no reset under pods never evicted.
  settings->dry_run = cc.dry_run || config.quarantine.dry_run;
  auto drain = drain_settings_from(config.drain, settings->dry_run);
  // seed 000 §4.3 case 3: vigil's own pods (its namespace, the janitor's Jobs)
  // are never drained; a reset ends before a full drain, never under it.
  drain.config.vigil_namespaces = {cc.lease_namespace, config.janitor.job_namespace};
  settings->drain = std::make_shared<drain_settings>(std::move(drain));
  if (auto valid = control::validate(settings->drain->config); !valid)
    return valid.error();
  settings->correlation = correlation_config_from(config.correlation);
  settings->remediation = remediation_settings_from(config.remediation);
  settings->remediation.dry_run =
    settings->remediation.dry_run || settings->drain->dry_run;
  settings->remediation.pool_label = config.breaker.pool_label;
  // The validation Jobs run beside the janitor's, as vigil's own pods.
  settings->remediation.validation_jobs.job_namespace = config.janitor.job_namespace;
  settings->remediation.validation_jobs.service_account =
    config.janitor.reset_service_account;
  settings->remediation.validation_jobs.runtime_class = config.janitor.runtime_class;
  // Retention shorter than the longest window a rule looks back would let a
  // rebuild that reads the whole journal (its windows changed, or no usable
  // snapshot) decide on a history with rows missing.
  const auto retention = std::chrono::hours{24} * config.journal.retention_days;
  const auto longest =
    longest_horizon(horizons_of(settings->correlation, settings->breaker_window));
  if (config.journal.retention_days > 0 && retention < longest)
    return failure{
      "journal.retention_days",
      std::to_string(config.journal.retention_days)
        + " days is shorter than the longest a journal row can matter to "
          "the rules as configured ("
        + std::to_string(std::chrono::duration_cast<std::chrono::hours>(longest).count())
        + " h: the longest correlation, remediation or breaker window, plus "
          "an hour for late events)"};
  return settings;
}

expected<control_plane>
spawn_control_plane(caf::actor_system& system, const vigil_config& config,
                    std::shared_ptr<journal_store> journal_db,
                    std::shared_ptr<kube::kube_client> kube_client,
                    std::shared_ptr<const clock> time,
                    const control_plane_options& options) {
  const auto& cc = config.control;
  auto node_config = node_settings_from(config);
  if (!node_config)
    return node_config.error();
  auto settings = std::move(*node_config);
  const auto retention = std::chrono::hours{24} * config.journal.retention_days;
  auto janitor_options = janitor_settings_from(config.janitor);
  janitor_options.await_leadership = cc.leader_election;
  ingest_settings ingest_options;
  ingest_options.deadline = std::chrono::milliseconds{cc.ingest_deadline_ms};
  ingest_options.retry_after_seconds = static_cast<int>(cc.retry_after_seconds);
  // Sharded, every replica journals what agents send; the shard's owner acts.
  const bool sharded = cc.leader_election && cc.shards > 1;
  ingest_options.await_leadership = cc.leader_election && !sharded;
  ingest_options.admission.max_in_flight = config.ingest.max_pending_events;
  // Past half the deadline, new appends would not commit in time: shed at
  // the gate instead of answering 503 after the work (ingest_logic.hpp).
  ingest_options.admission.max_oldest_age = ingest_options.deadline / 2;
  ingest_options.gate = std::make_shared<ingest_gate>();
  control::lease_config lease;
  lease.ns = cc.lease_namespace;
  lease.name = cc.lease_name;
  lease.identity = options.replica_identity;
  lease.duration = std::chrono::seconds{cc.lease_seconds};
  lease.renew_deadline = std::chrono::seconds{cc.renew_deadline_seconds};
  lease.retry_period = std::chrono::seconds{cc.retry_period_seconds};
  // Each elector waits twice at the stop (a request in flight, then its
  // release), and the supervisor stops them one after the other (sharded,
  // the leader and the shard elector): together they take at most half the
  // shutdown grace, and the components stopped after them keep the rest.
  // (1 ms at least: a timeout of 0 would not even send the release.)
  const auto waits = sharded ? 4 : 2;
  lease.exit_wait =
    std::clamp(std::chrono::milliseconds{config.runtime.shutdown_grace_ms / (2 * waits)},
               std::chrono::milliseconds{1}, lease.exit_wait);

  control_plane plane;
  auto& actors = plane.actors;
  // Spawns `f` on a thread of its own where options.own_threads says so.
  auto spawn = [&](auto f, auto&&... xs) {
    return options.own_threads
             ? system.spawn<caf::detached>(f, std::forward<decltype(xs)>(xs)...)
             : system.spawn(f, std::forward<decltype(xs)>(xs)...);
  };
  auto writer = spawn(journal_writer, journal_db);
  journal_writer_handle reader;
  if (options.journal_tail_db) {
    reader = spawn(journal_writer, options.journal_tail_db);
    actors.journal = spawn(journal_with_reader, config.journal, writer, reader);
  } else {
    actors.journal = spawn(journal, config.journal, writer);
  }
  auto gateway_stats = std::make_shared<kube_gateway_stats>();
  actors.gateway_figures = gateway_stats;
  auto gateway = system.spawn(kube_gateway, kube_client, gateway_stats);
  auto breaker_settings = breaker_config_from(config.breaker);
  // Sharded, several replicas cordon and remediate: the cordon window and
  // the pools' slots live in the journal's database.
  breaker_settings.in_journal = sharded;
  actors.breaker =
    system.spawn(breaker, std::move(breaker_settings), actors.journal, time);
  actors.fleet =
    system.spawn(fleet, std::shared_ptr<const node_settings>(settings), gateway,
                 actors.journal, actors.breaker, time, true, cc.leader_election);
  actors.ingest = spawn(ingest, ingest_options, actors.journal, actors.fleet, time);
  caf::actor snapshots;
  if (config.journal.retention_days > 0 && cc.snapshot_interval_seconds == 0)
    component_logger("snapshot")
      ->warn("journal.retention_days is {} but control.snapshot_interval_seconds is 0: "
             "retention works from the fleet snapshots, so no journal row is deleted",
             config.journal.retention_days);
  if (options.snapshot_db && cc.snapshot_interval_seconds > 0) {
    auto snapshot_figures = std::make_shared<snapshot_stats>();
    snapshot_builder builder(settings->correlation, settings->breaker_window,
                             settings->quarantine.alias_entity_types);
    snapshots = system.spawn<caf::detached>(
      snapshot_actor, options.snapshot_db, std::move(builder), actors.fleet, time,
      caf::timespan{std::chrono::seconds{cc.snapshot_interval_seconds}}, retention,
      snapshot_figures);
    actors.snapshot_figures = snapshot_figures;
  }
  actors.admission_gate = ingest_options.gate;
  // The leader's followers; sharded, the fleet follows its shards instead
  // and the leader runs only the fleet-wide parts.
  std::vector<caf::actor> followers;
  if (!sharded)
    followers = {actors.fleet, actors.ingest};
  plane.named = {{"journal_writer", caf::actor_cast<caf::actor>(writer)},
                 {"journal", caf::actor_cast<caf::actor>(actors.journal)},
                 {"gateway", caf::actor_cast<caf::actor>(gateway)},
                 {"breaker", caf::actor_cast<caf::actor>(actors.breaker)},
                 {"fleet", actors.fleet},
                 {"ingest", actors.ingest}};
  if (snapshots) // stopped before the fleet it asks
    plane.named.emplace_back("snapshot_taker", snapshots);
  // What a rebuild, a handover or a backlog freed. malloc_trim holds the
  // arenas' locks while it walks them: on a thread of its own, not a CAF
  // worker the node actors need.
  if (options.memory_keeper)
    plane.named.emplace_back("memory_keeper", spawn(memory_keeper, memory_keeper_config{},
                                                    memory_keeper_probe{}));
  if (reader) // stopped after whatever reads the tail (newest first)
    plane.named.emplace(plane.named.begin() + 1, "journal_reader",
                        caf::actor_cast<caf::actor>(reader));
  if (config.janitor.in_process && settings->remediation.dry_run) {
    // A dry run writes nothing to the API server, and the janitor would act
    // on CRs that already exist.
    component_logger("janitor")->warn(
      "remediation dry run: the in-process janitor is not started");
  } else if (config.janitor.in_process) {
    // The janitor's controllers run in this process by default.
    actors.janitor_figures = janitor_options.metrics;
    // Through a client of its own where there is one: a reset under way
    // never queues behind the node actors' drain polls (counted with theirs
    // on /metrics).
    auto janitor_gateway = gateway;
    if (options.janitor_client) {
      janitor_gateway = system.spawn(kube_gateway, options.janitor_client, gateway_stats);
      plane.named.emplace_back("janitor_gateway",
                               caf::actor_cast<caf::actor>(janitor_gateway));
    }
    auto janitor =
      system.spawn(janitor_controllers, janitor_options, janitor_gateway, time);
    followers.push_back(janitor);
    plane.named.emplace_back("janitor", janitor);
  }
  if (cc.token_review.enabled || !cc.metrics_readers.empty()) {
    control::token_review_settings review;
    review.audience = cc.token_review.audience;
    review.agent_username = "system:serviceaccount:" + cc.lease_namespace + ":"
                            + cc.token_review.agent_service_account;
    for (const auto& reader : cc.metrics_readers) // namespace/name, checked
      review.metrics_readers.push_back("system:serviceaccount:"
                                       + reader.substr(0, reader.find('/')) + ":"
                                       + reader.substr(reader.find('/') + 1));
    plane.authenticator = system.spawn(authenticator, gateway, review, time);
    plane.named.emplace_back("authenticator", plane.authenticator);
  }
  // The Leases go through a gateway of their own where there is a client
  // for them: renewals must not queue behind node traffic.
  auto leases = gateway;
  if (options.coordination_client && cc.leader_election) {
    leases = system.spawn(kube_gateway, options.coordination_client,
                          std::make_shared<kube_gateway_stats>());
    plane.named.emplace_back("lease_gateway", caf::actor_cast<caf::actor>(leases));
  }
  if (cc.leader_election)
    plane.named.emplace_back(
      "leader", system.spawn(leader_elector, lease, leases, followers, time));
  if (sharded)
    plane.named.emplace_back("shard_elector",
                             system.spawn(shard_elector, lease, cc.shards, leases,
                                          std::vector<caf::actor>{actors.fleet}, time));
  return plane;
}

} // namespace vigil
