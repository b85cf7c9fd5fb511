// The object store's deletion side: graceful pod deletion, finalizers, the
// garbage collector's owner-reference handling, namespace cleanup, and the
// disruption controller plus the eviction subresource.
#include "runtime/sim/kube/kube_object_store.hpp"

#include <algorithm>

#include "runtime/sim/kube/kube_disruption.hpp"
#include "runtime/sim/kube/kube_selectors.hpp"
#include "runtime/sim/kube/kube_store_support.hpp"

namespace vigil::kube {

using namespace detail;

namespace {

const std::string pods_resource = "pods";
const std::string namespaces_resource = "namespaces";
const std::string budgets_resource = "poddisruptionbudgets.policy";
const std::string jobs_resource = "jobs.batch";
const std::string foreground_finalizer = "foregroundDeletion";
constexpr std::int64_t default_pod_grace_seconds = 30;

propagation_policy default_propagation(const object_key& key) {
  // batch/v1 Jobs orphan their pods unless told otherwise, for compatibility.
  return key.plural_group == jobs_resource ? propagation_policy::orphan
                                           : propagation_policy::background;
}

std::optional<propagation_policy> policy_named(const std::string& name) {
  if (name == "Orphan")
    return propagation_policy::orphan;
  if (name == "Background")
    return propagation_policy::background;
  if (name == "Foreground")
    return propagation_policy::foreground;
  return std::nullopt;
}

std::string pod_phase(const json& pod) {
  auto status = pod.find("status");
  return status != pod.end() && status->is_object() ? status->value("phase", "")
                                                    : std::string{};
}

std::int64_t pod_grace_seconds(const json& pod, const delete_options& options) {
  const auto spec = pod.value("spec", json::object());
  auto grace = options.grace_period_seconds.value_or(
    spec.value("terminationGracePeriodSeconds", default_pod_grace_seconds));
  if (grace < 0)
    grace = 1; // negative values act as the minimum grace period
  // Unscheduled and finished pods have no kubelet to wait for.
  if (spec.value("nodeName", "").empty() || pod_is_finished(pod))
    grace = 0;
  return grace;
}

// Reads preconditions.<field> into `into`; false and a 400 when it is no string.
bool read_precondition(const json& preconditions, const char* field,
                       std::optional<std::string>& into, api_status& error) {
  const auto value = preconditions.value(field, json());
  if (value.is_string())
    into = value.get<std::string>();
  else if (!value.is_null())
    error = bad_request(std::string{"preconditions."} + field + " must be a string");
  return value.is_string() || value.is_null();
}

bool read_preconditions(const json& preconditions, delete_options& options,
                        api_status& error) {
  if (preconditions.is_null())
    return true;
  if (!preconditions.is_object()) {
    error = bad_request("preconditions must be an object");
    return false;
  }
  return read_precondition(preconditions, "resourceVersion",
                           options.precondition_resource_version, error)
         && read_precondition(preconditions, "uid", options.precondition_uid, error);
}

bool read_propagation(const json& body, delete_options& options, api_status& error) {
  const auto policy = body.value("propagationPolicy", json());
  if (policy.is_string()) {
    options.propagation = policy_named(policy.get<std::string>());
    if (!options.propagation) {
      error = bad_request("propagationPolicy: Unsupported value: " + policy.dump()
                          + ": supported values: \"Orphan\", \"Background\", "
                            "\"Foreground\"");
      return false;
    }
  } else if (!policy.is_null()) {
    error = bad_request("propagationPolicy must be a string");
    return false;
  }
  const auto orphan = body.value("orphanDependents", json());
  if (orphan.is_boolean() && !options.propagation)
    options.propagation =
      orphan.get<bool>() ? propagation_policy::orphan : propagation_policy::background;
  return true;
}

json owner_references(const json& object) {
  auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object())
    return json::array();
  auto refs = metadata->find("ownerReferences");
  return refs != metadata->end() && refs->is_array() ? *refs : json::array();
}

json success_status(int code) {
  return {{"kind", "Status"},
          {"apiVersion", "v1"},
          {"metadata", json::object()},
          {"status", "Success"},
          {"code", code}};
}

// Whether `budget`'s selector picks `pod` (a null pod: no); nullopt when the
// selector cannot be read.
std::optional<bool> budget_selects(const json& budget, const json& pod) {
  api_status error;
  auto spec = budget.find("spec");
  auto selector = label_selector::from_object(
    spec != budget.end() && spec->is_object() ? spec->value("selector", json()) : json(),
    error);
  if (!selector)
    return std::nullopt;
  return !pod.is_null() && selector->matches(pod);
}

} // namespace

std::optional<delete_options> delete_options_from_json(const json& body,
                                                       api_status& error) {
  delete_options options;
  if (body.is_null())
    return options;
  if (!body.is_object()) {
    error = bad_request("DeleteOptions must be a JSON object");
    return std::nullopt;
  }
  const auto grace = body.value("gracePeriodSeconds", json());
  if (grace.is_number_integer()) {
    options.grace_period_seconds = grace.get<std::int64_t>();
  } else if (!grace.is_null()) {
    error = bad_request("gracePeriodSeconds must be an integer");
    return std::nullopt;
  }
  if (!read_propagation(body, options, error)
      || !read_preconditions(body.value("preconditions", json()), options, error))
    return std::nullopt;
  return options;
}

store_result object_store::remove(const resource_type& type, const std::string& ns,
                                  const std::string& name,
                                  const delete_options& options) {
  change_notifier notify{*this};
  return delete_object(type, key_of(type, ns, name), options);
}

store_result object_store::delete_object(const resource_type& type, const object_key& key,
                                         const delete_options& options) {
  const json* existing = find(key);
  if (existing == nullptr)
    return failure(not_found(key));
  const auto version = meta_string(*existing, "resourceVersion");
  if (options.precondition_resource_version
      && *options.precondition_resource_version != version)
    return failure(conflict(key, "Precondition failed: ResourceVersion in precondition: "
                                   + *options.precondition_resource_version
                                   + ", ResourceVersion in object meta: " + version));
  const auto uid = meta_string(*existing, "uid");
  if (options.precondition_uid && *options.precondition_uid != uid)
    return failure(conflict(key, "Precondition failed: UID in precondition: "
                                   + *options.precondition_uid
                                   + ", UID in object meta: " + uid));
  const auto policy = options.propagation.value_or(default_propagation(key));
  if (key.plural_group == pods_resource)
    return delete_pod(type, key, options, policy);
  if (being_deleted(*existing))
    return success(present(type, *existing));
  if (policy == propagation_policy::foreground)
    return start_foreground_deletion(type, key);
  if (!finalizers_of(*existing).empty()) {
    // The finalizers' owners finish the deletion; dependents are dealt with now.
    if (policy == propagation_policy::orphan)
      handle_dependents(uid, policy);
    return mark_for_deletion(type, key, 0);
  }
  if (key.plural_group == namespaces_resource)
    delete_namespace_contents(key.name);
  return success(present(type, delete_for_good(key, policy)));
}

store_result object_store::delete_pod(const resource_type& type, const object_key& key,
                                      const delete_options& options,
                                      propagation_policy policy) {
  const json& pod = objects_.at(key);
  const auto grace = pod_grace_seconds(pod, options);
  if (grace == 0 && !finalizers_of(pod).empty()) {
    // Nothing to wait for but its finalizers' owners.
    if (being_deleted(pod) && meta_integer(pod, "deletionGracePeriodSeconds", 0) == 0)
      return success(present(type, pod));
    return mark_for_deletion(type, key, 0);
  }
  if (grace == 0)
    return success(present(type, delete_for_good(key, policy)));
  if (!being_deleted(pod) || grace < meta_integer(pod, "deletionGracePeriodSeconds", 0))
    return mark_for_deletion(type, key, grace);
  return success(present(type, pod));
}

store_result object_store::mark_for_deletion(const resource_type& type,
                                             const object_key& key,
                                             std::int64_t grace_seconds) {
  json updated = objects_.at(key);
  auto& metadata = metadata_of(updated);
  metadata["deletionTimestamp"] = format_timestamp(now() + grace_seconds);
  metadata["deletionGracePeriodSeconds"] = grace_seconds;
  metadata["generation"] = meta_integer(updated, "generation", 1) + 1;
  json stored = commit(key, std::move(updated), "MODIFIED");
  after_write(key, stored, stored); // the labels did not change
  return success(present(type, std::move(stored)));
}

store_result object_store::start_foreground_deletion(const resource_type& type,
                                                     const object_key& key) {
  json updated = objects_.at(key);
  auto& metadata = metadata_of(updated);
  auto finalizers = finalizers_of(updated);
  if (!has_finalizer(updated, foreground_finalizer))
    finalizers.push_back(foreground_finalizer);
  metadata["finalizers"] = std::move(finalizers);
  metadata["deletionTimestamp"] = format_timestamp(now());
  metadata["deletionGracePeriodSeconds"] = 0;
  metadata["generation"] = meta_integer(updated, "generation", 1) + 1;
  json marked = commit(key, std::move(updated), "MODIFIED");
  handle_dependents(meta_string(marked, "uid"), propagation_policy::foreground);
  settle_foreground_deletions();
  const json* current = find(key);
  return success(present(type, current ? *current : marked));
}

json object_store::delete_for_good(const object_key& key, propagation_policy policy) {
  json gone = commit_delete(key);
  after_write(key, gone, json());
  handle_dependents(meta_string(gone, "uid"), policy);
  settle_foreground_deletions();
  return gone;
}

void object_store::delete_namespace_contents(const std::string& ns) {
  std::vector<object_key> contents;
  for (const auto& [key, object] : objects_)
    if (key.ns == ns)
      contents.push_back(key);
  for (const auto& key : contents)
    commit_delete(key);
}

void object_store::handle_dependents(const std::string& owner_uid,
                                     propagation_policy policy) {
  std::vector<object_key> dependents;
  for (const auto& [key, object] : objects_)
    if (owned_by(object, owner_uid, false))
      dependents.push_back(key);
  for (const auto& key : dependents) {
    const json* dependent = find(key);
    if (dependent == nullptr)
      continue;
    const auto refs = owner_references(*dependent);
    // The garbage collector keeps dependents that still have a live owner.
    const bool other_owner = std::any_of(refs.begin(), refs.end(), [&](const json& ref) {
      const auto uid = ref.value("uid", "");
      return uid != owner_uid && uid_exists(uid);
    });
    const resource_type* type = type_of(key.plural_group);
    if (policy == propagation_policy::orphan || other_owner || type == nullptr) {
      drop_owner_reference(key, owner_uid);
    } else if (!being_deleted(*dependent)) {
      delete_options options;
      options.propagation = policy;
      delete_object(*type, key, options);
    }
  }
}

void object_store::drop_owner_reference(const object_key& key,
                                        const std::string& owner_uid) {
  json updated = objects_.at(key);
  auto& metadata = metadata_of(updated);
  json kept = json::array();
  for (const auto& ref : owner_references(updated))
    if (ref.value("uid", "") != owner_uid)
      kept.push_back(ref);
  if (kept.empty())
    metadata.erase("ownerReferences");
  else
    metadata["ownerReferences"] = std::move(kept);
  const json stored = commit(key, std::move(updated), "MODIFIED");
  after_write(key, stored, stored); // the labels did not change
}

void object_store::settle_foreground_deletions() {
  for (;;) {
    auto ready = std::find_if(objects_.begin(), objects_.end(), [&](const auto& entry) {
      const json& object = entry.second;
      if (!being_deleted(object) || !has_finalizer(object, foreground_finalizer))
        return false;
      const auto uid = meta_string(object, "uid");
      return std::none_of(objects_.begin(), objects_.end(), [&](const auto& other) {
        return owned_by(other.second, uid, true);
      });
    });
    if (ready == objects_.end())
      return;
    const auto key = ready->first;
    json updated = ready->second;
    json finalizers = json::array();
    for (const auto& finalizer : finalizers_of(updated))
      if (finalizer != foreground_finalizer)
        finalizers.push_back(finalizer);
    metadata_of(updated)["finalizers"] = finalizers;
    if (finalizers.empty())
      delete_for_good(key, propagation_policy::background);
    else
      commit(key, std::move(updated), "MODIFIED");
  }
}

// The disruption controller reconciles a budget when it or a pod it selects
// changes. Refreshing only those keeps a write O(pods of the namespace) per
// concerned budget, where refreshing every budget on every pod write made
// populating a 1,000-node cluster take minutes.
void object_store::after_write(const object_key& key, const json& before,
                               const json& after) {
  if (key.plural_group == budgets_resource) {
    refresh_disruption_budgets(key.ns, [&](const object_key& budget, const json&) {
      return budget.name == key.name;
    });
  } else if (key.plural_group == pods_resource) {
    auto candidates = budgets_concerning(key.ns, before);
    candidates.merge(budgets_concerning(key.ns, after));
    refresh_disruption_budgets(
      key.ns,
      [&](const object_key&, const json& budget) {
        // A budget whose selector cannot be read says so in its status; it is
        // refreshed whatever changed.
        return budget_selects(budget, before) != false
               || budget_selects(budget, after) != false;
      },
      &candidates);
  }
}

void object_store::refresh_disruption_budgets(
  const std::string& ns,
  const std::function<bool(const object_key&, const json&)>& concerned,
  const std::set<std::string>* candidates) {
  std::vector<object_key> budgets;
  auto consider = [&](const object_key& key, const json& budget) {
    if (!concerned || concerned(key, budget))
      budgets.push_back(key);
  };
  if (candidates != nullptr) {
    for (const auto& name : *candidates)
      if (const json* budget = find({budgets_resource, ns, name}))
        consider({budgets_resource, ns, name}, *budget);
  } else {
    for (auto it = objects_.lower_bound({budgets_resource, ns, ""});
         it != objects_.end() && it->first.plural_group == budgets_resource
         && it->first.ns == ns;
         ++it)
      consider(it->first, it->second);
  }
  for (const auto& key : budgets) {
    const json& budget = objects_.at(key);
    std::string why;
    const auto pods = pods_selected_by(budget, ns, why);
    std::optional<disruption_budget_status> computed;
    if (why.empty())
      computed = compute_disruption_status(budget, pods, why);
    auto status =
      disruption_status_object(budget, computed, why, format_timestamp(now()));
    if (budget.contains("status") && budget["status"] == status)
      continue;
    json updated = budget;
    updated["status"] = std::move(status);
    commit(key, std::move(updated), "MODIFIED");
  }
}

std::optional<api_status>
object_store::check_disruption_budgets(const object_key& pod_key) {
  const json& pod = objects_.at(pod_key);
  const auto candidates = budgets_concerning(pod_key.ns, pod);
  refresh_disruption_budgets(
    pod_key.ns,
    [&](const object_key&, const json& budget) {
      return budget_selects(budget, pod) == true;
    },
    &candidates);
  std::vector<const json*> budgets;
  for (const auto& name : candidates)
    if (const json* budget = find({budgets_resource, pod_key.ns, name});
        budget != nullptr && budget_selects(*budget, pod) == true)
      budgets.push_back(budget);
  if (budgets.empty())
    return std::nullopt;
  if (budgets.size() > 1)
    return api_status{
      500, "InternalError",
      "This pod has more than one PodDisruptionBudget, which the eviction "
      "subresource does not support.",
      nullptr};
  const json& budget = *budgets.front();
  const auto status = budget.value("status", json::object());
  const auto healthy = status.value("currentHealthy", std::int64_t{0});
  const auto desired = status.value("desiredHealthy", std::int64_t{0});
  const auto policy =
    budget.value("spec", json::object()).value("unhealthyPodEvictionPolicy", "");
  // An unready pod may go when the application is not disrupted already.
  if (!pod_is_ready(pod)
      && (policy == "AlwaysAllow" || (healthy >= desired && desired > 0)))
    return std::nullopt;
  if (status.value("disruptionsAllowed", std::int64_t{0}) > 0)
    return std::nullopt;
  const auto cause = "The disruption budget " + meta_string(budget, "name") + " needs "
                     + std::to_string(desired) + " healthy pods and has "
                     + std::to_string(healthy) + " currently";
  return api_status{
    429,
    "TooManyRequests",
    "Cannot evict pod as it would violate the pod's disruption budget.",
    {{"causes", json::array({{{"reason", "DisruptionBudget"}, {"message", cause}}})}}};
}

store_result object_store::evict(const std::string& ns, const std::string& pod_name,
                                 const json& eviction) {
  change_notifier notify{*this};
  const object_key key{pods_resource, ns, pod_name};
  const json* pod = find(key);
  if (pod == nullptr)
    return failure(not_found(key));
  if (!eviction.is_null() && !eviction.is_object())
    return failure(bad_request("the Eviction must be a JSON object"));
  const auto named = eviction.is_object() ? meta_string(eviction, "name") : std::string{};
  if (!named.empty() && named != pod_name)
    return failure(bad_request("name in URL does not match name in Eviction object"));
  api_status error;
  auto options = delete_options_from_json(
    eviction.is_object() ? eviction.value("deleteOptions", json()) : json(), error);
  if (!options)
    return failure(error);
  // Pods that are going anyway, or not running yet, need no budget.
  const auto phase = pod_phase(*pod);
  if (!being_deleted(*pod) && !pod_is_finished(*pod) && phase != "Pending")
    if (auto refusal = check_disruption_budgets(key))
      return failure(*refusal);
  auto deleted = delete_object(*type_of(pods_resource), key, *options);
  if (!deleted.ok())
    return deleted;
  return success(success_status(201));
}

bool object_store::finish_pod_deletion(const std::string& ns, const std::string& name) {
  change_notifier notify{*this};
  const object_key key{pods_resource, ns, name};
  const json* pod = find(key);
  if (pod == nullptr || !being_deleted(*pod))
    return false;
  if (!finalizers_of(*pod).empty()) {
    // The kubelet's final delete (grace 0): the pod stays for its finalizers.
    if (meta_integer(*pod, "deletionGracePeriodSeconds", 0) == 0)
      return false;
    mark_for_deletion(*type_of(pods_resource), key, 0);
    return true;
  }
  delete_for_good(key, propagation_policy::background);
  return true;
}

std::vector<std::pair<std::string, std::string>> object_store::terminating_pods() const {
  std::vector<std::pair<std::string, std::string>> pods;
  for (auto it = objects_.lower_bound({pods_resource, "", ""});
       it != objects_.end() && it->first.plural_group == pods_resource; ++it)
    if (being_deleted(it->second))
      pods.emplace_back(it->first.ns, it->first.name);
  return pods;
}

} // namespace vigil::kube
