#include "actors/agent/nic/nic_events.hpp"

#include <cstdint>
#include <cstdio>

namespace vigil::agent {

namespace {

health_event base_event(const nic_event_context& ctx, nic_check check) {
  health_event e;
  e.agent = nic_agent_name;
  e.component_class = "NIC";
  e.check_name = std::string(to_string(check));
  e.node_name = ctx.node_name;
  e.strategy = ctx.strategy;
  e.generated = ctx.now;
  return e;
}

void set_fatal(health_event& e, bool fatal, recommended_action action) {
  e.is_fatal = fatal;
  e.is_healthy = false;
  e.action = action;
}

void set_healthy(health_event& e) {
  e.is_fatal = false;
  e.is_healthy = true;
  e.action = recommended_action::none;
}

// seed 002 §11.2: port events name the NIC and the port.
std::vector<entity> port_entities(const std::string& device, unsigned port) {
  return {{"NIC", device}, {"NICPort", std::to_string(port)}};
}

health_event finish(health_event e, const nic_event_context& ctx) {
  e.id = nic_event_id(e, ctx.boot_id);
  return e;
}

} // namespace

health_event make_port_state_event(const nic_event_context& ctx,
                                   const std::string& device, unsigned port,
                                   const std::string& link_layer,
                                   const port_verdict& verdict,
                                   const std::string& operstate,
                                   std::map<std::string, std::string> details) {
  auto e = base_event(ctx, state_check_for(link_layer));
  if (verdict.condition == port_condition::healthy)
    set_healthy(e);
  else
    set_fatal(e, verdict.fatal, verdict.action);
  e.message = port_message(device, port, link_layer, verdict, operstate);
  e.entities = port_entities(device, port);
  e.metadata = std::move(details);
  e.metadata["state"] = verdict.state_name;
  e.metadata["phys_state"] = verdict.phys_name;
  e.metadata["link_layer"] = link_layer;
  if (!operstate.empty())
    e.metadata["operstate"] = operstate;
  return finish(std::move(e), ctx);
}

health_event make_counter_event(const nic_event_context& ctx, const std::string& device,
                                unsigned port, const std::string& link_layer,
                                const counter_finding& finding) {
  auto e = base_event(ctx, degradation_check_for(link_layer));
  if (finding.what == counter_finding::kind::cleared)
    set_healthy(e);
  else
    set_fatal(e, true, recommended_action::replace_vm);
  e.message = counter_message(device, port, link_layer, finding);
  e.error_codes = {finding.counter};
  e.entities = port_entities(device, port);
  e.metadata = {{"counter", finding.counter},
                {"previous", std::to_string(finding.previous)},
                {"current", std::to_string(finding.current)},
                {"baseline", std::to_string(finding.baseline)},
                {"threshold", std::to_string(finding.threshold)},
                {"link_layer", link_layer}};
  return finish(std::move(e), ctx);
}

health_event make_disappeared_event(const nic_event_context& ctx,
                                    const std::string& device,
                                    const std::string& link_layer) {
  auto e = base_event(ctx, state_check_for(link_layer));
  set_fatal(e, true, recommended_action::replace_vm);
  e.message =
    "NIC " + device + " disappeared from /sys/class/infiniband/ - hardware failure";
  e.entities = {{"NIC", device}};
  return finish(std::move(e), ctx);
}

health_event make_reappeared_event(const nic_event_context& ctx,
                                   const std::string& device,
                                   const std::string& link_layer) {
  auto e = base_event(ctx, state_check_for(link_layer));
  set_healthy(e);
  e.message = "NIC " + device + " is back in /sys/class/infiniband/";
  e.entities = {{"NIC", device}};
  return finish(std::move(e), ctx);
}

health_event make_card_event(const nic_event_context& ctx, const card_verdict& verdict,
                             const std::vector<std::string>& devices,
                             const std::string& link_layer) {
  auto e = base_event(ctx, state_check_for(link_layer));
  const std::string card = "Card " + verdict.card + " ("
                           + std::string(to_string(verdict.role)) + ") has "
                           + std::to_string(verdict.active_ports) + " active ports, ";
  if (verdict.anomalous) {
    set_fatal(e, true, recommended_action::replace_vm);
    e.message =
      card + "expected " + std::to_string(verdict.expected_ports) + " (peer mode)";
  } else {
    set_healthy(e);
    e.message = card + "matching peer mode " + std::to_string(verdict.expected_ports);
  }
  for (const auto& device : devices)
    e.entities.push_back({"NIC", device});
  e.metadata = {{"card", verdict.card},
                {"role", std::string(to_string(verdict.role))},
                {"active_ports", std::to_string(verdict.active_ports)},
                {"peer_mode", std::to_string(verdict.expected_ports)}};
  return finish(std::move(e), ctx);
}

std::string nic_event_id(const health_event& e, const std::string& boot_id) {
  std::uint64_t hash = 14695981039346656037ull; // FNV-1a 64
  auto mix = [&hash](const std::string& text) {
    for (unsigned char c : text) {
      hash ^= c;
      hash *= 1099511628211ull;
    }
    hash ^= 0xff; // field separator
    hash *= 1099511628211ull;
  };
  mix(e.node_name);
  mix(e.check_name);
  for (const auto& ent : e.entities)
    mix(ent.type + "=" + ent.value);
  mix(e.is_healthy ? "healthy" : "unhealthy");
  mix(e.message);
  mix(boot_id);
  mix(e.generated ? std::to_string(e.generated->time_since_epoch().count()) : "");
  char text[24];
  std::snprintf(text, sizeof text, "nic-%016llx", static_cast<unsigned long long>(hash));
  return text;
}

} // namespace vigil::agent
