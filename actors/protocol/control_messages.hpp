// Messages of the control plane's actors (ingest, fleet, node, breaker).
// Local only: these types never cross a process boundary.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>

#include "actors/protocol/health_event_message.hpp"
#include "actors/protocol/shared_json.hpp"
#include "messages/agent_gpu_facts.hpp"
#include "messages/gpu_allocations.hpp"
#include "messages/health_event.hpp"

namespace vigil {

/// (route_atom, health_event, seq) to the fleet, then to the event's node
/// actor: the event is journaled (seq is its row) and not a duplicate.
using route_atom = caf::atom_constant<caf::atom("route")>;
/// (observe_atom, shared_json) to a node actor: the Node as the API server has
/// it, parsed once by the gateway's watch decoder.
using observe_atom = caf::atom_constant<caf::atom("observe")>;
/// (replay_atom, vector<health_event>, vector<replay_mark>) to a node actor:
/// its journaled events, oldest first, and the completed drains and fabric
/// incidents among them, folded in without side effects before it reconciles.
using replay_atom = caf::atom_constant<caf::atom("replay")>;
/// (history_atom) to a node actor: its journaled history is being read and
/// its replay follows; until the replay is in, it changes nothing on the
/// cluster (a node vigil cordoned would look healthy to it).
using history_atom = caf::atom_constant<caf::atom("history")>;
/// (reconcile_atom) to a node actor: compare desired with observed and converge.
using reconcile_atom = caf::atom_constant<caf::atom("reconcile")>;
/// (admit_atom, node) to the breaker → std::string refusal, "" when granted.
using admit_atom = caf::atom_constant<caf::atom("admit")>;
/// (reset_atom) to the breaker: the operator's explicit reset.
using reset_atom = caf::atom_constant<caf::atom("reset")>;
/// (gpunodes_atom, count) to the breaker: the fleet's GPU-node count.
using gpunodes_atom = caf::atom_constant<caf::atom("gpunodes")>;
/// (ingest_atom, ingest_batch) to the ingest actor → vector<ingest_verdict>.
using ingest_atom = caf::atom_constant<caf::atom("ingest")>;
/// (summary_atom) → a JSON summary of the actor's state (console, tests).
using summary_atom = caf::atom_constant<caf::atom("summary")>;
/// (node_summaries_atom) to the fleet → vector<string>: every node actor's
/// summary, asked of each by message (the console's fleet page). A node that
/// does not answer within the timeout is left out.
using node_summaries_atom = caf::atom_constant<caf::atom("nodesums")>;
/// (tile_atom) to a node actor → JSON: only the fields of its summary that
/// its fleet tile shows (state, pool, detail); (tile_atom) to the fleet →
/// vector<string>, every node's, gathered as node_summaries_atom is. The
/// fleet page asks this of 10,000 nodes, so it is kept small.
using tile_atom = caf::atom_constant<caf::atom("tile")>;
/// (children_atom) to a node actor → vector<string>: one JSON row per actor
/// it supervises (gpu, nic_port, drain), each that actor's own answer with
/// its state, mailbox depth and message figures; (children_atom, node) to the
/// fleet: the same, delegated to that node's actor.
using children_atom = caf::atom_constant<caf::atom("children")>;

/// (cancel_atom, why) to a drain actor: stop evicting and report cancelled.
using cancel_atom = caf::atom_constant<caf::atom("cancel")>;
/// (drained_atom, drain key, outcome, evictions, deletions) from a drain actor
/// to its node actor when it ends; outcome "succeeded", "cancelled", "skipped"
/// or "dry_run"; deletions: pods deleted after their namespace's timeout
/// (DeleteAfterTimeout).
using drained_atom = caf::atom_constant<caf::atom("drained")>;
/// (drain_tick_atom) a drain actor's own timer: re-list the pods, send what is due.
using drain_tick_atom = caf::atom_constant<caf::atom("draintick")>;
/// (permit_atom, node) to the breaker → "" or why not: may a drain or a
/// remediation start now? Refused while tripped; counts nothing.
using permit_atom = caf::atom_constant<caf::atom("permit")>;

/// (fabric_atom) from the fleet to a node actor: its NIC ports went down in a
/// fabric-wide incident; drop those records, the fabric is not the node's fault.
using fabric_atom = caf::atom_constant<caf::atom("fabric")>;
/// (fabric_hold_expired_atom, node) from the fleet to itself: the node's held link-down
/// reports may go on (correlation.fabric_hold_seconds).
using fabric_hold_expired_atom = caf::atom_constant<caf::atom("fabhold")>;

/// (leader_atom, bool) from the leader elector: this replica starts (true) or
/// stops (false) leading.
using leader_atom = caf::atom_constant<caf::atom("leader")>;

/// (shards_atom, std::vector<std::uint32_t>) from the shard elector: the
/// shards whose nodes this replica acts on now (sorted; empty: none).
using shards_atom = caf::atom_constant<caf::atom("shards")>;

/// (nicdrop_atom) a node actor's own timer: evaluate the NIC port drop rule.
using nicdrop_atom = caf::atom_constant<caf::atom("nicdrop")>;

/// (remedy_atom, node, pool) to the breaker → "" or why not: may a remediation
/// of this node start? Refused while tripped or when the pool's budget of
/// concurrent remediations is in flight; a granted one counts until
/// (remedied_atom, node).
using remedy_atom = caf::atom_constant<caf::atom("remedy")>;
using remedied_atom = caf::atom_constant<caf::atom("remedied")>;
/// (occupy_atom, node, pool) to the breaker: a remediation found running (its
/// CR created before a restart or a handover) holds a slot, whatever the
/// budget, until (remedied_atom, node).
using occupy_atom = caf::atom_constant<caf::atom("occupy")>;
/// (slot_check_atom) from the fleet to a node actor after a sharded rebuild:
/// the journal's database says the node holds a remediation slot; with no
/// remediation in flight once its history is replayed, it gives it back
/// (a replica that died between the claim and the CR left it behind).
using slot_check_atom = caf::atom_constant<caf::atom("slotcheck")>;

/// (remediation_start_atom) a node actor's own timer: start the remediation in flight
/// once its cooldown or backoff has passed (seed 003 "Remediation Policy Engine").
using remediation_start_atom = caf::atom_constant<caf::atom("remedstart")>;
/// (remediation_poll_atom) a node actor's own timer: read the maintenance CR in flight.
using remediation_poll_atom = caf::atom_constant<caf::atom("remedpoll")>;
/// (remediation_verify_atom) a node actor's own timer: a remediation's verification
/// deadline passed without its healthy event; escalate.
using remediation_verify_atom = caf::atom_constant<caf::atom("remedverif")>;
/// (janitor_tick_atom) the janitor's own timer: list the CRs, take each a step on.
using janitor_tick_atom = caf::atom_constant<caf::atom("jantick")>;

/// A fact placed among a node's replayed events, after `after_events` of
/// them: a completed drain (its control::drain_key), which keeps a restarted
/// node actor from draining again what its quarantine already drained; or a
/// fabric incident that covered the node's NIC port-downs, which drops them
/// again as it did live.
struct replay_mark {
  enum class kind : std::uint8_t { drain, fabric };
  std::size_t after_events = 0;
  kind what = kind::drain;
  std::string key; ///< the drain's key; "" for a fabric incident
};

/// A maintenance CR the journal says was created (its "created" remediation
/// row): replayed after a restart so attempt caps and backoff survive it.
struct remediation_attempt {
  recommended_action action = recommended_action::none;
  std::string gpu_uuid;
  wall_time at{};
  std::string event_id;      ///< the request's event (with the plan, the CR's name)
  std::string custom_action; ///< a custom remediation's name; "" otherwise
  /// No outcome journaled for its CR yet (no succeeded, failed or released
  /// row naming it): it may still be running. Or it succeeded and its
  /// validation Job began with no verdict journaled (`validating`).
  bool open = false;
  /// The CR succeeded and the node waits for its validation Job (a
  /// "validating" row, no "validated" or "validation_failed" after it).
  bool validating = false;
  std::string cr;
};

/// (attempts_atom, vector<remediation_attempt>) from the fleet to a node actor
/// at a rebuild: its remediation attempts, oldest first.
using attempts_atom = caf::atom_constant<caf::atom("attempts")>;

/// (allocations_atom, gpu_allocations) to the fleet, and from it to the
/// report's node actor: which pod holds which GPU, from the node's agent.
using allocations_atom = caf::atom_constant<caf::atom("allocation")>;

/// (agent_heard_atom, node) to the fleet: the node's agent sent a heartbeat.
using agent_heard_atom = caf::atom_constant<caf::atom("agentheard")>;
/// (gpu_facts_atom, node, agent_gpu_facts) to the fleet, and from it to the
/// node actor: what the heartbeat said of the node's GPUs (NVSwitches, model).
using gpu_facts_atom = caf::atom_constant<caf::atom("gpufacts")>;
/// (agent_quiet_atom, silent, since in ns since the epoch) from the fleet to a
/// node actor: its agent went silent (true, since then) or reports again.
using agent_quiet_atom = caf::atom_constant<caf::atom("agentquiet")>;
/// (condition_check_atom) a node actor's own timer: a NotReady Node's
/// control.not_ready_after has passed; judge its conditions again.
using condition_check_atom = caf::atom_constant<caf::atom("condcheck")>;
/// (liveness_atom) the fleet's own timer: which agents went silent.
using liveness_atom = caf::atom_constant<caf::atom("liveness")>;

/// The journal's verdict on one event of an ingest request.
enum class ingest_verdict : std::uint8_t { stored, duplicate, unavailable };

} // namespace vigil

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(vigil::gpu_allocations)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(vigil::agent_gpu_facts)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<vigil::ingest_verdict>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<vigil::replay_mark>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<vigil::remediation_attempt>)
