// What a fleet run reports: the trace's summary, each policy's figures, as
// JSON (`--json`) and as the table people read.
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "actors/agent/xid/xid_catalog.hpp"
#include "actors/agent/xid/xid_events.hpp"
#include "actors/agent/xid/xid_parser.hpp"
#include "runtime/sim/fleet_trace.hpp"

namespace vigil::demo {

namespace fleet_sim {

trace_summary summarise(const fleet_options& o, const fleet_trace& t,
                        const agent::xid_catalog& catalog) {
  trace_summary s;
  s.nodes = o.nodes;
  s.days = o.days;
  s.seed = o.seed;
  for (const char* key : category_keys)
    s.faults_by_category[key] = 0;
  for (const auto& f : t.faults) {
    ++s.faults;
    ++s.faults_by_category[category_keys[static_cast<std::size_t>(f.what)]];
    s.hardware_faults += f.hardware() ? 1 : 0;
    s.switch_outages += f.signal == signal_kind::switch_outage ? 1 : 0;
  }
  for (const auto& n : t.noise)
    ++(n.flap ? s.nic_flaps : s.app_xids);
  agent::kernel_log_parser parser;
  agent::xid_event_builder builder(catalog, {"gpu-node-0000", "boot"});
  for (int code : model_xids) {
    const auto line = xid_line(code, 0);
    auto event = builder.build(parser.parse(line), line, epoch);
    s.xid_actions[code] = event ? std::string(to_string(event->action)) : "";
  }
  return s;
}

namespace {

nlohmann::json outcome_json(const policy_outcome& o) {
  return {{"gpuHoursLost", o.gpu_hours_lost},
          {"gpuHoursOutOfService", o.gpu_hours_out_of_service},
          {"gpuHoursFaultyInService", o.gpu_hours_faulty_in_service},
          {"remediations",
           {{"reset", o.remediations.reset},
            {"reboot", o.remediations.reboot},
            {"replace", o.remediations.replace},
            {"contactSupport", o.remediations.contact_support}}},
          {"falseRemediations", o.false_remediations},
          {"missedFaults", o.missed_faults},
          {"missedByCategory", o.missed_by_category},
          {"breakerTrips", o.breaker_trips},
          {"faultsFixed", o.faults_fixed},
          {"faultsFixedBySupport", o.faults_fixed_by_support},
          {"signals", o.signals},
          {"cordons", o.cordons},
          {"drains", o.drains},
          {"escalations", o.escalations},
          {"ruleFirings", o.rule_firings},
          {"fabricIncidents", o.fabric_incidents}};
}

} // namespace

} // namespace fleet_sim

nlohmann::json to_json(const fleet_result& result) {
  const auto& t = result.trace;
  nlohmann::json actions = nlohmann::json::object();
  for (const auto& [code, action] : t.xid_actions)
    actions[std::to_string(code)] = action;
  return {{"vigil", fleet_sim::outcome_json(result.vigil)},
          {"baseline", fleet_sim::outcome_json(result.baseline)},
          {"trace",
           {{"nodes", t.nodes},
            {"days", t.days},
            {"seed", t.seed},
            {"nodeDays", static_cast<std::int64_t>(t.nodes) * t.days},
            {"faults", t.faults},
            {"faultsByCategory", t.faults_by_category},
            {"hardwareFaults", t.hardware_faults},
            {"switchOutages", t.switch_outages},
            {"appXids", t.app_xids},
            {"nicFlaps", t.nic_flaps},
            {"xidActions", actions}}}};
}

std::string to_table(const fleet_result& result) {
  const auto& t = result.trace;
  const auto& v = result.vigil;
  const auto& b = result.baseline;
  std::string out;
  char line[160];
  std::snprintf(line, sizeof line,
                "fleet simulation: %d nodes x %d days (%lld node-days), seed %llu\n",
                t.nodes, t.days, static_cast<long long>(t.nodes) * t.days,
                static_cast<unsigned long long>(t.seed));
  out += line;
  out += "trace: " + std::to_string(t.faults) + " interruptions (";
  using fleet_sim::category_keys;
  using fleet_sim::category_labels;
  for (std::size_t i = 0; i < fleet_sim::category_count; ++i)
    out += std::string(i ? ", " : "") + category_labels[i] + " "
           + std::to_string(t.faults_by_category.at(category_keys[i]));
  out += "), " + std::to_string(t.app_xids) + " application XIDs, "
         + std::to_string(t.nic_flaps) + " NIC flaps\n\n";
  std::snprintf(line, sizeof line, "%-26s %12s %20s\n", "", "vigil",
                "reboot every fault");
  out += line;
  auto hours = [&](const char* label, double a, double c) {
    std::snprintf(line, sizeof line, "%-26s %12.1f %20.1f\n", label, a, c);
    out += line;
  };
  auto count = [&](const char* label, int a, int c) {
    std::snprintf(line, sizeof line, "%-26s %12d %20d\n", label, a, c);
    out += line;
  };
  hours("GPU-hours lost", v.gpu_hours_lost, b.gpu_hours_lost);
  hours("  out of service", v.gpu_hours_out_of_service, b.gpu_hours_out_of_service);
  hours("  faulty, at work", v.gpu_hours_faulty_in_service,
        b.gpu_hours_faulty_in_service);
  count("GPU resets", v.remediations.reset, b.remediations.reset);
  count("reboots", v.remediations.reboot, b.remediations.reboot);
  count("replacements", v.remediations.replace, b.remediations.replace);
  count("contact support", v.remediations.contact_support,
        b.remediations.contact_support);
  count("false remediations", v.false_remediations, b.false_remediations);
  count("missed faults", v.missed_faults, b.missed_faults);
  count("breaker trips", v.breaker_trips, b.breaker_trips);
  return out;
}

} // namespace vigil::demo
