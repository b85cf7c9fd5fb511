// What the object store's parts share: the Status failures the API server
// sends, metadata accessors and RFC 3339 timestamps. Internal to the store and
// the discovery documents.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "runtime/sim/kube/kube_object_store.hpp"

namespace vigil::kube::detail {

/// "pods", "jobs.batch": how the server names a resource in messages and keys.
std::string plural_group_of(const resource_type& type);

store_result failure(api_status status);
store_result success(json value);

/// 404 NotFound: `pods "x" not found`.
api_status not_found(const object_key& key);
/// 409 AlreadyExists: `pods "x" already exists`.
api_status already_exists(const object_key& key);
/// 409 Conflict: `Operation cannot be fulfilled on pods "x": <why>`.
api_status conflict(const object_key& key, const std::string& why);
/// The `why` of a stale resourceVersion.
extern const char* const object_modified;
api_status bad_request(std::string message);
/// 422 Invalid: `Pod "x" is invalid: <field>: <what>: <detail>` with one cause
/// (`Job.batch "x"` for a kind with a group; `what` "Required value",
/// "Forbidden" or "Invalid value").
api_status invalid(const resource_type& type, const std::string& name,
                   const std::string& field, const std::string& what,
                   const std::string& detail);
/// 410 Expired.
api_status expired(std::string message);

/// metadata, made an object if it is not one.
json& metadata_of(json& object);
/// metadata.<field> when it is a string, else "".
std::string meta_string(const json& object, const std::string& field);
/// metadata.<field> when it is an integer, else `fallback`.
std::int64_t meta_integer(const json& object, const std::string& field,
                          std::int64_t fallback);
bool being_deleted(const json& object);
/// metadata.finalizers, [] when absent.
json finalizers_of(const json& object);
bool has_finalizer(const json& object, const std::string& finalizer);
/// Has an ownerReference with `uid` (with blockOwnerDeletion, if `blocking_only`).
bool owned_by(const json& object, const std::string& uid, bool blocking_only);

/// The object as served for `type`: apiVersion and kind set.
json present(const resource_type& type, json object);
/// An item of a LIST: without kind and apiVersion for a built-in type (the
/// API server leaves them out, kubernetes/kubernetes#3030), as present()
/// for a custom resource.
json present_listed(const resource_type& type, json object);

/// "2024-05-01T12:00:00Z".
std::string format_timestamp(std::int64_t unix_seconds);
/// Reads "2024-05-01T12:00:00Z" (fractions and offsets accepted); nullopt when malformed.
std::optional<std::int64_t> parse_timestamp(const std::string& text);

} // namespace vigil::kube::detail

namespace vigil::kube {

/// Calls on_change once, at the end of a public operation that changed anything.
class object_store::change_notifier {
public:
  explicit change_notifier(object_store& store)
    : store_(store), before_(store.resource_version_) {}
  change_notifier(const change_notifier&) = delete;
  change_notifier& operator=(const change_notifier&) = delete;
  ~change_notifier() {
    if (store_.resource_version_ != before_ && store_.on_change_)
      store_.on_change_();
  }

private:
  object_store& store_;
  std::uint64_t before_;
};

} // namespace vigil::kube
