// Loop control for remediations: attempt caps per GPU and per node within
// windows, cooldown and backoff between attempts, and verification that the
// healthy event arrives, escalating reset → reboot → replace → support.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "messages/health_event.hpp"
#include "messages/wall_time.hpp"

namespace vigil::control {

/// Config `remediation.escalation.*`; every duration in seconds in the file.
struct escalation_policy {
  std::size_t max_resets_per_gpu = 3;            ///< resets of one GPU per window
  std::chrono::seconds reset_window{24 * 3600};  ///< default 24 h
  std::size_t max_reboots_per_node = 3;          ///< reboots of one node per window
  std::chrono::seconds reboot_window{24 * 3600}; ///< default 24 h
  /// After max_reboots_per_node: REPLACE_VM (default) or CONTACT_SUPPORT.
  recommended_action after_reboots = recommended_action::replace_vm;
  std::size_t max_replaces_per_node = 1;          ///< then CONTACT_SUPPORT
  std::chrono::seconds replace_window{24 * 3600}; ///< default 24 h
  std::chrono::seconds cooldown{300};             ///< least gap between attempts, 5 min
  std::chrono::seconds backoff_initial{120};      ///< gap after the first attempt, 2 min
  double backoff_multiplier = 2.0;                ///< growth per further attempt
  std::chrono::seconds backoff_max{3600};         ///< cap on the gap, 1 h
  std::chrono::seconds verify_reset_timeout{600}; ///< healthy event after a reset, 10 min
  std::chrono::seconds verify_reboot_timeout{1800};  ///< after a reboot, 30 min
  std::chrono::seconds verify_replace_timeout{3600}; ///< after a replace, 1 h
  /// The operator's custom remediations (CUSTOM events), all kinds together:
  /// this many per node within the window, then CONTACT_SUPPORT; the healthy
  /// event is due this long after the CR succeeded.
  std::size_t max_custom_per_node = 3;
  std::chrono::seconds custom_window{24 * 3600};    ///< default 24 h
  std::chrono::seconds verify_custom_timeout{1800}; ///< default 30 min
  /// Repeated remediation (seed 003 "Hysteresis and Cooldown"): this many
  /// automatic remediations of the node (all targets) within the window and
  /// the next one is CONTACT_SUPPORT instead. Config correlation.remediation_repeat_*.
  std::size_t max_remediations_per_node = 5;
  std::chrono::seconds node_window{7 * 24 * 3600}; ///< default 7 days
};

enum class escalation_event {
  admitted,               ///< the action may run now
  escalated,              ///< a cap, failure or timeout moved it up the ladder
  deferred,               ///< cooldown/backoff: try again at not_before
  attempt_recorded,       ///< the CR was created; verification armed
  verified,               ///< the healthy event arrived in time
  verification_timed_out, ///< no healthy event before the deadline
  attempt_failed,         ///< the CR reached a failed terminal state
};

std::string_view to_string(escalation_event event);

/// One step, for the caller to journal.
struct escalation_record {
  escalation_event event = escalation_event::admitted;
  recommended_action from = recommended_action::none; ///< what was asked or attempted
  recommended_action to = recommended_action::none;   ///< what is decided
  std::string target; ///< "reset-<UUID>", "restart", "replace", "custom", or "" (manual)
  std::string gpu_uuid;               ///< for resets
  std::size_t attempts_in_window = 0; ///< of `to` on its target, before this step
  wall_time at{};
  std::optional<wall_time> not_before; ///< deferred: when to ask again
  std::string reason;
};

/// What to do now.
struct escalation_decision {
  recommended_action action = recommended_action::none; ///< possibly escalated
  std::optional<wall_time> not_before;    ///< set: wait, then call admit() again
  std::vector<escalation_record> records; ///< every step taken, in order
};

/// The next rung: COMPONENT_RESET → RESTART_BM; RESTART_* → after_reboots;
/// REPLACE_VM → CONTACT_SUPPORT; anything else (CUSTOM too: vigil cannot
/// know which of its own actions would fix what the operator's did not)
/// CONTACT_SUPPORT.
recommended_action next_rung(recommended_action action, const escalation_policy& policy);

/// The rung a failed CR of `action` goes to, by its status.failureReason,
/// where no rung above can mend what failed: a GPU reset whose GPU operator
/// operands did not run again (redeploy_failed) or whose deploy labels could
/// not be put back (labels_not_restored) goes to CONTACT_SUPPORT. A reboot
/// would drain every healthy GPU of the node and bring back neither: the
/// labels stay as they are across it, and operands that do not start after a
/// reset that passed its health check are the operator's or the cluster's
/// fault more often than the node's. nullopt: next_rung.
std::optional<recommended_action> rung_after_failure(recommended_action action,
                                                     std::string_view failure_reason);

/// The attempt-counting target of an action: "reset-<UUID>", "restart",
/// "replace", "custom" (every custom remediation of the node); "" for actions
/// with no automatic remediation.
std::string escalation_target(recommended_action action, std::string_view gpu_uuid);

/// Per node; the node actor owns one and passes time in.
class escalation_tracker {
public:
  explicit escalation_tracker(escalation_policy policy = {});

  /// Before starting `action`: climbs the ladder while its cap within the
  /// window is reached, then defers it if the cooldown/backoff since the last
  /// attempt on that target has not passed. A reset that the remediation plan
  /// turned into a reboot is admitted as RESTART_BM.
  escalation_decision admit(recommended_action action, std::string_view gpu_uuid,
                            wall_time now);

  /// The caller created the CR for `action`: counts the attempt and arms its
  /// verification deadline. Replaying the journal after a restart calls it too.
  escalation_record record_attempt(recommended_action action, std::string_view gpu_uuid,
                                   wall_time now);

  /// The action's CR succeeded at `now`: the healthy event is due within its
  /// verification timeout from here (a reset Job may run for 25 minutes, so
  /// the clock starts when the action is done, not when it was asked for).
  void expect_healthy(recommended_action action, std::string_view gpu_uuid,
                      wall_time now);

  /// Replaying the journal after a restart: an attempt made at `at` counts
  /// towards its cap and gap, but arms no verification (that window is over
  /// or, for the request still in flight, armed again when it is re-created).
  void remember_attempt(recommended_action action, std::string_view gpu_uuid,
                        wall_time at);

  /// The healthy event for `target` arrived; nullopt if nothing was pending.
  std::optional<escalation_record> verified(const std::string& target, wall_time now);

  /// The node's quarantine was released (every event healthy again): each
  /// pending verification is met. One record per target, in target order.
  std::vector<escalation_record> verify_all(wall_time now);

  /// The CR for `action` failed (or was judged failed) with `failure_reason`
  /// (its status.failureReason, "" where none): disarms its verification and
  /// admits the next rung, or the one rung_after_failure names.
  escalation_decision attempt_failed(recommended_action action, std::string_view gpu_uuid,
                                     const std::string& why, wall_time now,
                                     std::string_view failure_reason = {});

  /// Every verification whose deadline is at or before `now` escalates to
  /// its next rung; one decision per expired target.
  std::vector<escalation_decision> expire(wall_time now);

  /// The earliest verification deadline, for the caller's timer.
  std::optional<wall_time> next_deadline() const;

  /// Attempts on every target of the node within `window` ending at `now`.
  std::size_t node_attempts(std::chrono::seconds window, wall_time now) const;

  /// Attempts on `target` within its window ending at `now`.
  std::size_t attempts(const std::string& target, wall_time now) const;

private:
  struct pending_verification {
    recommended_action action;
    std::string gpu_uuid;
    wall_time deadline;
  };

  std::size_t cap(recommended_action action) const;
  std::chrono::seconds window(recommended_action action) const;
  std::chrono::seconds verify_timeout(recommended_action action) const;
  std::chrono::seconds gap_after(std::size_t attempts) const;
  escalation_decision escalate_from(recommended_action action, recommended_action next,
                                    std::string_view gpu_uuid, escalation_event cause,
                                    const std::string& why, wall_time now);

  escalation_policy policy_;
  std::map<std::string, std::deque<wall_time>> history_; ///< attempt times by target
  std::map<std::string, pending_verification> pending_;  ///< by target
};

} // namespace vigil::control
