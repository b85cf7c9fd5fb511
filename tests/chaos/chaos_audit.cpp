#include "tests/chaos/chaos_audit.hpp"

#include <algorithm>
#include <deque>

#include <nlohmann/json.hpp>

namespace vigil::chaos {

namespace {

using json = nlohmann::json;

const json* items_of(const kube::store_result& listed) {
  if (!listed.ok() || !listed.value->contains("items"))
    return nullptr;
  return &(*listed.value)["items"];
}

std::string text_at(const json& object, std::initializer_list<const char*> path) {
  const json* at = &object;
  for (const char* key : path) {
    if (!at->is_object() || !at->contains(key))
      return "";
    at = &(*at)[key];
  }
  return at->is_string() ? at->get<std::string>() : "";
}

} // namespace

void api_auditor::poll(const kube::object_store& store, double now) {
  // CRs first: an uncordon is judged against the CRs of the same poll.
  std::map<std::string, std::vector<std::string>> running; // node → kind/name
  for (const char* plural : {"gpuresets", "rebootnodes", "terminatenodes"}) {
    const auto* type = store.find_type("vigil.dev", "v1alpha1", plural);
    if (type == nullptr)
      continue;
    const auto listed = store.list(*type, "", {});
    const json* items = items_of(listed);
    if (items == nullptr)
      continue;
    for (const auto& cr : *items) {
      const auto key = std::string(plural) + "/" + text_at(cr, {"metadata", "name"});
      auto [it, first] = crs_.emplace(key, cr_sighting{});
      if (first) {
        it->second.kind = plural;
        it->second.node = text_at(cr, {"metadata", "labels", "vigil.dev/node"});
        it->second.group =
          text_at(cr, {"metadata", "annotations", "vigil.dev/equivalence-group"});
        it->second.first_seen = now;
      }
      const auto phase = text_at(cr, {"status", "phase"});
      if (it->second.finished < 0 && (phase == "Succeeded" || phase == "Failed"))
        it->second.finished = now;
      if (it->second.finished < 0)
        running[it->second.node].push_back(key);
    }
  }
  if (const auto* nodes = store.find_type("", "v1", "nodes")) {
    const auto listed = store.list(*nodes, "", {});
    if (const json* items = items_of(listed))
      for (const auto& node : *items) {
        const auto name = text_at(node, {"metadata", "name"});
        const bool cordoned =
          node.value("spec", json::object()).value("unschedulable", false);
        auto [it, first] = cordoned_.emplace(name, cordoned);
        if (!first && cordoned && !it->second)
          ++cordons_[name];
        if (first && cordoned)
          ++cordons_[name];
        if (!first && !cordoned && it->second && running.count(name) > 0) {
          auto& during = uncordoned_during_cr_[name];
          during.insert(during.end(), running[name].begin(), running[name].end());
        }
        it->second = cordoned;
      }
  }
}

chaos_verdict judge(const std::vector<journal_record>& journal,
                    const std::set<std::string>& acknowledged, const api_auditor& audit,
                    const breaker_limits& breaker) {
  chaos_verdict v;
  v.journal_rows = journal.size();
  v.acknowledged = acknowledged.size();
  std::set<std::string> stored;
  std::map<std::string, int> cordon_decisions;
  std::map<std::string, std::string> last_remediation_phase;
  std::vector<std::pair<double, std::string>> admitted; // (when, node) of admissions
  for (const auto& row : journal) {
    if (row.kind == "event") {
      stored.insert(row.idempotency_key);
      continue;
    }
    const auto body = json::parse(row.body, nullptr, false);
    if (!body.is_object())
      continue;
    if (row.kind == "quarantine") {
      if (body.value("cordon", false))
        ++cordon_decisions[row.node];
      if (body.value("startsQuarantine", false))
        admitted.emplace_back(
          std::chrono::duration<double>(row.recorded_at.time_since_epoch()).count(),
          row.node);
    } else if (row.kind == "remediation") {
      last_remediation_phase[row.node] = body.value("phase", "");
    }
  }
  for (const auto& id : acknowledged)
    if (stored.count(id) == 0) {
      ++v.lost;
      v.findings.push_back("lost: event " + id);
    }

  // Two CRs of one equivalence group on one node at once: one fault, two repairs.
  std::map<std::pair<std::string, std::string>, std::vector<const cr_sighting*>> by_group;
  for (const auto& [key, cr] : audit.crs())
    by_group[{cr.node, cr.group}].push_back(&cr);
  for (auto& [group, crs] : by_group) {
    std::sort(crs.begin(), crs.end(), [](const cr_sighting* a, const cr_sighting* b) {
      return a->first_seen < b->first_seen;
    });
    for (std::size_t i = 1; i < crs.size(); ++i)
      if (crs[i - 1]->finished < 0 || crs[i - 1]->finished > crs[i]->first_seen) {
        ++v.duplicate_crs;
        v.findings.push_back("duplicate CR: " + crs[i]->kind + " on " + group.first
                             + " for group " + group.second);
      }
  }
  for (const auto& [node, times] : audit.cordons())
    if (auto decided = cordon_decisions[node]; times > decided) {
      v.duplicate_cordons += static_cast<std::uint64_t>(times - decided);
      v.findings.push_back("duplicate cordon: " + node + " cordoned "
                           + std::to_string(times) + " times for "
                           + std::to_string(decided) + " decisions");
    }
  // An uncordon while the node's CR had not ended: the repair was still
  // running (or its outcome unknown) when the node went back into service.
  for (const auto& [node, crs] : audit.uncordoned_during_cr()) {
    v.uncordoned_during_cr += crs.size();
    for (const auto& key : crs)
      v.findings.push_back("uncordoned during a CR: " + node + " while " + key
                           + " had not ended");
  }
  for (const auto& [key, cr] : audit.crs())
    if (cr.finished < 0) {
      ++v.stuck_crs;
      v.findings.push_back("stuck CR: " + key + " on " + cr.node);
    }

  std::map<std::string, std::vector<cr_sighting>> crs_per_node;
  for (const auto& [key, cr] : audit.crs())
    crs_per_node[cr.node].push_back(cr);
  for (const auto& [node, cordoned] : audit.cordoned()) {
    const auto phase = last_remediation_phase[node];
    if (cordoned && phase != "manual") {
      ++v.stuck_nodes;
      v.findings.push_back("stuck node: " + node + " cordoned, last remediation step \""
                           + phase + "\"");
    }
    std::string state = cordoned ? "cordoned" : "schedulable";
    const auto& crs = crs_per_node[node];
    if (!crs.empty())
      state += " repaired:" + repaired(crs);
    std::map<std::string, int> by_kind;
    for (const auto& cr : crs)
      ++by_kind[cr.kind];
    std::string counts;
    for (const auto& [kind, count] : by_kind)
      counts += (counts.empty() ? "" : " ") + kind + "=" + std::to_string(count);
    v.cr_counts[node] = counts;
    // The order of a workflow's last rows (verified, validated) may differ
    // between runs; whether it ended with a person is what matters.
    if (phase == "manual")
      state += " waiting-for-a-person";
    v.final_state[node] = state;
  }

  // The breaker: the nodes newly quarantined in any window never exceed the
  // limit. A node counts once per window however many decisions it got.
  std::sort(admitted.begin(), admitted.end());
  std::deque<std::pair<double, std::string>> window;
  std::map<std::string, int> in_window;
  std::uint64_t worst = 0;
  for (const auto& [at, node] : admitted) {
    window.emplace_back(at, node);
    ++in_window[node];
    while (window.front().first <= at - breaker.window_seconds) {
      if (--in_window[window.front().second] == 0)
        in_window.erase(window.front().second);
      window.pop_front();
    }
    worst = std::max<std::uint64_t>(worst, in_window.size());
  }
  if (breaker.max_nodes > 0 && worst > breaker.max_nodes) {
    v.breaker_excess = worst - breaker.max_nodes;
    v.findings.push_back("breaker: " + std::to_string(worst)
                         + " nodes newly quarantined in "
                         + std::to_string(breaker.window_seconds) + " s, limit "
                         + std::to_string(breaker.max_nodes));
  }
  return v;
}

std::string repaired(const std::vector<cr_sighting>& crs) {
  // seed 003's ladder: a replacement covers a reboot, a reboot every reset.
  for (const char* node_level : {"terminatenodes", "rebootnodes"})
    for (const auto& cr : crs)
      if (cr.kind == node_level)
        return node_level;
  std::set<std::string> gpus;
  for (const auto& cr : crs)
    gpus.insert(cr.group.empty() ? cr.kind : cr.group);
  std::string out;
  for (const auto& gpu : gpus)
    out += (out.empty() ? "" : ",") + gpu;
  return out;
}

namespace {

std::uint64_t differ(const std::map<std::string, std::string>& clean,
                     const std::map<std::string, std::string>& chaos,
                     std::vector<std::string>* which) {
  std::uint64_t count = 0;
  for (const auto& [node, state] : clean) {
    auto it = chaos.find(node);
    if (it != chaos.end() && it->second == state)
      continue;
    ++count;
    if (which != nullptr)
      which->push_back(node + ": clean \"" + state + "\", chaos \""
                       + (it == chaos.end() ? "?" : it->second) + "\"");
  }
  return count;
}

} // namespace

std::uint64_t diverged(const chaos_verdict& clean, const chaos_verdict& chaos,
                       std::vector<std::string>* which) {
  return differ(clean.final_state, chaos.final_state, which);
}

std::uint64_t cr_counts_differ(const chaos_verdict& clean, const chaos_verdict& chaos,
                               std::vector<std::string>* which) {
  return differ(clean.cr_counts, chaos.cr_counts, which);
}

} // namespace vigil::chaos
