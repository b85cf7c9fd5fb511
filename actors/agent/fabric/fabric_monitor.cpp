#include "actors/agent/fabric/fabric_monitor.hpp"

#include <caf/all.hpp>

#include "actors/protocol/agent_messages.hpp"
#include "runtime/logging.hpp"

namespace vigil {

namespace {

void poll_once(fabric_monitor_actor* self, const fabric_monitor_config& config,
               const clock& wall) {
  auto& st = self->state;
  const auto now = wall.wall_now();
  auto text =
    st.run(config.nvidia_smi + " --query-gpu=" + std::string(agent::fabric_query_fields)
           + " --format=csv,noheader");
  auto rows = text ? agent::parse_fabric_query(*text)
                   : expected<std::vector<agent::fabric_row>>(text.error());
  ++st.figures.polls;
  st.figures.last_poll = now;
  if (!rows) {
    ++st.figures.malformed;
    if (rows.error().to_string() != st.last_problem) {
      st.last_problem = rows.error().to_string();
      component_logger("fabric_monitor")
        ->warn("fabric state not read ({}); the fabric is not checked until it is",
               st.last_problem);
    }
    return;
  }
  st.last_problem.clear();
  for (auto& event : st.health->observe(*rows, now)) {
    ++st.figures.events;
    self->send(st.forwarder, forward_atom::value, std::move(event));
  }
}

} // namespace

caf::behavior fabric_monitor(fabric_monitor_actor* self, fabric_monitor_config config,
                             agent::command_runner run, caf::actor forwarder,
                             std::shared_ptr<const clock> wall) {
  auto& st = self->state;
  st.health.emplace(config.node, config.grace);
  st.run = std::move(run);
  st.forwarder = std::move(forwarder);
  self->set_error_handler([](caf::error&) {});
  self->send(self, poll_atom::value);
  return {
    [=](poll_atom) {
      poll_once(self, config, *wall);
      self->delayed_send(self, config.interval, poll_atom::value);
    },
    [=](bool) {},
    [=](figures_atom) { return self->state.figures; },
  };
}

} // namespace vigil
