// The object store behind the Kubernetes API test server: what a real API
// server does for the objects vigil uses — resourceVersions, conflicts,
// selectors, pagination, watch history, patches, graceful deletion, owner
// references and PodDisruptionBudgets — without HTTP. The test server (and the
// `vigil demo` simulator) wraps it; it is a test double, never production.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/sim/kube/kube_token_review.hpp"

namespace vigil::kube {

using json = nlohmann::json;

/// A resource type the store serves, as discovery documents describe it.
struct resource_type {
  std::string group;   ///< "" for core, "policy", "batch", "coordination.k8s.io", …
  std::string version; ///< "v1", "v1alpha1"
  std::string plural;  ///< "nodes"
  std::string kind;    ///< "Node"
  bool namespaced = true;
  bool has_status = true; ///< a /status subresource exists
  std::vector<std::string> short_names;
  /// Served for a CustomResourceDefinition (kube_crds.hpp). A LIST of a
  /// built-in type has items without kind and apiVersion, as the API
  /// server's do (kubernetes/kubernetes#3030); a custom resource's keep them.
  bool custom = false;
  std::string api_version() const {
    return group.empty() ? version : group + "/" + version;
  }
};

/// The built-in types: core/v1 nodes, pods, events, namespaces,
/// configmaps, secrets; policy/v1 poddisruptionbudgets; batch/v1 jobs;
/// coordination.k8s.io/v1 leases; resource.k8s.io/v1 resourceclaims and
/// resourceslices (Dynamic Resource Allocation, read by the drain); and the
/// kinds `vigil install` prints, stored but not acted on (as on a cluster
/// without their controllers): serviceaccounts, services, apps/v1
/// daemonsets and deployments, RBAC, NetworkPolicies and
/// apiextensions.k8s.io/v1 customresourcedefinitions, whose creation serves
/// the resource they define (kube_crds.hpp).
std::vector<resource_type> builtin_resource_types();

/// A failure shaped like the API server's Status object.
struct api_status {
  int code = 500; ///< HTTP status
  /// "NotFound", "Conflict", "AlreadyExists", "Invalid", "TooManyRequests",
  /// "Expired", "BadRequest", "UnsupportedMediaType"
  std::string reason;
  std::string message;
  json details; ///< optional: {"name":…, "kind":…, "causes":[…]}

  /// The Status object the real server sends: {"kind":"Status","apiVersion":"v1",
  /// "metadata":{},"status":"Failure","message":…,"reason":…,"details":…,"code":…}.
  json to_json() const;
};

/// Either an object (or list) or the Status the server would answer.
struct store_result {
  std::optional<json> value;
  api_status error;
  bool ok() const { return value.has_value(); }
};

struct list_options {
  std::string label_selector; ///< "app=x,tier!=db,env in (a,b),!gpu,present"
  std::string field_selector; ///< "metadata.name=x,spec.nodeName=n,status.phase!=Failed"
  std::int64_t limit = 0;     ///< 0 = everything
  std::string continue_token; ///< from the previous page's metadata.continue
};

enum class patch_type { merge, json_patch, strategic_merge };

enum class propagation_policy { orphan, background, foreground };

struct delete_options {
  std::optional<std::int64_t> grace_period_seconds; ///< pods: default from spec or 30
  std::optional<propagation_policy> propagation;    ///< default per type (jobs: orphan)
  std::optional<std::string> precondition_resource_version;
  std::optional<std::string> precondition_uid; ///< 409 when the object's uid differs
};

/// Reads a DeleteOptions object (a DELETE body, an Eviction's deleteOptions):
/// gracePeriodSeconds, propagationPolicy ("Orphan", "Background",
/// "Foreground"), orphanDependents, preconditions. nullopt and a 400
/// BadRequest naming the field when malformed; null reads as no options.
std::optional<delete_options> delete_options_from_json(const json& body,
                                                       api_status& error);

/// One change, as a watch stream carries it.
struct watch_event {
  std::string type; ///< "ADDED", "MODIFIED", "DELETED"
  json object;
  std::uint64_t resource_version = 0;
};

/// Where an object lives: type plus namespace ("" for cluster-scoped) and name.
struct object_key {
  std::string plural_group; ///< "pods", "jobs.batch", "gpuresets.vigil.dev"
  std::string ns;
  std::string name;
  friend bool operator<(const object_key& a, const object_key& b) {
    return std::tie(a.plural_group, a.ns, a.name)
           < std::tie(b.plural_group, b.ns, b.name);
  }
};

/// Not thread-safe: the server serialises access to it.
class object_store {
public:
  /// `watch_window` is how many changes are kept for watches to resume from;
  /// older resourceVersions get 410 Expired, as on a compacted etcd.
  explicit object_store(size_t watch_window = 10000);

  /// Adds a type (a CRD, or the built-ins at construction). Re-registering
  /// the same group/version/plural replaces it.
  void register_type(const resource_type& type);
  const std::vector<resource_type>& types() const { return types_; }
  /// The type for (group, version, plural), or nullptr.
  const resource_type* find_type(const std::string& group, const std::string& version,
                                 const std::string& plural) const;

  /// `ns` is ignored for cluster-scoped types; "" for a namespaced type
  /// means all namespaces (list/watch only).
  store_result get(const resource_type& type, const std::string& ns,
                   const std::string& name) const;
  /// A List object: {"kind":"<Kind>List","apiVersion":…,"metadata":
  /// {"resourceVersion":…, "continue":…, "remainingItemCount":…},"items":[…]}.
  /// Items in (namespace, name) order. A stale continue token gives 410.
  store_result list(const resource_type& type, const std::string& ns,
                    const list_options& options) const;
  /// Fills metadata (uid, resourceVersion, creationTimestamp, generation,
  /// namespace; name from generateName); 409 AlreadyExists; 400/422 when
  /// the object is not an object, kind/apiVersion mismatch, or has no name.
  store_result create(const resource_type& type, const std::string& ns, json object);
  /// PUT: 409 Conflict when metadata.resourceVersion is set and stale; status
  /// is kept from the stored object when the type has a status subresource
  /// (and only status changes when `status_subresource`).
  store_result update(const resource_type& type, const std::string& ns,
                      const std::string& name, json object, bool status_subresource);
  /// PATCH with the three patch types (strategic merge only for built-in
  /// types: 415 for registered custom types, as the real server does).
  /// Strategic merge follows the patch strategies of the fields vigil touches:
  /// status.conditions merge by "type", spec.containers by "name",
  /// metadata.ownerReferences by "uid", spec.taints replaced whole, maps merged.
  store_result patch(const resource_type& type, const std::string& ns,
                     const std::string& name, const json& patch, patch_type kind,
                     bool status_subresource);
  /// DELETE: pods with a grace period > 0 get metadata.deletionTimestamp and
  /// deletionGracePeriodSeconds and stay until finish_pod_deletion (the
  /// kubelet's part); other objects go at once. An object with finalizers
  /// gets deletionTimestamp (grace 0) and stays until an update empties
  /// metadata.finalizers; while it is being deleted, an update that adds a
  /// finalizer is refused (422 Forbidden), as the real server refuses it.
  /// Dependents (ownerReferences by uid) are deleted (background/foreground)
  /// or orphaned. Returns the object as the real server does (for pods in
  /// grace: the updated pod).
  store_result remove(const resource_type& type, const std::string& ns,
                      const std::string& name, const delete_options& options);
  /// POST pods/<name>/eviction: 429 TooManyRequests with a DisruptionBudget
  /// cause when a PDB that selects the pod has disruptionsAllowed == 0, else
  /// the pod is deleted gracefully (grace from the Eviction's deleteOptions)
  /// and the PDB's status is updated. Returns a Status "Success" object (201).
  store_result evict(const std::string& ns, const std::string& pod_name,
                     const json& eviction);

  /// The kubelet's part of graceful deletion: removes the pod for good, or,
  /// while it has finalizers, ends its grace period (the pod goes when an
  /// update removes the last one). False when there was nothing to do.
  bool finish_pod_deletion(const std::string& ns, const std::string& name);
  /// Pods in their grace period, as (namespace, name).
  std::vector<std::pair<std::string, std::string>> terminating_pods() const;

  /// Changes after `resource_version` for (type, ns) matching the selectors,
  /// in order; 410 Expired when resource_version is older than the window.
  /// resource_version 0 means "start at the current state": one ADDED per
  /// existing object, as the real server does.
  std::optional<std::vector<watch_event>> changes_since(const resource_type& type,
                                                        const std::string& ns,
                                                        std::uint64_t resource_version,
                                                        const list_options& selectors,
                                                        api_status& error) const;
  std::uint64_t current_resource_version() const { return resource_version_; }
  /// Drops the watch history up to `resource_version` (fault injection: makes
  /// older versions "expired").
  void compact(std::uint64_t resource_version);

  /// Called after every change (watch streams wake up on it).
  void on_change(std::function<void()> callback) { on_change_ = std::move(callback); }

  /// The wall clock for timestamps; tests and the demo set a virtual one.
  void set_clock(std::function<std::int64_t()> unix_seconds) {
    clock_ = std::move(unix_seconds);
  }
  /// The store's clock in unix seconds (the system clock unless set); tables
  /// compute AGE from it.
  std::int64_t now() const;

  /// Creates the namespaces a fresh cluster has (default, kube-system,
  /// kube-public, kube-node-lease) where they are missing. Opt-in, so that a
  /// new store starts empty at resourceVersion 0.
  void create_system_namespaces();

  /// The ServiceAccount tokens TokenReview vouches for.
  kube::token_reviews& token_reviews() { return token_reviews_; }
  const kube::token_reviews& token_reviews() const { return token_reviews_; }

private:
  /// One committed change: the watch history, and what consistent list pages
  /// are rebuilt from (undoing newer changes).
  struct history_entry {
    object_key key;
    std::string type; ///< ADDED, MODIFIED, DELETED
    json object;      ///< the state after the change; DELETED: the last state
    json previous;    ///< the state before; null for ADDED
    std::uint64_t resource_version = 0;
  };
  class change_notifier;

  // registry and storage (kube_object_store.cpp); create_object, update_object and
  // write_update are in kube_store_writes.cpp
  object_key key_of(const resource_type& type, const std::string& ns,
                    const std::string& name) const;
  const resource_type* type_of(const std::string& plural_group) const;
  bool is_builtin(const resource_type& type) const;
  const json* find(const object_key& key) const;
  bool uid_exists(const std::string& uid) const;
  std::string next_uid();
  std::string unique_name(const resource_type& type, const std::string& ns,
                          const std::string& prefix);
  json commit(const object_key& key, json object, const std::string& event);
  json commit_delete(const object_key& key);
  void record(history_entry entry);
  store_result create_object(const resource_type& type, const std::string& ns,
                             json object);
  store_result update_object(const resource_type& type, const object_key& key,
                             json incoming, bool status_subresource,
                             bool require_version);
  store_result write_update(const resource_type& type, const object_key& key,
                            json updated);

  // deletion, garbage collection and disruption budgets (kube_store_deletion.cpp)
  store_result delete_object(const resource_type& type, const object_key& key,
                             const delete_options& options);
  store_result delete_pod(const resource_type& type, const object_key& key,
                          const delete_options& options, propagation_policy policy);
  store_result mark_for_deletion(const resource_type& type, const object_key& key,
                                 std::int64_t grace_seconds);
  store_result start_foreground_deletion(const resource_type& type,
                                         const object_key& key);
  json delete_for_good(const object_key& key, propagation_policy policy);
  void delete_namespace_contents(const std::string& ns);
  void handle_dependents(const std::string& owner_uid, propagation_policy policy);
  void drop_owner_reference(const object_key& key, const std::string& owner_uid);
  void settle_foreground_deletions();
  /// After a write of `key`: `before` and `after` are the object's versions
  /// (null when it was created or is gone); only pods' are read.
  void after_write(const object_key& key, const json& before, const json& after);
  /// Recomputes the status of the namespace's budgets that `concerned` picks
  /// (every budget when it is empty), among `candidates` when given.
  void refresh_disruption_budgets(
    const std::string& ns,
    const std::function<bool(const object_key&, const json&)>& concerned = {},
    const std::set<std::string>* candidates = nullptr);
  std::vector<const json*> pods_selected_by(const json& budget, const std::string& ns,
                                            std::string& why) const;
  /// Keeps the disruption controller's indexes (kube_disruption_index.cpp)
  /// after `key` changed from `before` to `after` (null: absent).
  void index_for_budgets(const object_key& key, const json& before, const json& after);
  /// The budgets of `ns` that may select `pod`: those indexed under one of its
  /// labels, and those the index cannot narrow (no matchLabels). By name.
  std::set<std::string> budgets_concerning(const std::string& ns, const json& pod) const;
  std::optional<api_status> check_disruption_budgets(const object_key& pod_key);

  std::vector<resource_type> types_;
  std::uint64_t resource_version_ = 0;
  std::function<void()> on_change_;
  std::function<std::int64_t()> clock_;
  std::map<object_key, json> objects_;
  std::deque<history_entry> history_;
  std::size_t watch_window_;
  std::uint64_t compacted_through_ = 0; ///< history holds every change after it
  std::uint64_t name_counter_ = 0;      ///< seeds generated names and uids
  std::set<std::string> builtin_plural_groups_;
  kube::token_reviews token_reviews_;
  // The disruption controller's informer indexes, kept by commit and
  // commit_delete, so that populating a 10,000-node cluster is linear: a pod
  // write refreshes only the budgets that may select it, and a budget reads
  // only the pods that carry one label pair of its selector.
  // Keys: "<namespace>\n<label>\n<value>"; values: object names.
  std::map<std::string, std::set<std::string>> pods_by_label_;
  std::map<std::string, std::set<std::string>> budgets_by_label_;
  /// Budgets with no matchLabels pair (or an unreadable selector), by namespace.
  std::map<std::string, std::set<std::string>> unindexed_budgets_;
};

/// Label selector matching ("a=b", "a==b", "a!=b", "a in (x,y)", "a notin
/// (x)", "a", "!a"); a malformed selector is a failure naming the term.
struct label_selector;
/// Field selector: "path=value", "path==value", "path!=value" over dotted
/// JSON paths (metadata.name, spec.nodeName, status.phase, involvedObject.name).
struct field_selector;

/// Applies an RFC 7386 merge patch, an RFC 6902 JSON patch or a strategic
/// merge patch (see object_store::patch) to `target`.
store_result apply_patch(const json& target, const json& patch, patch_type kind);

} // namespace vigil::kube
