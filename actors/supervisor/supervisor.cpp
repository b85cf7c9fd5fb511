#include "actors/supervisor/supervisor.hpp"

#include <algorithm>

#include <caf/all.hpp>

#include "actors/protocol/atoms.hpp"
#include "runtime/logging.hpp"

namespace vigil {

namespace {

// Newest first, one at a time: components started later depend on earlier
// ones, and may still need them while they stop (an elector releases its
// Lease through the gateway started before it). The next is asked when the
// previous one is down; the grace period bounds the whole.
void stop_newest(supervisor_actor* self) {
  auto& children = self->state.children;
  if (!children.empty())
    self->send_exit(caf::actor_cast<caf::actor>(children.back().handle),
                    caf::exit_reason::user_shutdown);
}

void begin_shutdown(supervisor_actor* self, caf::error reason, caf::timespan grace) {
  auto& st = self->state;
  if (st.stopping)
    return;
  st.stopping = true;
  st.stop_reason = std::move(reason);
  if (st.children.empty()) {
    self->quit(st.stop_reason);
    return;
  }
  component_logger("supervisor")
    ->info("stopping {} components, grace {} ms", st.children.size(),
           std::chrono::duration_cast<std::chrono::milliseconds>(grace).count());
  stop_newest(self);
  self->delayed_send(self, grace, deadline_atom::value);
}

} // namespace

caf::behavior supervisor(supervisor_actor* self, caf::timespan grace) {
  // An exit request from outside (SIGTERM via the bootstrap) starts the
  // orderly shutdown; children are monitored, not linked, so their exits
  // arrive as down messages and never as exit requests.
  self->set_exit_handler(
    [=](caf::exit_msg& msg) { begin_shutdown(self, msg.reason, grace); });
  self->set_down_handler([=](caf::down_msg& msg) {
    auto& st = self->state;
    auto i =
      std::find_if(st.children.begin(), st.children.end(),
                   [&](const supervised_child& c) { return c.address == msg.source; });
    if (i == st.children.end())
      return;
    const auto name = i->name;
    st.children.erase(i);
    auto log = component_logger("supervisor");
    if (st.stopping) {
      log->info("{} stopped", name);
      if (st.children.empty())
        self->quit(st.stop_reason);
      else
        stop_newest(self);
      return;
    }
    if (!msg.reason) {
      // A one-shot component (the demo's scenario) finished its job.
      log->info("{} finished", name);
      if (st.children.empty())
        self->quit();
      return;
    }
    // A component died: the process cannot do its job without it, so stop
    // the rest and exit non-zero; Kubernetes restarts the pod.
    log->error("{} terminated unexpectedly: {}", name, to_string(msg.reason));
    begin_shutdown(self, msg.reason, grace);
  });
  return {
    [=](adopt_atom, const std::string& name, const caf::actor& child) {
      self->monitor(child);
      self->state.children.push_back(
        {name, child.address(), caf::actor_cast<caf::strong_actor_ptr>(child)});
      if (self->state.stopping)
        self->send_exit(child, caf::exit_reason::user_shutdown);
    },
    [=](list_atom) {
      std::vector<std::string> names;
      for (const auto& c : self->state.children)
        names.push_back(c.name);
      return names;
    },
    [=](deadline_atom) {
      auto& st = self->state;
      auto log = component_logger("supervisor");
      for (const auto& c : st.children) {
        log->warn("{} did not stop within the grace period; cancelling it", c.name);
        st.cancelled.push_back(c.name);
        self->send_exit(caf::actor_cast<caf::actor>(c.handle), caf::exit_reason::kill);
      }
      st.children.clear();
      self->quit(st.stop_reason);
    },
  };
}

} // namespace vigil
