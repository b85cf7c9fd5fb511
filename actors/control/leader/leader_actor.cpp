#include "actors/control/leader/leader_actor.hpp"

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/gateway/kube_gateway_messages.hpp"
#include "actors/protocol/atoms.hpp"
#include "actors/protocol/control_messages.hpp"
#include "runtime/logging.hpp"

namespace vigil {

namespace {

std::shared_ptr<spdlog::logger> logger() {
  return component_logger("leader");
}

void set_leading(leader_actor* self, bool leading) {
  auto& st = self->state;
  if (st.leading == leading)
    return;
  st.leading = leading;
  // Told first, logged after: whoever reads the line and then asks ingest
  // finds the news ahead of its request in ingest's mailbox.
  for (const auto& s : st.subscribers)
    self->send(s, leader_atom::value, leading);
  if (leading) {
    ++st.acquisitions;
    logger()->warn("{} now leads (Lease {}/{}): acting on the cluster",
                   st.config.identity, st.config.ns, st.config.name);
  } else {
    logger()->warn("{} stopped leading (holder now '{}'): standing by",
                   st.config.identity, st.holder);
  }
}

// The leader keeps acting until renew_deadline has passed since its last
// successful write, then stops before anyone else may start. Checked after
// every failed request and on every tick, so an API server that does not
// answer at all cannot keep it leading.
void check_renew_deadline(leader_actor* self) {
  auto& st = self->state;
  if (st.leading
      && control::renew_deadline_passed(st.renewed, st.config, st.time->wall_now())) {
    logger()->warn("Lease {}/{} not renewed for {}s (renew deadline)", st.config.ns,
                   st.config.name, st.config.renew_deadline.count());
    set_leading(self, false);
  }
}

void release(leader_actor* self);

// An answer to a look or a write that comes back once the actor is shutting
// down: what it says of the Lease is kept (a release must carry the newest
// resourceVersion, and a takeover that just succeeded is ours to give up),
// and nothing else is done with it; then the release is written. Once the
// release is on its way (exit_wait ran out first), the answer is dropped.
bool answered_while_exiting(leader_actor* self, const kube::kube_result& result) {
  auto& st = self->state;
  if (!st.exiting)
    return false;
  if (st.releasing)
    return true;
  st.in_flight = false;
  if (result.ok()) {
    if (auto lease = control::read_lease(result.response().body))
      st.lease = std::move(*lease);
  } else if (result.error().not_found()) {
    st.lease.reset();
  }
  release(self);
  return true;
}

void renew_failed(leader_actor* self, const std::string& why) {
  auto& st = self->state;
  st.in_flight = false;
  logger()->warn("Lease {}/{}: {}", st.config.ns, st.config.name, why);
  check_renew_deadline(self);
}

// A Lease request that got no answer at all (the gateway is gone): nothing
// is known of the Lease, so it counts as a failed request; shutting down,
// the release is tried from the Lease last seen.
void request_lost(leader_actor* self, const char* what, const caf::error& err) {
  auto& st = self->state;
  if (st.exiting) {
    if (!st.releasing) {
      st.in_flight = false;
      release(self);
    }
    return;
  }
  renew_failed(self, std::string{what} + " got no answer: " + caf::to_string(err));
}

void write(leader_actor* self, const control::lease_step& step) {
  auto& st = self->state;
  // The renewTime written is (about) now: the Lease runs from here, not from
  // when the answer comes back.
  const auto sent = st.time->wall_now();
  self->request(st.gateway, caf::infinite, control::lease_write_request(st.config, step))
    .then(
      [=](const kube::kube_result& result) {
        auto& st = self->state;
        if (answered_while_exiting(self, result))
          return;
        if (!result.ok())
          return renew_failed(self, "write failed: " + result.error().to_string());
        st.in_flight = false;
        // Kept whether or not it came in time: the Lease on the server is the
        // one written, and a release must carry its resourceVersion.
        if (auto written = control::read_lease(result.response().body))
          st.lease = std::move(*written);
        if (control::renew_deadline_passed(sent, st.config, st.time->wall_now())) {
          // Retried past the renew deadline: this replica has stopped leading
          // meanwhile and must not start again on a stale renewal; the next
          // look renews afresh.
          logger()->warn("Lease {}/{}: write answered after the renew deadline; ignored",
                         st.config.ns, st.config.name);
          return check_renew_deadline(self);
        }
        st.renewed = sent;
        st.holder = st.config.identity;
        set_leading(self, true);
      },
      [=](const caf::error& err) { request_lost(self, "write", err); });
}

void look(leader_actor* self) {
  auto& st = self->state;
  if (st.in_flight || st.exiting)
    return;
  st.in_flight = true;
  self->request(st.gateway, caf::infinite, control::lease_get_request(st.config))
    .then(
      [=](const kube::kube_result& result) {
        auto& st = self->state;
        if (answered_while_exiting(self, result))
          return;
        std::optional<control::lease_record> observed;
        if (result.ok()) {
          auto lease = control::read_lease(result.response().body);
          if (!lease)
            return renew_failed(self, "unreadable Lease: " + lease.error().to_string());
          observed = std::move(*lease);
        } else if (!result.error().not_found()) {
          return renew_failed(self, "read failed: " + result.error().to_string());
        }
        // Kept for the release at exit: a standby must not write one over
        // the holder's Lease.
        st.lease = observed;
        auto step = control::next_lease_step(observed, st.config, st.time->wall_now());
        if (step.what == control::lease_step::kind::wait) {
          st.in_flight = false;
          st.holder = step.holder;
          return set_leading(self, false);
        }
        if (step.takeover)
          logger()->info("Lease {}/{} of '{}' expired; taking it over", st.config.ns,
                         st.config.name, observed ? observed->holder : std::string{});
        write(self, step);
      },
      [=](const caf::error& err) { request_lost(self, "read", err); });
}

// Shutdown, once no Lease request is in flight (or exit_wait ran out
// first): the Lease, if this replica holds it, is given up so a successor
// need not wait out its duration; whatever the answer, or none within
// exit_wait, the actor then quits with the exit reason.
void release(leader_actor* self) {
  auto& st = self->state;
  st.releasing = true;
  const auto reason = *st.exiting;
  std::optional<control::lease_step> step;
  if (st.lease)
    step = control::release_step(*st.lease, st.config, st.time->wall_now());
  if (!step)
    return self->quit(reason);
  self
    ->request(st.gateway, st.config.exit_wait,
              control::lease_write_request(st.config, *step))
    .then(
      [=](const kube::kube_result& result) {
        if (result.ok())
          logger()->info("Lease {}/{} released", self->state.config.ns,
                         self->state.config.name);
        else
          logger()->warn("Lease {}/{} not released: {}", self->state.config.ns,
                         self->state.config.name, result.error().to_string());
        self->quit(reason);
      },
      [=](const caf::error& err) {
        logger()->warn("Lease {}/{} not released: {}", self->state.config.ns,
                       self->state.config.name, caf::to_string(err));
        self->quit(reason);
      });
}

// The exit message: stop acting at once (the fleet and ingest are told
// before anything is written), then release. A look or renewal already in
// flight is waited for: it may change the Lease's resourceVersion, and a
// release written beside it would be refused as a conflict, leaving the
// successor to wait out the duration; answered later, it must not make a
// replica that is shutting down lead again. It is waited for exit_wait at
// most: the process's shutdown grace is shared with the components stopped
// after this one. A second exit message changes nothing (the supervisor's
// kill at its deadline needs none).
void begin_exit(leader_actor* self, caf::error reason) {
  auto& st = self->state;
  if (st.exiting)
    return;
  st.exiting = std::move(reason);
  set_leading(self, false);
  if (!st.in_flight)
    return release(self);
  self->delayed_send(self, st.config.exit_wait, exit_wait_atom::value);
}

} // namespace

caf::behavior leader_elector(leader_actor* self, control::lease_config config,
                             kube_gateway_handle gateway,
                             std::vector<caf::actor> subscribers,
                             std::shared_ptr<const clock> time) {
  auto& st = self->state;
  st.config = std::move(config);
  st.gateway = std::move(gateway);
  st.subscribers = std::move(subscribers);
  st.time = std::move(time);
  self->set_exit_handler([=](const caf::exit_msg& msg) { begin_exit(self, msg.reason); });
  look(self);
  self->delayed_send(self, st.config.retry_period, reconcile_atom::value);
  return {
    [=](reconcile_atom) {
      if (self->state.exiting)
        return;
      check_renew_deadline(self);
      look(self);
      self->delayed_send(self, self->state.config.retry_period, reconcile_atom::value);
    },
    [=](exit_wait_atom) {
      auto& st = self->state;
      if (!st.exiting || st.releasing)
        return;
      logger()->warn("Lease {}/{}: a request still unanswered {} ms into the stop; "
                     "releasing from the Lease last seen",
                     st.config.ns, st.config.name, st.config.exit_wait.count());
      release(self);
    },
    [=](summary_atom) {
      auto& st = self->state;
      return nlohmann::json{{"leading", st.leading},
                            {"holder", st.holder},
                            {"identity", st.config.identity},
                            {"acquisitions", st.acquisitions}}
        .dump();
    },
  };
}

} // namespace vigil
