// The object store's write side: create, update and patch, with the checks
// the API server makes on a body (kind, apiVersion, namespace, name,
// identity, new finalizers) and the fields it owns (uid, timestamps,
// generation, status).
#include "runtime/sim/kube/kube_object_store.hpp"

#include <algorithm>
#include <set>

#include "runtime/sim/kube/kube_crds.hpp"
#include "runtime/sim/kube/kube_store_support.hpp"

namespace vigil::kube {

using namespace detail;

namespace {

const std::string pods_resource = "pods";
const std::string namespaces_resource = "namespaces";

std::optional<api_status> check_body(const resource_type& type, const json& object) {
  if (!object.is_object())
    return bad_request("the request body must be a JSON object");
  if (object.contains("kind") && !object["kind"].is_null() && object["kind"] != type.kind)
    return bad_request("the kind in the body (" + object["kind"].dump()
                       + ") does not match the resource's kind (" + type.kind + ")");
  if (object.contains("apiVersion") && !object["apiVersion"].is_null()) {
    const auto& version = object["apiVersion"];
    const auto text = version.is_string() ? version.get<std::string>() : version.dump();
    const auto slash = text.find('/');
    const auto group = slash == std::string::npos ? std::string{} : text.substr(0, slash);
    if (!version.is_string() || group != type.group)
      return bad_request("the apiVersion in the body (" + text
                         + ") does not match the resource's (" + type.api_version()
                         + ")");
  }
  if (object.contains("metadata") && !object["metadata"].is_object())
    return bad_request("metadata must be a JSON object");
  return std::nullopt;
}

bool is_lower_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

// RFC 1123: a label (namespaces) or a subdomain (most objects).
bool valid_dns_name(const std::string& name, bool label) {
  const std::size_t limit = label ? 63 : 253;
  if (name.empty() || name.size() > limit || !is_lower_alnum(name.front())
      || !is_lower_alnum(name.back()))
    return false;
  return std::all_of(name.begin(), name.end(), [label](char c) {
    return is_lower_alnum(c) || c == '-' || (!label && c == '.');
  });
}

// Custom resources only need names that fit in a URL path segment.
bool valid_path_segment(const std::string& name) {
  return !name.empty() && name != "." && name != ".."
         && name.find_first_of("/%") == std::string::npos;
}

// Sets metadata.namespace for a create at `ns` (dropping it for cluster-scoped
// types) and reports where the object goes; a 400 when they disagree.
std::optional<api_status> place_in_namespace(const resource_type& type,
                                             const std::string& ns, json& object,
                                             std::string& object_ns) {
  auto& metadata = metadata_of(object);
  object_ns = meta_string(object, "namespace");
  if (!type.namespaced) {
    object_ns.clear();
    metadata.erase("namespace");
    return std::nullopt;
  }
  if (!ns.empty() && !object_ns.empty() && ns != object_ns)
    return bad_request("the namespace of the provided object does not match the "
                       "namespace sent on the request");
  if (ns.empty() && object_ns.empty())
    return bad_request("a namespace is required to create " + type.plural);
  object_ns = ns.empty() ? object_ns : ns;
  metadata["namespace"] = object_ns;
  return std::nullopt;
}

std::optional<api_status> check_name(const resource_type& type, bool builtin,
                                     const std::string& name) {
  const bool name_ok = !builtin
                         ? valid_path_segment(name)
                         : valid_dns_name(name, type.plural == namespaces_resource);
  if (name_ok)
    return std::nullopt;
  return invalid(type, name, "metadata.name", "Invalid value",
                 "\"" + name
                   + "\": a lowercase RFC 1123 name must consist of lower case "
                     "alphanumeric characters, '-' or '.'");
}

void copy_field(json& to, const json& from, const std::string& field) {
  if (from.is_object() && from.contains(field))
    to[field] = from[field];
  else
    to.erase(field);
}

bool spec_changed(json before, json after) {
  for (auto* object : {&before, &after}) {
    object->erase("metadata");
    object->erase("status");
  }
  return before != after;
}

// The object a PUT leaves: the caller's fields, with what the server owns
// (identity, timestamps, resourceVersion, generation, and status or the rest
// depending on the subresource) kept from the stored object.
json merged_for_update(const resource_type& type, const json& existing, json incoming,
                       bool status_only) {
  json updated;
  if (status_only) {
    updated = existing;
    copy_field(updated, incoming, "status");
  } else {
    updated = std::move(incoming);
    if (type.has_status)
      copy_field(updated, existing, "status");
  }
  copy_field(updated, existing, "apiVersion");
  copy_field(updated, existing, "kind");
  auto& metadata = metadata_of(updated);
  for (const char* field :
       {"name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
        "deletionGracePeriodSeconds", "resourceVersion", "generation"})
    copy_field(metadata, existing["metadata"], field);
  if (spec_changed(existing, updated))
    metadata["generation"] = meta_integer(existing, "generation", 1) + 1;
  return updated;
}

std::optional<api_status> check_identity(const resource_type& type, const object_key& key,
                                         const json& existing, const json& incoming,
                                         bool require_version) {
  const auto name = meta_string(incoming, "name");
  if (!name.empty() && name != key.name)
    return bad_request("the name of the object (" + name
                       + ") does not match the name on the URL (" + key.name + ")");
  const auto ns = meta_string(incoming, "namespace");
  if (type.namespaced && !ns.empty() && ns != key.ns)
    return bad_request("the namespace of the provided object does not match the "
                       "namespace sent on the request");
  const auto uid = meta_string(incoming, "uid");
  if (!uid.empty() && uid != meta_string(existing, "uid"))
    return conflict(key, "Precondition failed: UID in precondition: " + uid
                           + ", UID in object meta: " + meta_string(existing, "uid"));
  const auto version = meta_string(incoming, "resourceVersion");
  if (!version.empty() && version != meta_string(existing, "resourceVersion"))
    return conflict(key, object_modified);
  if (version.empty() && require_version)
    return invalid(type, key.name, "metadata.resourceVersion", "Invalid value",
                   "0x0: must be specified for an update");
  return std::nullopt;
}

// The server refuses new finalizers on an object being deleted
// (ValidateObjectMetaUpdate): they could hold its deletion for ever. Removing
// finalizers, and keeping them, stays allowed.
std::optional<api_status> check_no_new_finalizers(const resource_type& type,
                                                  const object_key& key,
                                                  const json& existing,
                                                  const json& updated) {
  if (!being_deleted(existing))
    return std::nullopt;
  const auto before = finalizers_of(existing);
  std::set<std::string> added; // sorted, as the server lists them
  for (const auto& finalizer : finalizers_of(updated))
    if (finalizer.is_string()
        && std::find(before.begin(), before.end(), finalizer) == before.end())
      added.insert(finalizer.get<std::string>());
  if (added.empty())
    return std::nullopt;
  std::string listed;
  for (const auto& finalizer : added)
    listed += (listed.empty() ? "\"" : ", \"") + finalizer + "\"";
  return invalid(type, key.name, "metadata.finalizers", "Forbidden",
                 "no new finalizers can be added if the object is being deleted, found "
                 "new finalizers []string{"
                   + listed + "}");
}

// Status a type's create leaves: custom resources with a status subresource
// start without one; pods start Pending and namespaces Active.
void prepare_status(const resource_type& type, bool builtin, json& object) {
  if (!builtin && type.has_status)
    object.erase("status");
  const auto resource = plural_group_of(type);
  if (resource != pods_resource && resource != namespaces_resource)
    return;
  auto& status = object["status"];
  if (!status.is_object())
    status = json::object();
  if (!status.contains("phase"))
    status["phase"] = resource == pods_resource ? "Pending" : "Active";
}

} // namespace

store_result object_store::create(const resource_type& type, const std::string& ns,
                                  json object) {
  change_notifier notify{*this};
  return create_object(type, ns, std::move(object));
}

store_result object_store::create_object(const resource_type& type, const std::string& ns,
                                         json object) {
  if (auto problem = check_body(type, object))
    return failure(*problem);
  std::string object_ns;
  if (auto problem = place_in_namespace(type, ns, object, object_ns))
    return failure(*problem);
  auto name = meta_string(object, "name");
  const auto prefix = meta_string(object, "generateName");
  if (name.empty() && prefix.empty())
    return failure(invalid(type, "", "metadata.name", "Required value",
                           "name or generateName is required"));
  if (name.empty())
    name = unique_name(type, object_ns, prefix);
  const bool builtin = is_builtin(type);
  if (auto problem = check_name(type, builtin, name))
    return failure(*problem);
  const auto key = key_of(type, object_ns, name);
  if (find(key) != nullptr)
    return failure(already_exists(key));
  auto& metadata = metadata_of(object);
  metadata["name"] = name;
  metadata["uid"] = next_uid();
  metadata["creationTimestamp"] = format_timestamp(now());
  metadata["generation"] = 1;
  for (const char* field : {"deletionTimestamp", "deletionGracePeriodSeconds"})
    metadata.erase(field);
  object["apiVersion"] = type.api_version();
  object["kind"] = type.kind;
  prepare_status(type, builtin, object);
  if (is_crd_type(type)) {
    if (auto problem = crd_problem(object))
      return failure(invalid(type, name, "spec", "Invalid value", *problem));
    object["status"] = established_crd_status(object);
    for (const auto& served : crd_resource_types(object))
      register_type(served);
  }
  json created = commit(key, std::move(object), "ADDED");
  after_write(key, json(), created);
  return success(present(type, std::move(created)));
}

store_result object_store::update(const resource_type& type, const std::string& ns,
                                  const std::string& name, json object,
                                  bool status_subresource) {
  change_notifier notify{*this};
  // Custom resources refuse unconditional updates, as the real server does.
  return update_object(type, key_of(type, ns, name), std::move(object),
                       status_subresource, !is_builtin(type));
}

store_result object_store::update_object(const resource_type& type, const object_key& key,
                                         json incoming, bool status_subresource,
                                         bool require_version) {
  const json* existing = find(key);
  if (existing == nullptr)
    return failure(not_found(key));
  if (status_subresource && !type.has_status)
    return failure(
      {404, "NotFound", "the server could not find the requested resource", nullptr});
  if (auto problem = check_body(type, incoming))
    return failure(*problem);
  if (auto problem = check_identity(type, key, *existing, incoming, require_version))
    return failure(*problem);
  auto updated =
    merged_for_update(type, *existing, std::move(incoming), status_subresource);
  if (auto problem = check_no_new_finalizers(type, key, *existing, updated))
    return failure(*problem);
  return write_update(type, key, std::move(updated));
}

store_result object_store::write_update(const resource_type& type, const object_key& key,
                                        json updated) {
  const json& existing = objects_.at(key);
  if (updated == existing)
    return success(present(type, existing));
  // The last finalizer of an object being deleted is gone: the object goes,
  // unless it is a pod still in its grace period, which its kubelet ends
  // (the server's ShouldDeleteDuringUpdate: no finalizers, grace 0).
  if (being_deleted(updated) && finalizers_of(updated).empty()
      && meta_integer(updated, "deletionGracePeriodSeconds", 0) == 0)
    return success(present(type, delete_for_good(key, propagation_policy::background)));
  const json before = key.plural_group == pods_resource ? existing : json();
  json stored = commit(key, std::move(updated), "MODIFIED");
  after_write(key, before, stored);
  return success(present(type, std::move(stored)));
}

store_result object_store::patch(const resource_type& type, const std::string& ns,
                                 const std::string& name, const json& patch,
                                 patch_type kind, bool status_subresource) {
  change_notifier notify{*this};
  if (kind == patch_type::strategic_merge && !is_builtin(type))
    return failure({415, "UnsupportedMediaType",
                    "the body of the request was in an unknown format - accepted media "
                    "types include: application/json-patch+json, "
                    "application/merge-patch+json, application/apply-patch+yaml",
                    nullptr});
  const auto key = key_of(type, ns, name);
  const json* existing = find(key);
  if (existing == nullptr)
    return failure(not_found(key));
  auto patched = apply_patch(*existing, patch, kind);
  if (!patched.ok())
    return patched;
  return update_object(type, key, std::move(*patched.value), status_subresource, false);
}

void object_store::create_system_namespaces() {
  change_notifier notify{*this};
  const auto* namespaces = type_of(namespaces_resource);
  for (const char* name : {"default", "kube-system", "kube-public", "kube-node-lease"})
    if (find({namespaces_resource, "", name}) == nullptr)
      create_object(*namespaces, "", {{"metadata", {{"name", name}}}});
}

} // namespace vigil::kube
