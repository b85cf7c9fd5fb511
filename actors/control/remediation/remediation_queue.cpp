#include "actors/control/remediation/remediation_queue.hpp"

#include <utility>

namespace vigil::control {

namespace {

// An operator's custom remediation does what vigil cannot know: it neither
// covers another action nor is covered by one (a reboot does not reseat a
// cable), only by itself.
bool ranked(const remediation_plan& plan) {
  return plan.kind != remediation_kind::custom;
}

// `by` makes `plan` redundant: the same group, or an action that disturbs more.
bool covers(const remediation_plan& by, const remediation_plan& plan) {
  return by.group == plan.group
         || (ranked(by) && ranked(plan) && strength(by.kind) > strength(plan.kind));
}

} // namespace

std::string_view to_string(queue_verdict verdict) {
  switch (verdict) {
    case queue_verdict::start_now: return "start_now";
    case queue_verdict::queued: return "queued";
    case queue_verdict::skipped_same: return "skipped_same";
    case queue_verdict::skipped_covered: return "skipped_covered";
    case queue_verdict::not_automatic: break;
  }
  return "not_automatic";
}

const remediation_request*
remediation_queue::covering(const remediation_plan& plan) const {
  if (in_flight_ && covers(in_flight_->plan, plan))
    return &*in_flight_;
  for (const auto& w : waiting_)
    if (covers(w.plan, plan))
      return &w;
  return nullptr;
}

std::vector<remediation_request>
remediation_queue::drop_waiting_weaker_than(const remediation_plan& plan) {
  std::vector<remediation_request> dropped;
  std::deque<remediation_request> kept;
  for (auto& w : waiting_) {
    if (ranked(w.plan) && ranked(plan) && strength(w.plan.kind) < strength(plan.kind))
      dropped.push_back(std::move(w));
    else
      kept.push_back(std::move(w));
  }
  waiting_ = std::move(kept);
  return dropped;
}

queue_decision remediation_queue::submit(remediation_request request) {
  queue_decision decision;
  if (!is_automatic(request.plan.kind)) {
    decision.reason = request.plan.reason;
    return decision;
  }
  if (const auto* by = covering(request.plan)) {
    bool same = by->plan.group == request.plan.group;
    decision.verdict =
      same ? queue_verdict::skipped_same : queue_verdict::skipped_covered;
    decision.covering_group = by->plan.group;
    std::string where = in_flight_ && by == &*in_flight_ ? "in flight" : "waiting";
    decision.reason =
      same ? request.plan.group + " already " + where
           : request.plan.group + " covered by " + by->plan.group + " " + where;
    return decision;
  }
  if (!in_flight_) {
    decision.verdict = queue_verdict::start_now;
    decision.reason = request.plan.group + " started";
    in_flight_ = std::move(request);
    return decision;
  }
  decision.verdict = queue_verdict::queued;
  decision.covering_group = in_flight_->plan.group;
  decision.reason = request.plan.group + " waits for " + in_flight_->plan.group;
  decision.superseded = drop_waiting_weaker_than(request.plan);
  waiting_.push_back(std::move(request));
  return decision;
}

std::optional<remediation_request> remediation_queue::finish(const std::string& group) {
  if (!in_flight_ || in_flight_->plan.group != group)
    return std::nullopt;
  in_flight_.reset();
  if (waiting_.empty())
    return std::nullopt;
  in_flight_ = std::move(waiting_.front());
  waiting_.pop_front();
  return in_flight_;
}

std::vector<remediation_request>
remediation_queue::escalate_in_flight(remediation_plan plan) {
  std::vector<remediation_request> dropped;
  if (!in_flight_)
    return dropped;
  in_flight_->plan = std::move(plan);
  std::deque<remediation_request> kept;
  for (auto& w : waiting_) {
    if (covers(in_flight_->plan, w.plan))
      dropped.push_back(std::move(w));
    else
      kept.push_back(std::move(w));
  }
  waiting_ = std::move(kept);
  return dropped;
}

void remediation_queue::restore_in_flight(remediation_request request) {
  in_flight_ = std::move(request);
}

std::vector<remediation_request> remediation_queue::clear() {
  std::vector<remediation_request> dropped(std::make_move_iterator(waiting_.begin()),
                                           std::make_move_iterator(waiting_.end()));
  waiting_.clear();
  in_flight_.reset();
  return dropped;
}

} // namespace vigil::control
