// The fleet actor's routing: each journaled event to its node actor. NIC
// ports down on many nodes at once are one fabric incident (journaled
// fleet-wide; its nodes drop their port-down records), and a link-down the
// fabric does not explain yet waits correlation.fabric_hold first. Events for
// a node actor whose journal replay is being read wait for it.
#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/control/fleet/fleet_actor_internal.hpp"
#include "actors/journal/journal_messages.hpp"
#include "actors/protocol/control_messages.hpp"
#include "runtime/logging.hpp"

namespace vigil::fleet_detail {

namespace {

using nlohmann::json;

// One fabric incident (NIC ports down on many nodes at once): journaled as
// one fleet-wide row, and its nodes are told to drop their port-down records.
// Sharded, every replica finds the incident and tells the nodes it owns; the
// rows they journal are one (same opening time and size: same key).
void on_fabric_incident(fleet_actor* self, const control::fabric_incident& incident) {
  auto& st = self->state;
  ++st.settings->counters->fabric_incidents;
  std::vector<std::string> nodes(incident.nodes.begin(), incident.nodes.end());
  std::string names;
  for (const auto& n : nodes)
    names += (names.empty() ? "" : ", ") + n;
  logger()->error("fabric incident: NIC ports down on {} nodes within the window ({}); "
                  "not quarantining them for it",
                  nodes.size(), names);
  journal_record row;
  row.recorded_at = st.time->wall_now();
  row.kind = fabric_row;
  row.body = json{{"opened", format_rfc3339(incident.opened)}, {"nodes", nodes}}.dump();
  row.idempotency_key =
    "fabric/" + format_rfc3339(incident.opened) + "/" + std::to_string(nodes.size());
  self->request(st.journal, caf::infinite, append_atom::value, std::move(row))
    .then([](const append_outcome&) {},
          [](const caf::error& err) {
            logger()->warn("fabric incident not journaled: {}", caf::to_string(err));
          });
  for (const auto& n : nodes)
    if (auto i = st.nodes.find(n); i != st.nodes.end())
      self->send(i->second, fabric_atom::value);
}

} // namespace

void mark_if_fabric(fleet_actor* self, health_event& event) {
  auto& st = self->state;
  if (control::reports_link_down(event)
      && st.fabric.suppresses(event.node_name, st.time->wall_now()))
    event.strategy = processing_strategy::store_and_analyse;
}

void count_port_down(fleet_actor* self, const health_event& event, wall_time arrived) {
  if (control::reports_link_down(event) && control::is_nic_port_down(event))
    if (auto incident = self->state.fabric.on_port_down(event.node_name, arrived))
      on_fabric_incident(self, *incident);
}

void route(fleet_actor* self, health_event event, std::int64_t seq, wall_time arrived) {
  auto& st = self->state;
  ++st.stats.routed;
  agent_heard(self, event.node_name); // an event is proof of life too
  count_port_down(self, event, arrived);
  mark_if_fabric(self, event);
  // A link down the fabric does not explain yet waits correlation.fabric_hold:
  // the incident may still be forming on other nodes.
  const auto name = event.node_name;
  const bool first = !st.on_hold.next_due(name);
  const bool hold = control::reports_link_down(event)
                    && event.strategy == processing_strategy::execute_remediation;
  if (!st.on_hold.take(event, seq, hold, st.time->wall_now())) {
    deliver(self, std::move(event), seq);
    return;
  }
  if (first)
    self->delayed_send(self, st.settings->correlation.fabric_hold,
                       fabric_hold_expired_atom::value, name);
}

// The hold of some of `node`'s events is over: deliver them in order (an
// incident formed meanwhile claims them), and wait for the next one.
void release_held(fleet_actor* self, const std::string& node) {
  auto& st = self->state;
  const auto now = st.time->wall_now();
  for (auto& h : st.on_hold.release(node, now)) {
    mark_if_fabric(self, h.event);
    deliver(self, std::move(h.event), h.seq);
  }
  if (auto due = st.on_hold.next_due(node))
    self->delayed_send(self, std::max(*due - now, std::chrono::nanoseconds{0}),
                       fabric_hold_expired_atom::value, node);
}

void deliver(fleet_actor* self, health_event event, std::int64_t seq) {
  auto& st = self->state;
  auto name = event.node_name;
  if (auto waiting = st.replaying.find(name); waiting != st.replaying.end()) {
    waiting->second.emplace_back(std::move(event), seq);
    return;
  }
  self->send(node_for(self, name), route_atom::value, std::move(event), seq);
}

} // namespace vigil::fleet_detail
