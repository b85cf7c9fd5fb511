// The control plane's actors as `vigil control` spawns them (and `vigil demo`
// and the benchmarks, on their own clocks), and the configuration translated
// into the rules' own types.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "actors/control/drain/drain_actor.hpp"
#include "actors/control/endpoints/control_endpoints.hpp"
#include "actors/control/node/node_actor.hpp"
#include "actors/control/rules/circuit_breaker.hpp"
#include "actors/control/rules/correlation_rules.hpp"
#include "actors/control/rules/quarantine_rules.hpp"
#include "actors/janitor/janitor_actor.hpp"
#include "runtime/config.hpp"
#include "runtime/journal/journal_store.hpp"
#include "runtime/kube/kube_client.hpp"
#include "runtime/replay/replay_analysis.hpp"

namespace vigil {

/// The control plane's actors as `vigil control` runs them (and `vigil demo`,
/// on a virtual clock): journal, gateway, breaker, fleet, ingest, the
/// in-process janitor and, with leader election, the elector.
struct control_plane {
  control_actors actors;
  /// Checks agents' tokens by TokenReview (control.token_review); null when off.
  caf::actor authenticator;
  /// Every actor, named, for the root supervisor to adopt.
  std::vector<std::pair<std::string, caf::actor>> named;
};

struct control_plane_options {
  /// Threads of their own, in production, for the journal writer (it blocks
  /// on the database) and for the intake: the journal and ingest actors,
  /// which every agent's acknowledgement waits on, must not wait for a CAF
  /// worker behind the fleet's follow-up work (drains, watch events); at
  /// 5,000 cordons a second on two cores they waited seconds (BENCHMARKS.md
  /// "Cordons a second on two cores"). False under CAF's test coordinator,
  /// where everything runs on one thread.
  bool own_threads = true;
  /// The memory keeper (actors/supervisor/memory_keeper.hpp): a timer that
  /// re-arms for as long as the process runs. False where time is virtual
  /// (`vigil demo`, CAF's test coordinator).
  bool memory_keeper = true;
  std::string replica_identity = "vigil-control"; ///< the Lease holder's name
  /// The client the leader and shard electors write their Leases through
  /// (api_server::coordination); null: the main client's gateway.
  std::shared_ptr<kube::kube_client> coordination_client;
  /// The in-process janitor's own client (api_server::janitor); null: the
  /// main client's gateway.
  std::shared_ptr<kube::kube_client> janitor_client;
  /// Sharded: a second connection to the journal for its tail (null: the
  /// writer's).
  std::shared_ptr<journal_store> journal_tail_db;
  /// A connection of its own for the fleet's rebuild snapshots (null: none
  /// are taken; control.snapshot_interval_seconds 0 too).
  std::shared_ptr<journal_store> snapshot_db;
};

/// Spawns the control plane from `config` (already validated; the command
/// line's overrides applied). Fails when the drain section is inconsistent.
expected<control_plane>
spawn_control_plane(caf::actor_system& system, const vigil_config& config,
                    std::shared_ptr<journal_store> journal_db,
                    std::shared_ptr<kube::kube_client> kube_client,
                    std::shared_ptr<const clock> time,
                    const control_plane_options& options);

/// What every node actor reads, from the configuration: the rules' own
/// types, with each stage's dry run extended to the stages after it
/// (control.dry_run → quarantine → drain → remediation). Fails when the drain
/// section does not validate.
expected<std::shared_ptr<node_settings>> node_settings_from(const vigil_config& config);

/// The parts of a configuration `vigil replay --what-if` compares.
decision_policy decision_policy_from(const vigil_config& config);

/// Configuration (already validated) to the rules' own types.
control::quarantine_policy quarantine_policy_from(const quarantine_config& config);
control::breaker_config breaker_config_from(const breaker_settings& settings);
control::correlation_config correlation_config_from(const correlation_section& section);
/// The drain section as the drain actors read it; `dry_run` is the global one.
drain_settings drain_settings_from(const drain_section& section, bool dry_run);
remediation_settings remediation_settings_from(const remediation_section& section);
janitor_settings janitor_settings_from(const janitor_section& section);

} // namespace vigil
