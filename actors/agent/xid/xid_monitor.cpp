#include "actors/agent/xid/xid_monitor.hpp"

#include <caf/all.hpp>

#include "runtime/logging.hpp"

namespace vigil {

namespace {

void forward(xid_monitor_actor* self, health_event event) {
  ++self->state.figures.events;
  self->send(self->state.forwarder, forward_atom::value, std::move(event));
}

void poll_once(xid_monitor_actor* self, const clock& wall) {
  auto& st = self->state;
  std::vector<agent::log_line> lines;
  st.parts.source->poll(lines, st.config.max_lines_per_poll);
  const auto now = wall.wall_now();
  for (const auto& line : lines) {
    ++st.figures.lines;
    auto parsed = st.parser.parse(line.text);
    if (!parsed.is_nvidia()) {
      if (!st.parts.nic_check)
        continue;
      const auto at = line.realtime.value_or(now);
      if (auto e = st.parts.nic_check->event_for(line.text, at, st.config.node_name,
                                                 st.parts.source->boot_id(),
                                                 st.parts.sysfs_root))
        if (auto out = st.grouper.offer(std::move(*e), at, st.closed))
          forward(self, std::move(*out));
      continue;
    }
    if (auto* bad = std::get_if<agent::malformed_record>(&parsed.record)) {
      if (st.malformed.add(bad->kind, line.text))
        component_logger("xid_monitor")
          ->warn("malformed {} line: {}", bad->kind, line.text);
      continue;
    }
    const auto at = line.realtime.value_or(now);
    auto event = st.builder->build(parsed, line.text, at);
    if (!event)
      continue;
    // Every superseding line cancels, even one its burst swallows: the
    // records it supersedes may have come after the burst opened.
    auto cancelled = st.parts.cancellations ? st.parts.cancellations->cancelled_by(*event)
                                            : std::vector<health_event>{};
    if (auto out = st.grouper.offer(std::move(*event), at, st.closed))
      forward(self, std::move(*out));
    for (auto& healthy : cancelled)
      if (auto out = st.grouper.offer(std::move(healthy), at, st.closed))
        forward(self, std::move(*out));
  }
  st.grouper.expire(now, st.closed);
  st.closed.clear(); // closed bursts carry counts only; the first event went out
  // The forwarder has the events (queued or spooled) in mailbox order before
  // any later message, so the position may move past these lines.
  if (!lines.empty())
    if (auto saved = st.parts.positions->save(st.parts.source->position()); !saved)
      component_logger("xid_monitor")->error("{}", saved.error().to_string());
  ++st.figures.polls;
  st.figures.last_poll = now;
}

} // namespace

std::vector<health_event>
xid_reboot_baselines(const std::string& node, const std::string& boot_id, wall_time now) {
  std::vector<health_event> out;
  for (const auto& [component, check] :
       {std::pair{"GPU", "SysLogsXIDError"}, std::pair{"NVSwitch", "SysLogsSXIDError"},
        std::pair{"GPU", "SysLogsGPUFallenOff"},
        std::pair{"NIC", "SysLogsNICDriverError"}}) {
    health_event e;
    e.id = "baseline-" + node + "-" + boot_id + "-" + check;
    e.agent = "syslog-health-monitor";
    e.component_class = component;
    e.check_name = check;
    e.is_healthy = true;
    e.message = "host rebooted (boot ID " + boot_id + "): no " + check + " since";
    e.node_name = node;
    e.generated = now;
    out.push_back(std::move(e));
  }
  return out;
}

caf::behavior xid_monitor(xid_monitor_actor* self, xid_monitor_config config,
                          std::shared_ptr<xid_monitor_parts> parts, caf::actor forwarder,
                          std::shared_ptr<const clock> wall) {
  auto& st = self->state;
  st.config = std::move(config);
  st.parts = std::move(*parts);
  st.forwarder = std::move(forwarder);
  st.builder = std::make_unique<agent::xid_event_builder>(
    *st.parts.catalog,
    agent::xid_event_options{st.config.node_name, st.parts.source->boot_id()});
  if (st.parts.metadata)
    st.builder->learn_gpus(*st.parts.metadata);
  if (st.parts.source->rebooted())
    for (auto& e : xid_reboot_baselines(st.config.node_name, st.parts.source->boot_id(),
                                        wall->wall_now()))
      forward(self, std::move(e));
  self->set_error_handler([](caf::error&) {}); // refusals are logged by the forwarder
  self->send(self, poll_atom::value);
  return {
    [=](poll_atom) {
      poll_once(self, *wall);
      self->delayed_send(self, self->state.config.poll_interval, poll_atom::value);
    },
    [=](bool) {},
    [=](figures_atom) {
      auto figures = self->state.figures;
      figures.malformed = self->state.malformed.total();
      return figures;
    },
  };
}

} // namespace vigil
