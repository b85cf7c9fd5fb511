#include "actors/agent/forwarder/forwarder.hpp"

#include <caf/all.hpp>

#include "runtime/logging.hpp"

namespace vigil {

namespace {

void pump(forwarder_actor* self);

// Rejected lines are the only events ever dropped: each is logged and kept in
// the agent's rejected-events log with the control plane's reason.
void log_report(forwarder_actor* self, const agent::batch_report& report,
                const agent::post_result& result) {
  auto& st = self->state;
  auto log = component_logger("forwarder");
  for (const auto& event : report.rejected) {
    log->warn("control plane rejected event {} (dropped): {}", event.id, event.error);
    if (st.rejected_log)
      if (auto kept = st.rejected_log->append(event, st.wall->wall_now()); !kept)
        log->error("rejected event {} not kept: {}", event.id, kept.error().to_string());
  }
  for (const auto& problem : report.spool_errors)
    log->error("spool: {}", problem.to_string());
  if (report.retry_at) {
    ++st.failing_batches;
    log->error("events not delivered ({}, {} attempt(s) in a row); they stay spooled and "
               "are sent again: {}",
               to_string(report.failure_class), st.failing_batches,
               result.explanation.empty() ? result.detail : result.explanation);
  } else if (st.failing_batches > 0) {
    log->info("control plane accepts batches again after {} failed attempt(s)",
              st.failing_batches);
    st.failing_batches = 0;
  }
}

// Arms the timer for the next batch or retry, if there is one.
void arm(forwarder_actor* self) {
  auto& st = self->state;
  const auto now = self->clock().now();
  if (auto when = st.logic->next_wakeup(now)) {
    auto delay = std::max(caf::timespan{0}, caf::timespan{*when - now});
    self->delayed_send(self, delay, wake_atom::value, ++st.wake_generation);
  }
}

// Sends the next batch when one is due and none is in flight.
void pump(forwarder_actor* self) {
  auto& st = self->state;
  if (st.logic->in_flight())
    return;
  auto batch = st.logic->next_batch(self->clock().now());
  if (!batch) {
    arm(self);
    return;
  }
  self->request(st.poster, caf::infinite, post_atom::value, std::move(batch->body))
    .then(
      [=](agent::post_result& result) {
        if (result.outcome == agent::post_outcome::accepted)
          self->state.last_accepted = self->state.wall->wall_now();
        log_report(self, self->state.logic->complete(result, self->clock().now()),
                   result);
        pump(self);
      },
      [=](caf::error& err) {
        agent::post_result failed;
        failed.detail = self->system().render(err);
        log_report(self, self->state.logic->complete(failed, self->clock().now()),
                   failed);
        pump(self);
      });
}

// What the control plane's answer to the agent's first request (the
// heartbeat, or a probe when heartbeats are off) says about the setup.
void log_control_plane_check(const agent::post_result& result) {
  auto log = component_logger("forwarder");
  if (result.outcome == agent::post_outcome::accepted)
    log->info("control plane check: it accepted the agent's heartbeat");
  else
    log->error("control plane check failed: {}",
               result.explanation.empty() ? result.detail : result.explanation);
}

void heartbeat_done(forwarder_actor* self, const agent::post_result& result) {
  auto& hb = *self->state.heartbeat;
  const bool first = hb.stats().sent == 1;
  const auto news = hb.complete(result, self->state.wall->wall_now());
  auto log = component_logger("forwarder");
  auto why = result.explanation.empty() ? result.detail : result.explanation;
  if (first)
    log_control_plane_check(result);
  else if (news == agent::heartbeat_news::failing)
    log->error("heartbeat not accepted ({}); still trying every {} ms", why,
               hb.interval().count());
  else if (news == agent::heartbeat_news::recovered)
    log->info("heartbeat accepted again");
  else if (result.outcome != agent::post_outcome::accepted)
    log->debug("heartbeat not accepted ({}), {} in a row", why,
               hb.consecutive_failures());
}

// With heartbeats off, one heartbeat at start all the same: the agent says at
// once whether the control plane is there and takes its credentials.
void probe_control_plane(forwarder_actor* self) {
  auto& st = self->state;
  auto body = agent::encode_heartbeat(st.heartbeat->options(), st.wall->wall_now());
  self->request(st.poster, caf::infinite, heartbeat_atom::value, std::move(body))
    .then([](agent::post_result& result) { log_control_plane_check(result); },
          [=](caf::error& err) {
            agent::post_result failed;
            failed.detail = self->system().render(err);
            log_control_plane_check(failed);
          });
}

// One heartbeat, unless the previous one is still out. A failure is only
// logged and counted: the next heartbeat is the retry.
void beat(forwarder_actor* self) {
  auto& st = self->state;
  auto body = st.heartbeat->start(st.wall->wall_now());
  if (!body)
    return;
  self->request(st.poster, caf::infinite, heartbeat_atom::value, std::move(*body))
    .then([=](agent::post_result& result) { heartbeat_done(self, result); },
          [=](caf::error& err) {
            agent::post_result failed;
            failed.detail = self->system().render(err);
            heartbeat_done(self, failed);
          });
}

agent::forwarder_figures figures_of(const forwarder_state& st) {
  agent::forwarder_figures f;
  f.events = st.logic->stats();
  f.spooled = st.spool->stats().appended;
  f.spool_depth = st.spool->size();
  f.spool_bytes = st.spool->live_bytes();
  f.memory_depth = st.logic->queued_in_memory();
  f.spooling = st.logic->spool_mode();
  f.last_accepted = st.last_accepted;
  f.heartbeats = st.heartbeat->stats();
  return f;
}

} // namespace

forwarder_state::~forwarder_state() {
  if (!logic)
    return;
  if (auto st = logic->spool_memory(); !st)
    component_logger("forwarder")
      ->error("cannot spool on shutdown: {}", st.error().to_string());
}

caf::behavior forwarder(forwarder_actor* self, std::shared_ptr<agent::event_spool> spool,
                        std::shared_ptr<agent::rejected_event_log> rejected_log,
                        agent::forwarder_options options,
                        agent::heartbeat_options heartbeat, caf::actor poster,
                        std::shared_ptr<const clock> wall) {
  auto& st = self->state;
  st.spool = std::move(spool);
  st.rejected_log = std::move(rejected_log);
  st.logic = std::make_unique<agent::forwarder_logic>(options, *st.spool, nullptr);
  st.heartbeat = std::make_unique<agent::heartbeat_sender>(std::move(heartbeat));
  st.poster = std::move(poster);
  st.wall = std::move(wall);
  self->send(self, wake_atom::value, std::uint64_t{0}); // a leftover spool drains first
  if (st.heartbeat->enabled())
    self->send(self, heartbeat_atom::value); // the control plane hears of us at once
  else
    probe_control_plane(self);
  return {
    [=](fault_watch_atom, caf::actor watcher) {
      self->state.fault_watcher = std::move(watcher);
    },
    [=](forward_atom, health_event& event) -> caf::result<bool> {
      if (self->state.fault_watcher && !event.is_healthy
          && event.component_class == "GPU")
        self->send(self->state.fault_watcher, report_now_atom::value);
      auto result = self->state.logic->submit(std::move(event), self->clock().now());
      if (result.dropped > 0)
        component_logger("forwarder")
          ->warn("spool full: dropped the {} oldest non-fatal events", result.dropped);
      if (result.status == agent::submit_status::refused) {
        const auto why = result.error ? result.error->to_string() : "refused";
        component_logger("forwarder")->error("event {} not stored: {}", result.id, why);
        return caf::make_error(caf::sec::runtime_error, "event not stored: " + why);
      }
      pump(self);
      return true;
    },
    [=](wake_atom, std::uint64_t generation) {
      if (generation == 0 || generation == self->state.wake_generation)
        pump(self);
    },
    [=](heartbeat_atom) {
      beat(self);
      self->delayed_send(self, self->state.heartbeat->interval(), heartbeat_atom::value);
    },
    [=](figures_atom) { return figures_of(self->state); },
  };
}

caf::behavior event_poster(caf::event_based_actor*,
                           std::shared_ptr<agent::http_event_poster> poster) {
  return {
    [=](post_atom, const std::string& body) { return poster->post(body); },
    [=](heartbeat_atom, const std::string& json) { return poster->post_heartbeat(json); },
  };
}

} // namespace vigil
