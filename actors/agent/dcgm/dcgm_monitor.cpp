#include "actors/agent/dcgm/dcgm_monitor.hpp"

#include <caf/all.hpp>

#include "actors/protocol/agent_messages.hpp"
#include "runtime/logging.hpp"

namespace vigil {

namespace {

void scrape_once(dcgm_monitor_actor* self, const clock& wall) {
  auto& st = self->state;
  const auto now = wall.wall_now();
  auto log = component_logger("dcgm_monitor");
  std::vector<health_event> events;
  auto text = st.source->fetch();
  std::optional<agent::metric_page> page;
  if (text) {
    page = agent::parse_prometheus_text(*text);
    st.figures.malformed += page->skipped_lines;
    if (page->samples.empty())
      text =
        failure{"page", page->problems.empty()
                          ? "no samples"
                          : "not a metrics page: " + page->problems.front().to_string()};
  }
  if (!text) {
    const bool was_down = st.health->exporter_down();
    events = st.health->exporter_unreachable(text.error().to_string(), now);
    if (!was_down) // once per outage
      log->warn("dcgm-exporter: {}; GPU findings kept until it answers",
                text.error().to_string());
  } else {
    if (st.health->exporter_down())
      log->info("dcgm-exporter answers again");
    events = st.health->observe(*page, now);
  }
  st.figures.events += events.size();
  for (auto& event : events)
    self->send(st.forwarder, forward_atom::value, std::move(event));
  ++st.figures.polls;
  st.figures.last_poll = now;
}

} // namespace

caf::behavior dcgm_monitor(dcgm_monitor_actor* self, dcgm_monitor_config config,
                           std::shared_ptr<agent::metrics_page_source> source,
                           std::shared_ptr<const agent::xid_catalog> catalog,
                           caf::actor forwarder, std::shared_ptr<const clock> wall) {
  auto& st = self->state;
  st.source = std::move(source);
  st.catalog = std::move(catalog);
  st.health.emplace(config.node, config.thresholds, st.catalog.get());
  st.forwarder = std::move(forwarder);
  // A refused event comes back as an error message; the forwarder logged it.
  self->set_error_handler([](caf::error&) {});
  self->send(self, poll_atom::value);
  return {
    [=](poll_atom) {
      scrape_once(self, *wall);
      self->delayed_send(self, config.interval, poll_atom::value);
    },
    [=](bool) {},
    [=](figures_atom) { return self->state.figures; },
  };
}

} // namespace vigil
