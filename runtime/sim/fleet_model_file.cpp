// The fleet model as YAML (`vigil demo --fleet --model FILE`) and the checks
// every fleet_options passes before a run: a wrong key or value is an error
// naming it.
#include <cmath>
#include <string>

#include <yaml-cpp/yaml.h>

#include "actors/agent/xid/xid_catalog.hpp"
#include "runtime/sim/fleet_trace.hpp"

namespace vigil::demo {

namespace fleet_sim {

namespace {

status check_fix(const char* field, const fix_odds& odds) {
  const bool negative = odds.reset < 0 || odds.reboot < 0 || odds.replace < 0;
  if (negative || std::abs(odds.reset + odds.reboot + odds.replace - 1.0) > 1e-6)
    return failure{std::string("model.") + field,
                   "shares must be non-negative and add up to 1"};
  return ok();
}

status check_range(const char* field, std::chrono::seconds lo, std::chrono::seconds hi) {
  if (lo.count() < 0 || hi < lo)
    return failure{std::string("model.") + field,
                   "must be at least its minimum (and >= 0)"};
  return ok();
}

} // namespace

status validate(const fleet_options& o, const agent::xid_catalog& catalog) {
  if (o.nodes < 1)
    return failure{"--nodes", "must be at least 1"};
  if (o.nodes > max_nodes)
    return failure{"--nodes", "must be at most " + std::to_string(max_nodes)};
  if (o.days < 1)
    return failure{"--days", "must be at least 1"};
  if (o.days > max_days)
    return failure{"--days", "must be at most " + std::to_string(max_days)};
  const auto& m = o.model;
  const std::initializer_list<std::pair<const char*, double>> rates = {
    {"interruptions_per_1000_node_days", m.interruptions_per_1000_node_days},
    {"faulty_gpu_percent", m.faulty_gpu_percent},
    {"hbm_percent", m.hbm_percent},
    {"software_percent", m.software_percent},
    {"network_percent", m.network_percent},
    {"host_maintenance_percent", m.host_maintenance_percent},
    {"sram_percent", m.sram_percent},
    {"gsp_percent", m.gsp_percent},
    {"nic_percent", m.nic_percent},
    {"other_host_percent", m.other_host_percent},
    {"app_xids_per_1000_node_days", m.app_xids_per_1000_node_days},
    {"nic_flaps_per_1000_node_days", m.nic_flaps_per_1000_node_days}};
  for (const auto& [field, value] : rates)
    if (!(value >= 0) || !std::isfinite(value))
      return failure{std::string("model.") + field, "must be a number >= 0"};
  double percent = 0;
  for (double w : category_weights(m))
    percent += w;
  if (m.interruptions_per_1000_node_days > 0 && !(percent > 0))
    return failure{"model.faulty_gpu_percent", "the category percentages are all 0"};
  const std::initializer_list<std::pair<const char*, double>> fractions = {
    {"whole_node_job_fraction", m.whole_node_job_fraction},
    {"sram_uncontained_fraction", m.sram_uncontained_fraction},
    {"network_switch_fraction", m.network_switch_fraction},
    {"cable_flapping_fraction", m.cable_flapping_fraction},
    {"other_host_silent_fraction", m.other_host_silent_fraction},
    {"validation_detects", m.validation_detects}};
  for (const auto& [field, value] : fractions)
    if (!(value >= 0 && value <= 1))
      return failure{std::string("model.") + field, "must be between 0 and 1"};
  for (auto s :
       {check_fix("faulty_gpu_fix", m.faulty_gpu_fix), check_fix("hbm_fix", m.hbm_fix),
        check_fix("sram_fix", m.sram_fix), check_fix("gsp_fix", m.gsp_fix),
        check_fix("host_maintenance_fix", m.host_maintenance_fix),
        check_fix("other_host_fix", m.other_host_fix),
        check_range("reset_max", m.reset_min, m.reset_max),
        check_range("reboot_max", m.reboot_min, m.reboot_max),
        check_range("flap_down_max", m.flap_down_min, m.flap_down_max),
        check_range("cable_flap_gap_max", m.cable_flap_gap_min, m.cable_flap_gap_max)})
    if (!s)
      return s;
  const std::initializer_list<std::pair<const char*, std::chrono::seconds>> positive = {
    {"drain_single_gpu_pod", m.drain_single_gpu_pod},
    {"drain_whole_node", m.drain_whole_node},
    {"replace", m.replace},
    {"support_turnaround", m.support_turnaround},
    {"validation", m.validation},
    {"recurrence_min", m.recurrence_min},
    {"found_otherwise_after", m.found_otherwise_after},
    {"switch_repair_mean", m.switch_repair_mean},
    {"agent_start", m.agent_start},
    {"breaker_operator_reset", m.breaker_operator_reset}};
  for (const auto& [field, value] : positive)
    if (value.count() <= 0)
      return failure{std::string("model.") + field, "must be at least 1 second"};
  if (m.recurrence_mean_extra.count() < 0)
    return failure{"model.recurrence_mean_extra", "must not be negative"};
  if (m.switch_down_spread.count() < 0)
    return failure{"model.switch_down_spread", "must not be negative"};
  if (m.flap_down_min.count() + m.cable_flap_gap_min.count() <= 0)
    return failure{"model.cable_flap_gap_min",
                   "a bad cable's flaps need time between them"};
  if (m.nodes_per_leaf < 1)
    return failure{"model.nodes_per_leaf", "must be at least 1"};
  if (m.baseline_max_reboots < 0)
    return failure{"model.baseline_max_reboots", "must be at least 0"};
  for (int code : model_xids)
    if (catalog.find(code) == nullptr)
      return failure{"xid_catalog.csv", "has no XID " + std::to_string(code)};
  return ok();
}

} // namespace fleet_sim

expected<fleet_model> read_fleet_model(const std::string& yaml_text, fleet_model base) {
  auto& m = base;
  const std::map<std::string, double*> numbers = {
    {"interruptions_per_1000_node_days", &m.interruptions_per_1000_node_days},
    {"faulty_gpu_percent", &m.faulty_gpu_percent},
    {"hbm_percent", &m.hbm_percent},
    {"software_percent", &m.software_percent},
    {"network_percent", &m.network_percent},
    {"host_maintenance_percent", &m.host_maintenance_percent},
    {"sram_percent", &m.sram_percent},
    {"gsp_percent", &m.gsp_percent},
    {"nic_percent", &m.nic_percent},
    {"other_host_percent", &m.other_host_percent},
    {"app_xids_per_1000_node_days", &m.app_xids_per_1000_node_days},
    {"nic_flaps_per_1000_node_days", &m.nic_flaps_per_1000_node_days},
    {"whole_node_job_fraction", &m.whole_node_job_fraction},
    {"sram_uncontained_fraction", &m.sram_uncontained_fraction},
    {"network_switch_fraction", &m.network_switch_fraction},
    {"cable_flapping_fraction", &m.cable_flapping_fraction},
    {"other_host_silent_fraction", &m.other_host_silent_fraction},
    {"validation_detects", &m.validation_detects}};
  const std::map<std::string, int*> integers = {
    {"nodes_per_leaf", &m.nodes_per_leaf},
    {"baseline_max_reboots", &m.baseline_max_reboots}};
  const std::map<std::string, std::chrono::seconds*> durations = {
    {"drain_single_gpu_pod", &m.drain_single_gpu_pod},
    {"drain_whole_node", &m.drain_whole_node},
    {"reset_min", &m.reset_min},
    {"reset_max", &m.reset_max},
    {"reboot_min", &m.reboot_min},
    {"reboot_max", &m.reboot_max},
    {"replace", &m.replace},
    {"support_turnaround", &m.support_turnaround},
    {"validation", &m.validation},
    {"recurrence_min", &m.recurrence_min},
    {"recurrence_mean_extra", &m.recurrence_mean_extra},
    {"found_otherwise_after", &m.found_otherwise_after},
    {"switch_repair_mean", &m.switch_repair_mean},
    {"switch_down_spread", &m.switch_down_spread},
    {"flap_down_min", &m.flap_down_min},
    {"flap_down_max", &m.flap_down_max},
    {"cable_flap_gap_min", &m.cable_flap_gap_min},
    {"cable_flap_gap_max", &m.cable_flap_gap_max},
    {"agent_start", &m.agent_start},
    {"breaker_operator_reset", &m.breaker_operator_reset},
    {"baseline_reboot_window", &m.baseline_reboot_window}};
  const std::map<std::string, fix_odds*> fixes = {
    {"faulty_gpu_fix", &m.faulty_gpu_fix},
    {"hbm_fix", &m.hbm_fix},
    {"sram_fix", &m.sram_fix},
    {"gsp_fix", &m.gsp_fix},
    {"host_maintenance_fix", &m.host_maintenance_fix},
    {"other_host_fix", &m.other_host_fix}};
  const std::map<std::string, bool*> flags = {
    {"nvswitch_fabric", &m.nvswitch_fabric},
    {"link_downed_counter_events", &m.link_downed_counter_events}};
  try {
    const auto root = YAML::Load(yaml_text);
    if (root.IsNull())
      return base;
    if (!root.IsMap())
      return failure{"model", "expected a mapping of fleet_model fields"};
    for (const auto& item : root) {
      if (!item.first.IsScalar())
        return failure{"model", "keys must be field names"};
      const auto key = item.first.Scalar();
      const auto where = "model." + key;
      const auto& value = item.second;
      auto number = [&](double& out) -> status {
        if (!value.IsScalar() || !YAML::convert<double>::decode(value, out))
          return failure{where, "expected a number"};
        return ok();
      };
      if (auto n = numbers.find(key); n != numbers.end()) {
        if (auto st = number(*n->second); !st)
          return st.error();
      } else if (auto i = integers.find(key); i != integers.end()) {
        if (!value.IsScalar() || !YAML::convert<int>::decode(value, *i->second))
          return failure{where, "expected a whole number"};
      } else if (auto d = durations.find(key); d != durations.end()) {
        long long seconds = 0;
        if (!value.IsScalar() || !YAML::convert<long long>::decode(value, seconds))
          return failure{where, "expected whole seconds"};
        *d->second = std::chrono::seconds{seconds};
      } else if (auto f = fixes.find(key); f != fixes.end()) {
        if (!value.IsMap())
          return failure{where, "expected {reset: R, reboot: B, replace: P}"};
        fix_odds odds;
        for (const auto& share : value) {
          const auto name = share.first.IsScalar() ? share.first.Scalar() : "";
          double* slot = name == "reset"     ? &odds.reset
                         : name == "reboot"  ? &odds.reboot
                         : name == "replace" ? &odds.replace
                                             : nullptr;
          double parsed = 0;
          if (slot == nullptr)
            return failure{where,
                           "unknown share '" + name + "' (reset, reboot, replace)"};
          if (!share.second.IsScalar()
              || !YAML::convert<double>::decode(share.second, parsed))
            return failure{where + "." + name, "expected a number"};
          *slot = parsed;
        }
        *f->second = odds;
      } else if (auto b = flags.find(key); b != flags.end()) {
        if (!value.IsScalar() || !YAML::convert<bool>::decode(value, *b->second))
          return failure{where, "expected true or false"};
      } else if (key == "gpu_product") {
        if (!value.IsScalar())
          return failure{where, "expected a string"};
        m.gpu_product = value.Scalar();
      } else {
        return failure{where, "unknown field"};
      }
    }
  } catch (const YAML::Exception& e) {
    return failure{"model", std::string("is not valid YAML: ") + e.what()};
  }
  return base;
}

} // namespace vigil::demo
