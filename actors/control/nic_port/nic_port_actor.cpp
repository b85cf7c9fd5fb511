#include "actors/control/nic_port/nic_port_actor.hpp"

#include <algorithm>

#include <caf/actor_cast.hpp>

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
    [=](correlate_atom, const health_event& event, std::int64_t at_ns) {
      auto& st = self->state;
      auto outcome = control::observe_port(st.history, st.port, event,
                                           wall_time{std::chrono::nanoseconds{at_ns}});
      arm_drop_check(self);
      return outcome;
    },
    [=](fabric_atom) { self->state.history.explain_down(); },
    [=](nicdrop_atom) {
      auto& st = self->state;
      st.drop_check_armed = false;
      if (auto dropped =
            control::due_drop(st.history, st.node_name, st.port, st.time->wall_now()))
        if (auto node = caf::actor_cast<nic_port_owner>(st.parent))
          self->send(node, nicdrop_atom::value, std::move(*dropped));
      arm_drop_check(self);
    },
  };
}

} // namespace vigil
