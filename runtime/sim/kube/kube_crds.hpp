// CustomResourceDefinitions in the Kubernetes API test server: as on a real
// server, creating one makes its resource served (discovery, REST) with the
// status the apiextensions controller writes once the names are accepted.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/sim/kube/kube_object_store.hpp"

namespace vigil::kube {

bool is_crd_type(const resource_type& type);

/// What is wrong with a CRD a real server would refuse (metadata.name not
/// `<plural>.<group>`, no versions, no storage version); nullopt when fine.
std::optional<std::string> crd_problem(const json& crd);

/// One type per served version of the CRD.
std::vector<resource_type> crd_resource_types(const json& crd);

/// status.conditions Established and NamesAccepted (True), acceptedNames and
/// storedVersions.
json established_crd_status(const json& crd);

} // namespace vigil::kube
