#include "actors/control/rules/quarantine_rules.hpp"

#include <algorithm>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

namespace vigil::control {

namespace {

template <class T>
bool contains(const std::vector<T>& list, const T& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

// An empty filter matches anything; otherwise the value must be listed.
template <class T>
bool filter_accepts(const std::vector<T>& filter, const T& value) {
  return filter.empty() || contains(filter, value);
}

template <class T, class U>
bool filter_accepts_any(const std::vector<T>& filter, const std::vector<U>& values) {
  if (filter.empty())
    return true;
  return std::any_of(values.begin(), values.end(),
                     [&](const U& v) { return contains(filter, v); });
}

std::vector<std::string> entity_types_of(const health_event& e) {
  std::vector<std::string> out;
  for (const auto& ent : e.entities)
    out.push_back(ent.type);
  return out;
}

bool matches(const rule_match& m, const health_event& e) {
  return filter_accepts(m.agents, e.agent)
         && filter_accepts(m.component_classes, e.component_class)
         && filter_accepts(m.check_names, e.check_name)
         && (!m.is_fatal || *m.is_fatal == e.is_fatal)
         && filter_accepts_any(m.error_codes, e.error_codes)
         && filter_accepts(m.actions, e.action)
         && filter_accepts_any(m.entity_types, entity_types_of(e));
}

// One record per agent, check, entity and (first) error code, as fleet_view
// keys them: two XIDs on one GPU are two records, and a cancellation of one
// leaves the other.
std::string record_key(const std::string& agent, const std::string& check,
                       const entity& e, const std::vector<std::string>& codes) {
  return agent + "|" + check + "|" + e.type + "|" + e.value + "|"
         + (codes.empty() ? std::string() : codes.front());
}

const quarantine_rule* find_rule(const std::vector<quarantine_rule>& rules,
                                 const std::string& name) {
  for (const auto& r : rules)
    if (r.name == name)
      return &r;
  return nullptr;
}

std::string condition_type_for(const active_record& rec, const quarantine_rule* rule,
                               const quarantine_policy& policy) {
  if (rule != nullptr && !rule->condition_type.empty())
    return rule->condition_type;
  auto i = policy.condition_types.find(rec.component_class);
  return i != policy.condition_types.end() ? i->second : rec.component_class + "Healthy";
}

std::string describe(const active_record& rec) {
  std::string out = rec.check_name;
  for (const auto& code : rec.error_codes)
    out += (&code == &rec.error_codes.front() ? " code " : ",") + code;
  if (!rec.subject.type.empty())
    out += " on " + rec.subject.type + " " + rec.subject.value;
  return out;
}

// The conditions `active` asks for, plus a healthy one for every managed type
// that is on the node but has no active event any more.
std::map<std::string, node_condition>
desired_conditions(const node_observation& observed,
                   const std::vector<active_record>& active,
                   const quarantine_policy& policy) {
  std::map<std::string, node_condition> out;
  for (const auto& rec : active) {
    auto type = condition_type_for(rec, find_rule(policy.rules, rec.rule), policy);
    auto& c = out[type];
    c.type = type;
    c.healthy = false;
    c.reason = "VigilDetectedFault";
    c.message += (c.message.empty() ? "" : "; ") + describe(rec);
  }
  for (const auto& [type, current] : observed.conditions)
    if (out.count(type) == 0)
      out[type] = node_condition{type, true, "NoActiveFaults", ""};
  return out;
}

std::set<taint> desired_taints(const std::vector<active_record>& active,
                               const quarantine_policy& policy, bool& cordon) {
  std::set<taint> out;
  cordon = false;
  for (const auto& rec : active) {
    const auto* rule = find_rule(policy.rules, rec.rule);
    // A record whose rule left the config still quarantines: cordon only.
    cordon = cordon || rule == nullptr || rule->cordon;
    if (rule != nullptr)
      out.insert(rule->taints.begin(), rule->taints.end());
  }
  return out;
}

void plan_cordon(const node_observation& observed, bool want, bool allowed,
                 quarantine_decision& d) {
  if (want) {
    // seed: a node someone else cordoned stays theirs; vigil does not claim it.
    if (!observed.unschedulable && allowed)
      d.cordon = true;
    d.held_by_breaker = d.held_by_breaker || (!observed.unschedulable && !allowed);
    d.cordon_owned_after = d.cordon || (observed.cordon_owned && observed.unschedulable);
    return;
  }
  d.uncordon = observed.cordon_owned && observed.unschedulable;
  d.cordon_owned_after = false;
}

void plan_taints(const node_observation& observed, const std::set<taint>& want,
                 bool allowed, quarantine_decision& d) {
  const std::set<taint> present(observed.taints.begin(), observed.taints.end());
  const std::set<taint> owned(observed.owned_taints.begin(), observed.owned_taints.end());
  for (const auto& t : want) {
    if (present.count(t) != 0) {
      if (owned.count(t) != 0)
        d.owned_taints_after.push_back(t);
    } else if (allowed || t.effect == taint_effect::prefer_no_schedule) {
      d.add_taints.push_back(t);
      d.owned_taints_after.push_back(t);
    } else {
      d.held_by_breaker = true;
    }
  }
  for (const auto& t : owned)
    if (want.count(t) == 0 && present.count(t) != 0)
      d.remove_taints.push_back(t);
  std::sort(d.owned_taints_after.begin(), d.owned_taints_after.end());
}

} // namespace

std::string_view to_string(taint_effect effect) {
  switch (effect) {
    case taint_effect::no_schedule: return "NoSchedule";
    case taint_effect::prefer_no_schedule: return "PreferNoSchedule";
    case taint_effect::no_execute: return "NoExecute";
  }
  return "NoSchedule";
}

std::optional<taint_effect> parse_taint_effect(std::string_view text) {
  for (auto e : {taint_effect::no_schedule, taint_effect::prefer_no_schedule,
                 taint_effect::no_execute})
    if (to_string(e) == text)
      return e;
  return std::nullopt;
}

bool operator<(const taint& a, const taint& b) {
  return std::tie(a.key, a.value, a.effect) < std::tie(b.key, b.value, b.effect);
}

const quarantine_rule* match_rule(const health_event& event,
                                  const std::vector<quarantine_rule>& rules) {
  for (const auto& rule : rules)
    if (matches(rule.match, event))
      return &rule;
  return nullptr;
}

apply_outcome active_events::apply(const health_event& event,
                                   const quarantine_policy& policy) {
  apply_outcome out;
  if (event.strategy == processing_strategy::store_only) {
    out.ignored = "processingStrategy storeOnly";
    return out;
  }
  if (event.is_healthy) {
    out.changed = clear(event, policy);
    return out;
  }
  if (event.strategy != processing_strategy::execute_remediation) {
    out.ignored = "processingStrategy storeAndAnalyse";
    return out;
  }
  const auto& qo = event.quarantine_overrides;
  if (qo && qo->skip) {
    out.ignored = "quarantineOverrides.skip";
    return out;
  }
  const auto* rule = match_rule(event, policy.rules);
  if (rule == nullptr && !(qo && qo->force)) {
    out.ignored = "no quarantine rule matches";
    return out;
  }
  out.rule = rule != nullptr ? rule->name : forced_rule_name;
  add(event, out.rule);
  out.changed = true;
  return out;
}

void active_events::add(const health_event& e, const std::string& rule) {
  auto subjects = e.entities.empty() ? std::vector<entity>{{}} : e.entities;
  for (const auto& subject : subjects) {
    active_record rec{e.agent,       e.component_class, e.check_name,   subject, {},
                      e.error_codes, e.message,         e.action,       rule,    e.id,
                      e.generated,   e.drain_overrides, e.custom_action};
    for (const auto& other : e.entities)
      if (!(other == subject))
        rec.reported_with.push_back(other);
    records_[record_key(e.agent, e.check_name, subject, e.error_codes)] = std::move(rec);
  }
}

bool active_events::clear(const health_event& e, const quarantine_policy& policy) {
  // seed 000 §2.2: the entities named (every entity of the check when none
  // is), narrowed to the codes named when there are any.
  auto removed = remove_if([&](const active_record& r) {
    return healthy_event_clears(e, r.agent, r.check_name, r.subject, r.error_codes);
  });
  if (e.entities.empty())
    return removed > 0;
  // seed 000 §1.2: a healthy event naming only the GPU UUID also clears the
  // PCI address reported with that GPU, which has no record of its own left.
  removed += remove_if([&](const active_record& r) {
    if (!contains(policy.alias_entity_types, r.subject.type))
      return false;
    return std::any_of(
      r.reported_with.begin(), r.reported_with.end(), [&](const entity& other) {
        return !contains(policy.alias_entity_types, other.type)
               && healthy_event_clears(e, r.agent, r.check_name, other, r.error_codes);
      });
  });
  return removed > 0;
}

std::vector<active_record> active_events::records() const {
  std::vector<active_record> out;
  for (const auto& [key, rec] : records_)
    out.push_back(rec);
  return out;
}

bool quarantine_decision::no_change(const node_observation& observed) const {
  auto owned = observed.owned_taints;
  std::sort(owned.begin(), owned.end());
  return !cordon && !uncordon && add_taints.empty() && remove_taints.empty()
         && set_conditions.empty() && !annotation
         && cordon_owned_after == observed.cordon_owned && owned_taints_after == owned;
}

namespace {

// The fabric condition while some of the node's ports are down inside an
// incident; back to healthy (only when it was ever set) once they are up.
void fabric_condition(const std::set<std::string>& ports,
                      std::map<std::string, node_condition>& conditions) {
  if (!ports.empty()) {
    std::string list;
    for (const auto& p : ports)
      list += (list.empty() ? "" : ", ") + p;
    conditions[fabric_condition_type] = node_condition{
      fabric_condition_type, false, "FabricIncident",
      "NIC ports down inside a fabric incident (" + list
        + "); not the node's fault: no cordon, drain or remediation until they are up"};
  } else if (auto c = conditions.find(fabric_condition_type); c != conditions.end()) {
    c->second = node_condition{fabric_condition_type, true, "PortsUp", ""};
  }
}

} // namespace

bool starts_quarantine(const quarantine_decision& d) {
  return d.cordon
         || std::any_of(d.add_taints.begin(), d.add_taints.end(), [](const taint& t) {
              return t.effect != taint_effect::prefer_no_schedule;
            });
}

quarantine_decision decide_quarantine(const node_observation& observed,
                                      const active_events& active,
                                      const quarantine_policy& policy,
                                      const quarantine_context& context) {
  quarantine_decision d;
  const auto records = active.records();
  bool want_cordon = false;
  auto want_taints = desired_taints(records, policy, want_cordon);
  // Held: keeps the cordon vigil has, never makes a new one.
  const bool held =
    context.remediation_holds && observed.cordon_owned && observed.unschedulable;
  want_cordon = want_cordon || held;
  d.quarantined = !records.empty() || held;
  auto label = observed.labels.find(policy.opt_out_label);
  d.opted_out = label != observed.labels.end() && label->second == "true";
  if (d.opted_out) {
    want_cordon = false;
    want_taints.clear();
  } else if (!context.fabric_ports.empty()) {
    want_taints.insert({fabric_taint_key, "true", taint_effect::prefer_no_schedule});
  }
  plan_cordon(observed, want_cordon, context.new_quarantine_allowed, d);
  plan_taints(observed, want_taints, context.new_quarantine_allowed, d);
  auto conditions = desired_conditions(observed, records, policy);
  if (context.agent_silent_since)
    conditions[agent_condition_type] =
      node_condition{agent_condition_type, false, "AgentSilent",
                     "no heartbeat or event from vigil's agent since "
                       + format_rfc3339(*context.agent_silent_since)};
  else if (auto c = conditions.find(agent_condition_type); c != conditions.end())
    c->second = node_condition{agent_condition_type, true, "AgentReporting", ""};
  fabric_condition(context.fabric_ports, conditions);
  for (const auto& [type, c] : conditions) {
    auto i = observed.conditions.find(type);
    if (i == observed.conditions.end() || !(i->second == c))
      d.set_conditions.push_back(c);
  }
  auto annotation = encode_quarantine_annotation(records);
  if (annotation != observed.annotation)
    d.annotation = std::move(annotation);
  return d;
}

std::string encode_quarantine_annotation(const std::vector<active_record>& records) {
  if (records.empty())
    return {};
  auto list = nlohmann::json::array();
  for (const auto& r : records)
    list.push_back({{"agent", r.agent},
                    {"componentClass", r.component_class},
                    {"checkName", r.check_name},
                    {"entityType", r.subject.type},
                    {"entityValue", r.subject.value},
                    {"errorCodes", r.error_codes},
                    {"recommendedAction", std::string(to_string(r.action))},
                    {"rule", r.rule}});
  return list.dump();
}

std::string gpu_uuid_of(const active_record& r) {
  if (r.subject.type == "GPU_UUID")
    return r.subject.value;
  for (const auto& e : r.reported_with)
    if (e.type == "GPU_UUID")
      return e.value;
  return {};
}

} // namespace vigil::control
