#include "actors/agent/nic/nic_monitor.hpp"

#include <caf/all.hpp>

#include "runtime/logging.hpp"

namespace vigil {

namespace {

// Logs each distinct diagnostic once (they are rebuilt on every poll).
void report(nic_monitor_actor* self, const std::vector<agent::nic_diagnostic>& found) {
  for (const auto& d : found)
    if (self->state.reported.insert(d.to_string()).second)
      component_logger("nic_monitor")->warn("{}", d.to_string());
}

void poll_once(nic_monitor_actor* self, const clock& wall) {
  auto& st = self->state;
  const auto& options = st.poller->options();
  auto snapshot = st.reader->read();
  auto boot_id = agent::read_boot_id(options.boot_id_path);
  if (!boot_id)
    report(self, {boot_id.error()});
  const auto now = wall.wall_now();
  auto result = st.poller->poll(snapshot, boot_id ? *boot_id : "", now);
  agent::add_gid_diagnostics(result.events, options.sysfs_root, result.diagnostics);
  report(self, snapshot.diagnostics);
  report(self, result.diagnostics);
  st.figures.events += result.events.size();
  for (auto& event : result.events)
    self->send(st.forwarder, forward_atom::value, std::move(event));
  if (st.poller->state())
    if (auto saved = agent::save_nic_state_file(options.state_file, *st.poller->state());
        !saved)
      report(self, {saved.error()});
  ++st.figures.polls;
  st.figures.last_poll = now;
}

} // namespace

caf::behavior nic_monitor(nic_monitor_actor* self, agent::nic_poller poller,
                          caf::actor forwarder, std::shared_ptr<const clock> wall) {
  self->state.reader.emplace(poller.options().sysfs_root);
  self->state.poller.emplace(std::move(poller));
  self->state.forwarder = std::move(forwarder);
  // A refused event comes back as an error message; the forwarder logged it.
  self->set_error_handler([](caf::error&) {});
  self->send(self, poll_atom::value);
  return {
    [=](poll_atom) {
      poll_once(self, *wall);
      self->delayed_send(self, self->state.poller->options().state_polling_interval,
                         poll_atom::value);
    },
    // The forwarder's answers: a refusal is logged there, nothing to do here.
    [=](bool) {},
    [=](figures_atom) { return self->state.figures; },
  };
}

} // namespace vigil
