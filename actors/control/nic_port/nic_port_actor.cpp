#include "actors/control/nic_port/nic_port_actor.hpp"

#include <algorithm>

#include <caf/actor_cast.hpp>

#include "actors/protocol/control_messages.hpp"

namespace vigil {

namespace {

// seed 002 §6.2: the drop rule is evaluated when it could first fire.
void arm_drop_check(nic_port_actor* self) {
  auto& st = self->state;
  if (st.drop_check_armed)
    return;
  if (auto at = st.history.next_check()) {
    st.drop_check_armed = true;
    auto delay = std::max(caf::timespan{0}, caf::timespan{*at - st.time->wall_now()});
    self->delayed_send(self, delay, nicdrop_atom::value);
  }
}

} // namespace

caf::behavior nic_port(nic_port_actor* self, std::string node_name, std::string port,
                       control::correlation_config config, caf::actor_addr parent,
                       std::shared_ptr<const clock> time) {
  auto& st = self->state;
  st.node_name = std::move(node_name);
  st.port = std::move(port);
  st.history = control::nic_port_history(config);
  st.parent = std::move(parent);
  st.time = std::move(time);
  return {
    [=](correlate_atom, const health_event& event, std::int64_t at_ns, bool live) {
      auto& st = self->state;
      const wall_time at{std::chrono::nanoseconds{at_ns}};
      control::note_port_report(st.report, event, at);
      auto outcome = control::observe_port(st.history, st.port, event, at);
      // A replayed event is followed by the rest of the history, which may
      // bring the port back before its deadline: the timer waits for the
      // node's replay_atom at the replay's end (drops between replayed
      // events come in the outcome's `due`, in order).
      if (live)
        arm_drop_check(self);
      return outcome;
    },
    [=](fabric_atom) { self->state.history.explain_down(); },
    // The node's replay is over: the drop due by now, if any (stamped at its
    // deadline), and the timer armed for the next.
    [=](replay_atom) {
      auto& st = self->state;
      std::vector<health_event> dropped;
      if (auto drop =
            control::due_drop(st.history, st.node_name, st.port, st.time->wall_now()))
        dropped.push_back(std::move(*drop));
      arm_drop_check(self);
      return dropped;
    },
    // Its timer: a drop due by now is sent to the node (stamped at its
    // deadline), and the timer armed for the next.
    [=](nicdrop_atom) {
      auto& st = self->state;
      st.drop_check_armed = false;
      if (auto dropped =
            control::due_drop(st.history, st.node_name, st.port, st.time->wall_now()))
        if (auto node = caf::actor_cast<nic_port_owner>(st.parent))
          self->send(node, nicdrop_atom::value, std::move(*dropped));
      arm_drop_check(self);
    },
    [=](summary_atom) {
      const auto& st = self->state;
      auto out = self->figures(4);
      out["name"] = "nic_port/" + st.port;
      out["kind"] = "nic_port";
      out["port"] = st.port;
      out["state"] = st.report.state;
      out["physState"] = st.report.phys_state;
      out["linkLayer"] = st.report.link_layer;
      out["role"] = st.report.role;
      out["linkDowned"] = st.report.link_downed;
      out["linkDownsInWindow"] = st.history.link_downs();
      if (auto since = st.history.down_since())
        out["downSince"] = format_rfc3339(*since);
      if (st.report.at)
        out["reportedAt"] = format_rfc3339(*st.report.at);
      out["dropReported"] = st.history.drop_reported();
      return out.dump();
    },
  };
}

} // namespace vigil
