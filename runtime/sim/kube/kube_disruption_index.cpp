// The disruption controller's indexes in the API test server: pods by label
// pair and PodDisruptionBudgets by one pair of their matchLabels, per
// namespace. The real controller keeps informer indexes for the same reason:
// without them every pod write would read every budget, and every budget
// every pod, which made populating a 10,000-node cluster quadratic.
#include "runtime/sim/kube/kube_object_store.hpp"

#include <utility>

#include "runtime/sim/kube/kube_selectors.hpp"

namespace vigil::kube {

namespace {

const std::string pods_resource = "pods";
const std::string budgets_resource = "poddisruptionbudgets.policy";

using label_pair = std::pair<std::string, std::string>;

std::string index_key(const std::string& ns, const label_pair& pair) {
  return ns + '\n' + pair.first + '\n' + pair.second;
}

// The object's labels with string values (others match no selector).
std::vector<label_pair> labels_of(const json& object) {
  std::vector<label_pair> out;
  if (!object.is_object())
    return out;
  auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object())
    return out;
  auto labels = metadata->find("labels");
  if (labels == metadata->end() || !labels->is_object())
    return out;
  for (const auto& [name, value] : labels->items())
    if (value.is_string())
      out.emplace_back(name, value.get<std::string>());
  return out;
}

// A pair every pod the budget selects carries: the first of its matchLabels.
// nullopt when it has none, or its selector cannot be read (such a budget is
// refreshed on every pod write of its namespace, and says why in its status).
std::optional<label_pair> index_pair(const json& budget) {
  auto spec = budget.find("spec");
  if (spec == budget.end() || !spec->is_object())
    return std::nullopt;
  auto selector = spec->find("selector");
  if (selector == spec->end())
    return std::nullopt;
  api_status error;
  if (!label_selector::from_object(*selector, error))
    return std::nullopt;
  auto match = selector->find("matchLabels");
  if (match == selector->end() || !match->is_object())
    return std::nullopt;
  for (const auto& [name, value] : match->items())
    if (value.is_string())
      return label_pair{name, value.get<std::string>()};
  return std::nullopt;
}

void erase_name(std::map<std::string, std::set<std::string>>& index,
                const std::string& key, const std::string& name) {
  auto it = index.find(key);
  if (it == index.end())
    return;
  it->second.erase(name);
  if (it->second.empty())
    index.erase(it);
}

} // namespace

void object_store::index_for_budgets(const object_key& key, const json& before,
                                     const json& after) {
  if (key.plural_group == pods_resource) {
    for (const auto& pair : labels_of(before))
      erase_name(pods_by_label_, index_key(key.ns, pair), key.name);
    for (const auto& pair : labels_of(after))
      pods_by_label_[index_key(key.ns, pair)].insert(key.name);
    return;
  }
  if (key.plural_group != budgets_resource)
    return;
  if (before.is_object()) {
    if (auto pair = index_pair(before))
      erase_name(budgets_by_label_, index_key(key.ns, *pair), key.name);
    else
      erase_name(unindexed_budgets_, key.ns, key.name);
  }
  if (after.is_object()) {
    if (auto pair = index_pair(after))
      budgets_by_label_[index_key(key.ns, *pair)].insert(key.name);
    else
      unindexed_budgets_[key.ns].insert(key.name);
  }
}

std::set<std::string> object_store::budgets_concerning(const std::string& ns,
                                                       const json& pod) const {
  std::set<std::string> out;
  if (auto it = unindexed_budgets_.find(ns); it != unindexed_budgets_.end())
    out = it->second;
  for (const auto& pair : labels_of(pod))
    if (auto it = budgets_by_label_.find(index_key(ns, pair));
        it != budgets_by_label_.end())
      out.insert(it->second.begin(), it->second.end());
  return out;
}

std::vector<const json*> object_store::pods_selected_by(const json& budget,
                                                        const std::string& ns,
                                                        std::string& why) const {
  api_status error;
  auto spec = budget.find("spec");
  auto selector = label_selector::from_object(
    spec != budget.end() && spec->is_object() ? spec->value("selector", json()) : json(),
    error);
  std::vector<const json*> pods;
  if (!selector) {
    why = error.message;
    return pods;
  }
  if (auto pair = index_pair(budget)) {
    if (auto it = pods_by_label_.find(index_key(ns, *pair)); it != pods_by_label_.end())
      for (const auto& name : it->second) {
        const json& pod = objects_.at({pods_resource, ns, name});
        if (selector->matches(pod))
          pods.push_back(&pod);
      }
    return pods;
  }
  for (auto it = objects_.lower_bound({pods_resource, ns, ""});
       it != objects_.end() && it->first.plural_group == pods_resource
       && it->first.ns == ns;
       ++it)
    if (selector->matches(it->second))
      pods.push_back(&it->second);
  return pods;
}

} // namespace vigil::kube
