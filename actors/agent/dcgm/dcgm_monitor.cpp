#include "actors/agent/dcgm/dcgm_monitor.hpp"

#include <caf/all.hpp>

#include "actors/protocol/agent_messages.hpp"
#include "runtime/logging.hpp"

namespace vigil {

namespace {

// A check the page gives no data is silent, not healthy: said once, and
// again whenever the set changes (an exporter redeployed with other fields).
void report_blind_checks(dcgm_monitor_state& st, const agent::metric_page& page) {
  auto blind = agent::describe(agent::dcgm_blind_checks(page));
  if (blind == st.blind_checks)
    return;
  auto log = component_logger("dcgm_monitor");
  if (blind.empty())
    log->info("dcgm-exporter: every DCGM check has data now");
  else
    log->warn("dcgm-exporter's page has none of the fields these checks read: {}. "
              "They cannot find a fault until the exporter collects one of them "
              "(its counters file, --collectors/-f)",
              blind);
  st.blind_checks = std::move(blind);
}

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
    report_blind_checks(st, *page);
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
