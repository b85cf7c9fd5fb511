// Patches as the API server applies them: RFC 7386 merge patches, RFC 6902
// JSON patches, and strategic merge patches with the strategies of the
// built-in fields vigil touches (apply_patch is declared with the store).
#pragma once

#include <string>

#include "runtime/sim/kube/kube_object_store.hpp"

namespace vigil::kube {

/// How a strategic merge patch treats the list at a dotted path (list items
/// add no path segment: "spec.containers.env").
struct list_strategy {
  enum class kind { replace, merge_by_key, merge_primitives };
  kind how = kind::replace;
  std::string merge_key; ///< for merge_by_key: "type", "name", "uid", …
};

/// The strategy of the built-in list at `dotted_path`: status.conditions and
/// status.addresses merge by "type"; containers, volumes, env, imagePullSecrets
/// by "name"; ports by "containerPort"; metadata.ownerReferences by "uid";
/// metadata.finalizers merge as a set; everything else (spec.taints,
/// spec.tolerations, …) is replaced whole. Pod templates ("spec.template.spec…")
/// follow the pod's strategies.
list_strategy strategic_list_strategy(const std::string& dotted_path);

} // namespace vigil::kube
