// One node's remediations in order: at most one in flight, the rest waiting,
// and the four ordering cases of seed 000 §4.3. The node actor owns one.
#pragma once

#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "actors/control/remediation/remediation_plan.hpp"
#include "messages/wall_time.hpp"

namespace vigil::control {

/// A plan the node actor wants carried out, and where it came from.
struct remediation_request {
  remediation_plan plan;
  std::string event_id; ///< the unhealthy HealthEvent that asked for it
  wall_time requested_at{};

  friend bool operator==(const remediation_request& a, const remediation_request& b) {
    return a.plan == b.plan && a.event_id == b.event_id
           && a.requested_at == b.requested_at;
  }
};

enum class queue_verdict {
  start_now,       ///< nothing in flight: create the CR now (it is in flight from here)
  queued,          ///< runs after the request in flight finishes
  skipped_same,    ///< the same equivalence group is in flight or waiting
  skipped_covered, ///< a stronger action in flight or waiting covers it (a reboot resets
                   ///< every GPU)
  not_automatic,   ///< none / manual: nothing to queue
};

std::string_view to_string(queue_verdict verdict);

/// The answer to submit(); the caller journals it.
struct queue_decision {
  queue_verdict verdict = queue_verdict::not_automatic;
  /// For skipped_*: the group that covers the request (journal it as covered
  /// by that group's CR, seed 000 §4.3 case 4). For queued: the group in flight.
  std::string covering_group;
  /// Waiting requests this one made redundant (a reboot queued behind a reset
  /// drops the waiting resets of other GPUs); journal each as covered.
  std::vector<remediation_request> superseded;
  std::string reason; ///< one line for the journal and the node's Events
};

class remediation_queue {
public:
  /// seed 000 §4.3: case 1 reboot→reboot skipped while the first is in flight
  /// or waiting; case 2 reset→reset of the same GPU skipped, of another GPU
  /// queued (the node runs one maintenance at a time); case 3 reset→reboot
  /// queued to run after the reset; case 4 reboot→reset skipped as covered.
  /// Terminal requests no longer count: a reboot after a finished reboot runs.
  /// A custom remediation is covered only by its own group, and covers only it.
  queue_decision submit(remediation_request request);

  /// The request in flight reached a terminal state (whatever the outcome).
  /// Returns the next request, now in flight, for the caller to start; nullopt
  /// when the queue is empty or `group` is not the one in flight (a stale or
  /// duplicate completion, ignored).
  std::optional<remediation_request> finish(const std::string& group);

  /// The request in flight moves up the escalation ladder before its CR is
  /// created (a cap within its window was reached): it carries out `plan`
  /// instead. Returns the waiting requests the new plan covers (same group or
  /// weaker), dropped for the caller to journal as covered.
  std::vector<remediation_request> escalate_in_flight(remediation_plan plan);

  /// After a restart: the request the journal says is in flight.
  void restore_in_flight(remediation_request request);

  const std::optional<remediation_request>& in_flight() const { return in_flight_; }
  const std::deque<remediation_request>& waiting() const { return waiting_; }
  bool idle() const { return !in_flight_.has_value() && waiting_.empty(); }

  /// Drops everything (the node was unquarantined: seed 000 §4.2). Returns
  /// the waiting requests that never ran, for the journal.
  std::vector<remediation_request> clear();

private:
  /// In flight or waiting, same group or stronger: who makes `plan` redundant.
  const remediation_request* covering(const remediation_plan& plan) const;
  std::vector<remediation_request> drop_waiting_weaker_than(const remediation_plan& plan);

  std::optional<remediation_request> in_flight_;
  std::deque<remediation_request> waiting_;
};

} // namespace vigil::control
