// One node's remediation sequencing (seed 000 §4) as plain code: what the
// node's state, the breaker, the journal and the maintenance CRs said goes in,
// the commands to carry out come out. The node actor carries them out against
// the API server, the fleet simulation against its simulated cluster and
// `vigil replay --what-if` on paper: one copy of every rule.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/control/remediation/escalation.hpp"
#include "actors/control/remediation/remediation_plan.hpp"
#include "actors/control/remediation/remediation_queue.hpp"
#include "actors/control/remediation/remediation_resource.hpp"
#include "actors/control/remediation/remediation_state.hpp"
#include "actors/control/rules/drain_plan.hpp"
#include "actors/control/rules/quarantine_rules.hpp"

namespace vigil::control {

/// What the machine reads of its node at every input: the node actor builds
/// it from its state and the observed Node, the simulation from its world.
struct remediation_view {
  std::vector<active_record> records; ///< the node's active unhealthy records
  bool quarantined = false;           ///< cordoned (by anyone; in a dry run: would be)
  bool opted_out = false;             ///< the quarantine opt-out label is "true"
  bool drain_busy = false;            ///< a drain runs, or the breaker is asked for one
  drain_history drained = drain_history::none; ///< what this quarantine drained
  std::string drained_key; ///< drain_key of the last drain that completed
  node_gpu_facts facts;
  std::string pool; ///< the breaker's pool of the node
  /// GPUs the node has (GPU feature discovery's nvidia.com/gpu.count, else
  /// its nvidia.com/gpu capacity); unset when unknown.
  std::optional<int> gpu_count;
};

/// Proof of recovery before return (seed 003 "validation"): after a
/// successful reset or reboot, a validation Job on the node must pass before
/// the node is released; its failure is a fault that climbs the ladder.
struct validation_policy {
  bool after_reset = true;
  bool after_reboot = true;
  std::chrono::seconds timeout{1800}; ///< not passed by then: failed
};

/// Config `remediation.*` as the machine needs it.
struct remediation_config {
  escalation_policy escalation;
  remediation_options options;
  std::chrono::seconds poll{10};             ///< how often the CR in flight is read
  std::chrono::seconds cr_timeout{2 * 3600}; ///< a CR not done by then has failed
  /// A TerminateNode not done by then has failed: a new node takes hours.
  std::chrono::seconds terminate_timeout{24 * 3600};
  std::chrono::seconds retry{60}; ///< before asking again (API, journal, breaker)
  /// Plan and journal, create nothing (global, remediation or drain dry run:
  /// pods a dry-run drain left running must not lose their GPU).
  bool dry_run = false;
  validation_policy validation;
};

/// The machine's timers; the caller delivers each back through on_timer().
enum class remediation_timer {
  start,  ///< a deferred start: cooldown, backoff or a retry
  poll,   ///< read the CR in flight
  verify, ///< verification deadlines
};

/// Counters for /metrics and the simulation's figures.
enum class remediation_metric {
  started,
  succeeded,
  failed,
  skipped,
  manual,
  escalated,
  validated,
  validation_failed,
};

/// A validation Job as last read.
struct validation_progress {
  bool done = false;   ///< the Job finished
  bool passed = false; ///< and succeeded
  std::string message; ///< why it failed, for the journal
};

namespace remediation_command {

/// Append a "remediation" journal row (node_remediation's step_row); its
/// effect, if any, is already done or does not need the row first.
struct journal_step {
  std::string phase;
  remediation_request request;
  nlohmann::json details = nlohmann::json::object();
};

/// Look for the request's CR under its name (created before a restart).
/// Answer: on_cr_found, on_cr_absent or on_retry.
struct find_cr {
  remediation_request request;
  std::string cr;
  std::uint64_t generation = 0;
};

/// Ask the breaker for a remediation slot in `pool` (seed 003 policy engine:
/// none while tripped, at most the pool's budget at once). Answer:
/// on_breaker_answer, or on_retry when it did not answer.
struct ask_breaker {
  remediation_request request;
  std::string pool;
  std::uint64_t generation = 0;
};

/// Journal the "created" row of the CR, and only once it is stored POST the
/// CR (journal before acting). Answer: on_cr_created (also for 409
/// AlreadyExists), on_cr_rejected (refused for good) or on_retry.
struct create_cr {
  remediation_request request;
  std::string cr;
  std::uint64_t generation = 0;
};

/// Read the CR in flight. Answer: on_cr_progress, on_cr_missing (404) or
/// on_cr_unreadable.
struct read_cr {
  remediation_plan plan; ///< whose CR: its kind (and a custom kind's resource)
  std::string cr;
  std::uint64_t generation = 0;
};

/// The breaker no longer counts this node's remediation against its pool.
struct leave_pool {};

/// A CR found running (created before a restart or a shard's handover): the
/// breaker counts it against the node's pool, whatever the budget, until
/// leave_pool.
struct occupy_slot {};

/// Deliver `timer` back at `at` (an earlier one still pending is not
/// cancelled: the machine ignores what it no longer waits for).
struct wake {
  remediation_timer timer = remediation_timer::start;
  wall_time at{};
};

/// A Kubernetes Event on the node (never emitted in a dry run).
struct post_event {
  std::string reason;
  std::string message;
  bool warning = false;
};

/// Write the latestFaultRemediationState annotation (seed 000 §4.2); an empty
/// state removes it. Never emitted in a dry run.
struct write_annotation {
  remediation_state state;
};

/// REPLACE_VM through the provider's own automation: annotate the node with
/// vigil.dev/replace-requested = `at` (remediation.replace_with: ProviderHook).
struct request_replacement {
  remediation_request request;
  wall_time at{};
};

/// seed 000 §4: no automatic action is left; a person must look. The node
/// stays quarantined. Journal `request` as "manual" and post an Event.
struct hand_to_operator {
  remediation_request request;
  std::string why;
};

/// A reboot succeeded: clear these records (they predate the new boot) by a
/// healthy event each, journaled before it is applied like any other event.
struct clear_records {
  std::string cr;
  std::vector<active_record> records;
};

/// seed 000 §3.1: a reboot or a replacement needs every pod off the node. The
/// node must be drained in full (Eviction API, PDBs asked) before the CR is
/// created; the machine waits in `draining_fully` until the view says so.
struct drain_fully {
  remediation_request request;
};

/// Run the validation Job `job` on the node (idempotent: a Job of that name
/// that exists already is the one). Nothing answers; read_validation follows.
struct run_validation {
  remediation_request request;
  std::string job;
  std::vector<std::string> gpus;    ///< the GPUs to check; empty: every GPU
  std::optional<int> expected_gpus; ///< the node's GPU count before the fix
  std::uint64_t generation = 0;
};

/// Read the validation Job. Answer: on_validation_progress, or
/// on_validation_missing (404).
struct read_validation {
  std::string job;
  std::uint64_t generation = 0;
};

/// A fault vigil itself found (a validation that failed): journal it as a
/// HealthEvent, then apply it like an agent's.
struct report_fault {
  health_event event;
};

/// The machine no longer holds the node's quarantine (a CR or a validation
/// is over): the caller re-evaluates the quarantine.
struct hold_ended {};

struct count {
  remediation_metric metric = remediation_metric::started;
};

/// A line for the log; `warning` for what an operator should read.
struct log {
  std::string text;
  bool warning = false;
};

} // namespace remediation_command

using remediation_commands = std::vector<std::variant<
  remediation_command::journal_step, remediation_command::find_cr,
  remediation_command::ask_breaker, remediation_command::create_cr,
  remediation_command::read_cr, remediation_command::leave_pool,
  remediation_command::occupy_slot, remediation_command::wake,
  remediation_command::post_event, remediation_command::write_annotation,
  remediation_command::request_replacement, remediation_command::hand_to_operator,
  remediation_command::clear_records, remediation_command::drain_fully,
  remediation_command::run_validation, remediation_command::read_validation,
  remediation_command::report_fault, remediation_command::hold_ended,
  remediation_command::count, remediation_command::log>>;

/// Where the request in flight stands.
enum class remediation_step {
  idle,           ///< nothing in flight
  ready,          ///< in flight, about to start
  finding,        ///< looking for a CR created before a restart
  deferred,       ///< waiting for the start timer (cooldown, backoff, retry)
  draining_fully, ///< waiting for a full drain before a reboot or replacement
  asking_breaker, ///< waiting for a remediation slot
  creating,       ///< "created" journaled and the CR asked for
  following,      ///< the CR exists; polled until it is done
  validating,     ///< the CR succeeded; the validation Job must pass
};

std::string_view to_string(remediation_step step);

/// The drain the node needs (seed 000 §3.1): what its records ask for, or a
/// full one while the machine waits for it before a reboot or replacement.
std::optional<drain_request> drain_wanted(const std::vector<active_record>& records,
                                          bool full_drain_required);

class remediation_machine {
public:
  remediation_machine(std::string node_name, remediation_config config);

  /// The node's state changed (an event, the Node, a drain): plans a
  /// remediation for every active record not planned yet once the node is
  /// quarantined and drained as its records want (seed 000 §4 "after
  /// draining"); with no record left, releases (seed 000 §4.2).
  remediation_commands consider(const remediation_view& view, wall_time now);

  /// A healthy event of the node: verifies the reset of each GPU it names.
  remediation_commands on_healthy_event(const health_event& event, wall_time now);

  remediation_commands on_timer(remediation_timer timer, const remediation_view& view,
                                wall_time now);

  // Answers to the commands; each carries the generation it was asked in, and
  // an answer from before a release is ignored.
  remediation_commands on_cr_found(std::uint64_t generation, const std::string& cr,
                                   wall_time now);
  remediation_commands on_cr_absent(std::uint64_t generation,
                                    const remediation_view& view, wall_time now);
  remediation_commands on_retry(std::uint64_t generation, const std::string& why,
                                wall_time now);
  /// `refusal` empty: a slot was given.
  remediation_commands on_breaker_answer(std::uint64_t generation,
                                         const std::string& refusal,
                                         const remediation_view& view, wall_time now);
  remediation_commands on_cr_created(std::uint64_t generation, const std::string& cr,
                                     wall_time now);
  remediation_commands on_cr_rejected(std::uint64_t generation, const std::string& why,
                                      const remediation_view& view, wall_time now);
  remediation_commands on_cr_progress(std::uint64_t generation,
                                      const cr_progress& progress,
                                      const remediation_view& view, wall_time now);
  remediation_commands on_cr_missing(std::uint64_t generation,
                                     const remediation_view& view, wall_time now);
  remediation_commands on_cr_unreadable(std::uint64_t generation, wall_time now);
  remediation_commands on_validation_progress(std::uint64_t generation,
                                              const validation_progress& progress,
                                              const remediation_view& view,
                                              wall_time now);
  remediation_commands on_validation_missing(std::uint64_t generation,
                                             const remediation_view& view, wall_time now);

  /// Replaying the journal after a restart: an attempt made at `at` counts
  /// towards its cap and gap.
  void remember_attempt(recommended_action action, const std::string& gpu_uuid,
                        wall_time at);

  /// Replaying the journal after a restart or a shard's handover: a CR was
  /// created for this request and no outcome is journaled, so it may still
  /// run. The next consider() takes it up as the request in flight and looks
  /// for its CR, whatever the records say by then: a fault that cleared
  /// while it ran must not return the node before it is over.
  /// `validating`: the CR `cr` succeeded and its validation Job began with
  /// no verdict journaled; the machine follows that Job (seed 003: the node
  /// returns once the fix is proven), not the CR.
  void resume(recommended_action action, const std::string& gpu_uuid,
              const std::string& event_id, const std::string& custom_action,
              const std::string& cr = {}, bool validating = false);

  /// The drain the node needs now (see drain_wanted()).
  bool needs_full_drain() const { return step_ == remediation_step::draining_fully; }
  /// A CR is being carried out.
  bool acting() const {
    return step_ == remediation_step::following || step_ == remediation_step::validating;
  }
  /// The node stays quarantined, records or not: a CR is being created or
  /// carried out, or its result validated (seed 001 step 5: the node returns
  /// only once the operands are back; seed 003: and once the fix is proven);
  /// or whether one runs is not known yet (after a restart or a shard's
  /// handover, a reboot may be under way: the node must not return first).
  /// That holds from resume() on, before the next consider() takes the CR
  /// up: the node actor decides the quarantine before it considers.
  bool holds_quarantine() const {
    return resume_.has_value() || step_ == remediation_step::finding
           || step_ == remediation_step::creating || acting() || !fault_pending_.empty();
  }
  remediation_step step() const { return step_; }
  /// A remediation is in flight or about to be taken up (resume()): a slot
  /// the node holds may be its own.
  bool in_flight() const {
    return resume_.has_value() || queue_.in_flight().has_value()
           || step_ != remediation_step::idle;
  }
  const remediation_queue& queue() const { return queue_; }
  const std::string& cr_name() const { return cr_name_; }
  const remediation_state& annotation() const { return annotation_; }
  std::uint64_t generation() const { return generation_; }

  /// The remediation part of the node's summary: the request in flight (its
  /// group, CR, step, the attempts on its target within the window ending at
  /// `now`, until when a cooldown or backoff defers it, and the ladder's next
  /// rung), the waiting groups and the annotation.
  nlohmann::json summary(wall_time now) const;

private:
  struct context;

  void plan_new_records(context& c);
  void replan_after_repair(context& c);
  void submit(context& c, remediation_request request);
  void start(context& c);
  void admit(context& c);
  void create(context& c);
  void hand_to_provider(context& c, const remediation_request& request);
  void created(context& c, const std::string& cr, bool fresh);
  void finished(context& c, const cr_progress& progress);
  void validate(context& c);
  void resume_validation(context& c, const std::string& cr);
  void run_validation(context& c);
  void validation_failed(context& c, const std::string& why);
  void next(context& c, const std::string& group);
  void escalate(context& c, const remediation_request& failed,
                const escalation_decision& decision);
  void release(context& c);
  void journal_escalation(context& c, const remediation_request& request,
                          const std::vector<escalation_record>& records);
  void arm(context& c, remediation_timer timer, wall_time at);
  void arm_verify(context& c);
  void defer(context& c, wall_time until);
  void leave_pool(context& c);
  void write_annotation(context& c);
  void post_event(context& c, std::string reason, std::string message, bool warning);
  bool ready(const remediation_view& view) const;
  remediation_plan plan(const context& c, recommended_action action,
                        const std::string& gpu_uuid,
                        const std::string& custom_action = {}) const;

  std::string node_;
  remediation_config config_;
  remediation_queue queue_;
  escalation_tracker escalation_;
  remediation_state annotation_;  ///< as last written to the Node
  std::set<std::string> handled_; ///< event ids already planned
  /// A CR from before the restart to look for (resume()).
  struct resumed {
    recommended_action action = recommended_action::none;
    std::string gpu_uuid, event_id, custom_action, cr;
    bool validating = false;
  };
  std::optional<resumed> resume_;
  remediation_step step_ = remediation_step::idle;
  std::string cr_name_;        ///< the CR of the request in flight
  wall_time cr_created_{};     ///< when this machine saw it exist
  wall_time cr_deadline_{};    ///< when it counts as failed
  wall_time deferred_until_{}; ///< the start timer's time while deferred
  std::string validation_job_;
  wall_time validation_deadline_{};
  std::optional<int> gpus_before_; ///< the node's GPU count when the CR was asked for
  /// A fault reported by report_fault that the node has not applied yet: the
  /// quarantine holds until it has (no uncordon between the two).
  std::string fault_pending_;
  bool admitted_ = false; ///< the breaker counts this node's remediation
  bool start_armed_ = false;
  bool poll_armed_ = false;
  bool verify_armed_ = false;
  /// Bumped by every release: an answer to a command of an earlier generation
  /// no longer acts on the queue.
  std::uint64_t generation_ = 0;
  /// Reset targets whose healthy event came before their CR was seen to
  /// succeed (the Job logs the line, then the janitor restores the labels).
  std::set<std::string> healthy_early_;
  /// The last successful repair: when it began and the GPU it reset (empty
  /// for a reboot, which resets every GPU). Events about what it repaired
  /// generated since (during the repair or its validation) were taken by the
  /// queue as covered by it, but it did not fix them: a reboot's belong to
  /// the new boot, a reset GPU's to its next fault. They are planned afresh
  /// once the repair is over (and no fault the machine reported is waiting
  /// to be applied), instead of leaving the node cordoned with nothing in
  /// flight.
  struct repair_mark {
    wall_time began;
    std::string gpu_uuid;
  };
  std::optional<repair_mark> repaired_;
};

/// "vigil-validate-<cr>", shortened with a hash to 63 characters.
std::string validation_job_name(std::string_view cr);

/// The escalation policy the node runs: `remediation.escalation` with the
/// repeated-remediation limit of the correlation rules.
escalation_policy node_escalation_policy(escalation_policy policy,
                                         std::size_t remediation_repeat_threshold,
                                         std::chrono::seconds remediation_window);

} // namespace vigil::control
