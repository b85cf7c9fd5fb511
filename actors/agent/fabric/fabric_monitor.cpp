#include "actors/agent/fabric/fabric_monitor.hpp"

#include <caf/all.hpp>

#include "actors/agent/fabric/nvlink_status.hpp"
#include "actors/protocol/agent_messages.hpp"
#include "runtime/logging.hpp"

namespace vigil {

namespace {

void poll_once(fabric_monitor_actor* self, const fabric_monitor_config& config,
               const clock& wall) {
  auto& st = self->state;
  const auto now = wall.wall_now();
  auto query = [&](std::string_view fields) {
    return st.run(config.nvidia_smi + " --query-gpu=" + std::string(fields)
                  + " --format=csv,noheader");
  };
  auto text =
    query(st.ask_health ? agent::fabric_health_query_fields : agent::fabric_query_fields);
  // A driver without the health fields refuses the whole query (exit 2): the
  // registration alone is read from then on. A driver that failed (hung, a
  // GPU off the bus) is not asked twice, and keeps the health fields.
  if (!text && st.ask_health
      && agent::classify_nvidia_smi_failure(text.error())
           == agent::nvidia_smi_failure::setup) {
    if (auto basic = query(agent::fabric_query_fields)) {
      st.ask_health = false;
      component_logger("fabric_monitor")
        ->info("nvidia-smi does not answer the fabric health fields ({}); reading the "
               "fabric registration only",
               text.error().to_string());
      text = std::move(basic);
    }
  }
  auto forward = [&](std::vector<health_event> events) {
    for (auto& event : events) {
      ++st.figures.events;
      self->send(st.forwarder, forward_atom::value, std::move(event));
    }
  };
  if (!text)
    forward(st.presence->query_failed(text.error(), now));
  auto answer = text ? agent::split_unreachable(*text) : agent::split_answer{};
  auto rows = text ? agent::parse_fabric_query(answer.rows)
                   : expected<std::vector<agent::fabric_row>>(text.error());
  ++st.figures.polls;
  st.figures.last_poll = now;
  if (rows)
    forward(st.presence->observe(*rows, answer.unreachable, now));
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
  const auto manager = agent::read_fabric_manager(config.sysfs_root, config.proc_root);
  // NVLink status is a second opinion, asked only where there is a fabric:
  // when it cannot be read, the fabric state alone is judged (and the cause
  // logged once).
  std::vector<std::string> link_faults;
  auto links =
    expected<std::vector<agent::gpu_nvlinks>>(std::vector<agent::gpu_nvlinks>{});
  if (agent::has_fabric(*rows, manager)) {
    auto links_text = st.run(config.nvidia_smi + " nvlink --status");
    links = links_text ? agent::parse_nvlink_status(*links_text)
                       : expected<std::vector<agent::gpu_nvlinks>>(links_text.error());
  }
  if (links) {
    link_faults = agent::nvlink_shortfalls(*links);
    st.last_link_problem.clear();
  } else if (links.error().to_string() != st.last_link_problem) {
    st.last_link_problem = links.error().to_string();
    component_logger("fabric_monitor")
      ->warn("NVLink status not read ({}); the fabric state alone is judged",
             st.last_link_problem);
  }
  forward(st.health->observe(*rows, now, manager, link_faults));
}

} // namespace

caf::behavior fabric_monitor(fabric_monitor_actor* self, fabric_monitor_config config,
                             agent::command_runner run, caf::actor forwarder,
                             std::shared_ptr<const clock> wall) {
  auto& st = self->state;
  st.health.emplace(config.node, config.grace);
  st.presence.emplace(config.node, config.known_gpus, config.catalog.get());
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
