#include "runtime/replay/replay_analysis.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <set>

#include "actors/control/drain/drain_resource.hpp"
#include "actors/control/node/node_actor.hpp"
#include "actors/control/remediation/remediation_machine.hpp"
#include "actors/control/remediation/remediation_resource.hpp"
#include "actors/control/rules/drain_plan.hpp"
#include "messages/json_path.hpp"
#include "runtime/journal/fleet_view.hpp"

namespace vigil {

namespace {

using json = nlohmann::json;

json body_of(const journal_record& row) {
  auto body = json::parse(row.body, nullptr, false);
  return body.is_discarded() ? json(row.body) : body;
}

// The per-node rules of one policy, as a node actor holds them.
struct node_replay {
  explicit node_replay(const control::correlation_config& config) : correlator(config) {}
  control::node_correlator correlator;
  control::active_events active;
};

// What vigil control's remediation machine would carry out for the records,
// the node quarantined and drained as they want, answered on paper: no CR
// exists yet and the breaker grants. The journal holds no node labels: the
// GPUs are taken to be H100s. Escalation history is not replayed.
std::string remediation_of(const std::string& node,
                           const std::vector<control::active_record>& records,
                           const decision_policy& policy) {
  namespace cmd = control::remediation_command;
  control::remediation_config config;
  config.options = policy.remediation;
  control::remediation_machine machine(node, config);
  control::remediation_view view;
  view.records = records;
  view.quarantined = true;
  view.facts.product_name = "NVIDIA-H100-80GB-HBM3";
  if (auto drain = control::desired_drain(records)) {
    view.drained_key = control::drain_key(*drain);
    view.drained = view.drained_key == "full" ? control::drain_history::full_done
                                              : control::drain_history::partial_done;
  }
  const wall_time now{};
  std::vector<std::string> steps;
  std::deque<control::remediation_commands> pending{machine.consider(view, now)};
  for (; !pending.empty(); pending.pop_front())
    for (const auto& command : pending.front()) {
      if (auto* c = std::get_if<cmd::find_cr>(&command))
        pending.push_back(machine.on_cr_absent(c->generation, view, now));
      else if (auto* c = std::get_if<cmd::ask_breaker>(&command))
        pending.push_back(machine.on_breaker_answer(c->generation, "", view, now));
      else if (auto* c = std::get_if<cmd::create_cr>(&command))
        steps.emplace_back(control::to_string(c->request.plan.kind));
      else if (std::holds_alternative<cmd::hand_to_operator>(command))
        steps.emplace_back("Manual");
      else if (std::holds_alternative<cmd::drain_fully>(command)) {
        steps.emplace_back("full drain");
        view.drained = control::drain_history::full_done;
        view.drained_key = "full";
        pending.push_back(machine.consider(view, now));
      }
    }
  for (const auto& waiting : machine.queue().waiting())
    steps.emplace_back(std::string(control::to_string(waiting.plan.kind)) + " (queued)");
  if (steps.empty())
    return "None";
  std::string out;
  for (const auto& step : steps)
    out += (out.empty() ? "" : " then ") + step;
  return out;
}

std::string decide(node_replay& node, health_event e, const decision_policy& policy,
                   std::string notes) {
  const auto out = node.correlator.observe(e, e.generated.value_or(wall_time{}));
  if (out.repeat)
    return notes + "repeat: counted once";
  for (const auto& due : out.due) { // a drop whose deadline passed before this event
    node.active.apply(due, policy.quarantine);
    notes += "nic-drop fired before it (" + due.check_name + " "
             + std::string(to_string(due.action)) + "), ";
  }
  if (out.escalate) {
    e.action = *out.escalate;
    notes +=
      "escalated to " + std::string(to_string(*out.escalate)) + " (" + out.rule + "), ";
  } else if (!out.rule.empty() && !out.derived.empty()) {
    notes += out.rule + " fired (" + out.derived.front().check_name + " "
             + std::string(to_string(out.derived.front().action)) + "), ";
  }
  const auto applied = node.active.apply(e, policy.quarantine);
  bool derived_acts = false;
  for (const auto& derived : out.derived) {
    const bool tracked = node.active.apply(derived, policy.quarantine).ignored.empty();
    derived_acts = derived_acts || (tracked && !derived.is_healthy);
  }
  if (e.is_healthy)
    return notes
           + (node.active.empty()
                ? std::string("healthy: the node is released")
                : "healthy: " + std::to_string(node.active.size()) + " still active");
  // A derived record (a flap verdict) acts even where its event does not.
  if (!applied.ignored.empty() && !derived_acts)
    return notes + "not acted on: " + applied.ignored;
  const auto records = node.active.records();
  const auto drain = control::desired_drain(records);
  const auto remediation = remediation_of(e.node_name, records, policy);
  const auto why = applied.ignored.empty() ? "rule " + applied.rule
                                           : "its " + out.derived.front().check_name;
  return notes + "quarantine (" + why + "), "
         + (drain ? "drain " + control::drain_key(*drain) : std::string("no drain"))
         + ", " + remediation;
}

// When each node joined a fabric incident, from the journal's port-downs in
// order (the fleet's fabric rule).
std::map<std::string, std::vector<wall_time>>
fabric_joins(const std::vector<journal_record>& rows,
             const control::correlation_config& config) {
  control::fabric_correlator fabric(config);
  std::map<std::string, std::vector<wall_time>> joins;
  std::map<wall_time, std::set<std::string>> members; // by incident
  for (const auto& row : rows) {
    if (row.kind != "event")
      continue;
    auto event = decode_health_event(row.body);
    if (!event || !control::is_nic_port_down(*event))
      continue;
    if (auto incident = fabric.on_port_down(event->node_name, row.recorded_at))
      for (const auto& node : incident->nodes)
        if (members[incident->opened].insert(node).second)
          joins[node].push_back(row.recorded_at);
  }
  return joins;
}

// A link-down report the fleet would not let act: its node joined an
// incident within the fabric window before it, or within the hold after it.
bool claimed_by_fabric(const std::vector<wall_time>& joins, wall_time at,
                       const control::correlation_config& config) {
  for (auto joined : joins)
    if (joined + config.fabric_window >= at && joined <= at + config.fabric_hold)
      return true;
  return false;
}

} // namespace

json fleet_at(const std::vector<journal_record>& rows, wall_time at) {
  fleet_view view;
  std::map<std::string, json> nodes;
  json incidents = json::array();
  for (const auto& row : rows) {
    view.apply(row); // an undecodable row is shown in the timeline as such
    if (row.node.empty()) {
      if (row.kind == fabric_row)
        incidents.push_back(body_of(row));
      continue;
    }
    auto& node = nodes[row.node];
    if (node.is_null())
      node = {{"name", row.node}, {"timeline", json::array()}};
    if (row.kind == quarantine_row || row.kind == control::drain_row
        || row.kind == control::remediation_row)
      node[row.kind] = body_of(row);
    std::string problem;
    node["timeline"].push_back("#" + std::to_string(row.seq) + "  "
                               + format_rfc3339(row.recorded_at) + "  " + row.kind + "  "
                               + summarise_row(row, problem));
  }
  json out = {
    {"at", format_rfc3339(at)}, {"nodes", json::array()}, {"fabricIncidents", incidents}};
  for (auto& [name, node] : nodes) {
    json active = json::array();
    for (const auto& e : view.active(name))
      active.push_back({{"agent", e.agent},
                        {"checkName", e.check_name},
                        {"entityType", e.subject.type},
                        {"entityValue", e.subject.value},
                        {"errorCode", e.error_code},
                        {"recommendedAction", std::string(to_string(e.action))},
                        {"seq", e.seq}});
    node["activeEvents"] = active;
    out["nodes"].push_back(node);
  }
  return out;
}

std::vector<event_decision> decide_events(const std::vector<journal_record>& rows,
                                          const decision_policy& policy) {
  std::vector<event_decision> out;
  std::map<std::string, node_replay> nodes;
  const auto joins = fabric_joins(rows, policy.correlation);
  for (const auto& row : rows) {
    if (row.kind != "event")
      continue;
    auto event = decode_health_event(row.body);
    if (!event)
      continue;
    std::string problem;
    event_decision d{row.seq, event->node_name, summarise_row(row, problem), ""};
    std::string notes;
    if (auto joined = joins.find(event->node_name);
        joined != joins.end() && control::reports_link_down(*event)
        && claimed_by_fabric(joined->second, row.recorded_at, policy.correlation)) {
      event->strategy = processing_strategy::store_and_analyse;
      notes = "fabric incident, ";
    }
    if (!event->generated)
      event->generated = row.recorded_at;
    auto& node = nodes.try_emplace(event->node_name, policy.correlation).first->second;
    d.decision = decide(node, *event, policy, notes);
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<decision_difference> compare_policies(const std::vector<journal_record>& rows,
                                                  const decision_policy& now,
                                                  const decision_policy& what_if) {
  const auto a = decide_events(rows, now);
  const auto b = decide_events(rows, what_if);
  std::vector<decision_difference> out;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (a[i].decision != b[i].decision)
      out.push_back({a[i].seq, a[i].node, a[i].event, a[i].decision, b[i].decision});
  return out;
}

std::vector<namespace_loss> losses_by_namespace(const std::vector<journal_record>& rows,
                                                wall_time end) {
  struct held_since {
    std::size_t gpus = 0;
    wall_time since{};
  };
  // node → "ns/pod" → its GPUs and when its node's fault began
  std::map<std::string, std::map<std::pair<std::string, std::string>, held_since>> open;
  std::map<std::string, namespace_loss> by_ns;
  std::set<std::pair<std::string, std::string>> pods_hit;
  const auto close = [&](const std::pair<std::string, std::string>& pod,
                         const held_since& held, wall_time at) {
    const auto seconds =
      std::chrono::duration_cast<std::chrono::duration<double>>(at - held.since).count();
    by_ns[pod.first].gpu_hours +=
      static_cast<double>(held.gpus) * std::max(0.0, seconds) / 3600.0;
  };
  for (const auto& row : rows) {
    if (row.kind == gpu_holders_row) {
      auto body = nlohmann::json::parse(row.body, nullptr, false);
      const auto* holders = body.is_object() ? json_at(body, {"holders"}) : nullptr;
      if (holders == nullptr || !holders->is_array())
        continue;
      std::set<std::string> namespaces;
      for (const auto& h : *holders) {
        const auto* gpus = json_at(h, {"gpus"});
        std::pair<std::string, std::string> pod{json_text(h, {"namespace"}),
                                                json_text(h, {"pod"})};
        if (pod.first.empty())
          continue;
        namespaces.insert(pod.first);
        pods_hit.insert(pod);
        open[row.node].emplace(
          pod, held_since{gpus != nullptr && gpus->is_array() ? gpus->size() : 0,
                          row.recorded_at});
      }
      for (const auto& ns : namespaces)
        ++by_ns[ns].faults;
    } else if (row.kind == quarantine_row) {
      auto body = nlohmann::json::parse(row.body, nullptr, false);
      if (!body.is_object() || !body.value("uncordon", false))
        continue;
      for (const auto& [pod, held] : open[row.node])
        close(pod, held, row.recorded_at);
      open.erase(row.node);
    }
  }
  for (const auto& [node, pods] : open)
    for (const auto& [pod, held] : pods) {
      close(pod, held, end);
      ++by_ns[pod.first].open;
    }
  for (const auto& pod : pods_hit)
    ++by_ns[pod.first].pods;
  std::vector<namespace_loss> out;
  for (auto& [ns, loss] : by_ns) {
    loss.ns = ns;
    out.push_back(loss);
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.gpu_hours > b.gpu_hours;
  });
  return out;
}

} // namespace vigil
