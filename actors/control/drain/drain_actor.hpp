// The drain workflow actor: one per drain, spawned by the node actor once the
// node is quarantined and linked to it. It lists the node's pods, plans the
// drain (full, or partial for COMPONENT_RESET, seed 000 §3.1), journals the
// plan before the first eviction, evicts through the Eviction API
// (PodDisruptionBudgets answer 429 and are retried with backoff), waits for
// the pods to go (re-listing them on the actor clock), journals the outcome
// and reports it to its node actor. A cancel (the quarantine was released,
// seed 000 §3.2) stops it; pods already asked to go are not brought back.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <caf/actor.hpp>
#include <caf/actor_addr.hpp>
#include <caf/replies_to.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_actor.hpp>

#include "actors/control/rules/drain_plan.hpp"
#include "actors/gateway/kube_gateway_messages.hpp"
#include "actors/journal/journal_messages.hpp"
#include "actors/protocol/control_messages.hpp"
#include "actors/supervisor/message_stats.hpp"
#include "messages/gpu_allocations.hpp"
#include "runtime/clock.hpp"

namespace vigil {

struct drain_settings {
  control::drain_config config;
  /// How often the pods are re-listed while the drain waits for them to go.
  caf::timespan poll_interval = std::chrono::seconds{5};
  /// Listing or journaling failed: first retry delay, doubling up to the max.
  caf::timespan retry_initial = std::chrono::seconds{1};
  caf::timespan retry_max = std::chrono::seconds{60};
  bool dry_run = false; ///< plan and journal; evict nothing
  /// Read the node's ResourceClaims and ResourceSlices (Dynamic Resource
  /// Allocation) for the GPU-to-pod mapping; a cluster without DRA answers
  /// 404 and is skipped.
  bool read_dra = true;
};

struct drain_state {
  std::string node_name;
  std::string key; ///< control::drain_key of the request
  control::drain_request request;
  /// The node agent's PodResources report when the drain started (seed 000
  /// §3.1); nullopt when the agent has sent none.
  std::optional<gpu_allocations> allocations;
  std::optional<gpu_allocations> dra; ///< from the node's ResourceClaims, when read
  std::shared_ptr<const drain_settings> settings;
  kube_gateway_handle gateway;
  journal_handle journal;
  /// The node actor, told when the drain ends. Weak: the node actor holds the
  /// drain, and a cycle of strong handles would keep both alive for ever.
  caf::actor_addr owner;
  std::shared_ptr<const clock> time;
  wall_time started{}; ///< names this run in its journal rows' keys
  std::optional<control::drain_progress> progress; ///< set once planned and journaled
  std::size_t evictions = 0;                       ///< evictions the API server accepted
  std::size_t deletions = 0;                       ///< deletions after a timeout
  std::size_t in_flight = 0;                       ///< eviction/deletion requests
  bool listing = false;                            ///< a pod list request is out
  bool planning = false; ///< GPU holders being read, or the plan being journaled
  bool tick_armed = false;
  bool ending = false;      ///< the outcome row is being journaled
  std::string end_outcome;  ///< "succeeded", "cancelled", "skipped", "dry_run"
  std::string end_body;     ///< the outcome row's body
  bool end_writing = false; ///< its append is in flight
  caf::timespan backoff{};
  static inline const char* name = "drain";
};

using drain_actor = caf::stateful_actor<drain_state, observed<caf::event_based_actor>>;

/// Whoever started the drain (the node actor): told once how it ended, as
/// (drained_atom, key, outcome, evictions, deletions).
using drain_owner = caf::typed_actor<
  caf::reacts_to<drained_atom, std::string, std::string, std::uint64_t, std::uint64_t>>;

/// Pods' GPUs come from `allocations` (the kubelet's, through the node's
/// agent), else from their annotation; unknown GPUs mean a full drain.
/// (cancel_atom, why): stop and report "cancelled". When the drain ends the
/// owner hears of it and the actor quits.
caf::behavior drain(drain_actor* self, std::string node, control::drain_request request,
                    std::optional<gpu_allocations> allocations,
                    std::shared_ptr<const drain_settings> settings,
                    kube_gateway_handle gateway, journal_handle journal,
                    drain_owner owner, std::shared_ptr<const clock> time);

} // namespace vigil
