// Discovery documents and the Table format of the Kubernetes API test server:
// what kubectl reads before it gets, describes, cordons and uncordons.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/sim/kube/kube_object_store.hpp"

namespace vigil::kube {

/// GET /version: major "1", minor "30", gitVersion "v1.30.0-vigil", platform, …
json version_document();

/// GET /api: APIVersions listing "v1".
json api_versions_document();

/// GET /apis: the APIGroupList of every group among `types` but the core one;
/// each group's versions ordered by Kubernetes' version priority, the first
/// preferred.
json api_group_list(const std::vector<resource_type>& types);

/// GET /api/v1 or /apis/<group>/<version>: the APIResourceList, with the
/// subresources `<plural>/status` (types with has_status) and pods/eviction;
/// null when no type has that group and version (the server answers 404).
json api_resource_list(const std::vector<resource_type>& types, const std::string& group,
                       const std::string& version);

/// What each row's `object` holds: kubectl's includeObject=None|Metadata|Object.
enum class table_object { none, metadata, full };

/// The meta.k8s.io/v1 Table for one object or a List, as served for
/// `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`: nodes (Name, Status,
/// Roles, Age, Version, wide columns), pods (Name, Ready, Status, Restarts,
/// Age, wide columns), namespaces (Name, Status, Age), others (Name, Age).
/// `now` (unix seconds) is the clock AGE counts to; the system clock if unset.
json to_table(const resource_type& type, const json& object_or_list,
              std::optional<std::int64_t> now = std::nullopt,
              table_object include = table_object::metadata);

/// The compact ages kubectl prints: "45s", "3m20s", "5h", "2d3h", "400d", "3y".
std::string human_duration(std::int64_t seconds);

/// True when version `a` has a higher Kubernetes version priority than `b`:
/// GA before beta before alpha, higher numbers first ("v2" > "v1" >
/// "v1beta2" > "v1alpha1"); names of other forms sort last, alphabetically.
bool higher_version_priority(const std::string& a, const std::string& b);

} // namespace vigil::kube
