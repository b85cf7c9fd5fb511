// The node annotation latestFaultRemediationState (seed 000 §4.1): which CR
// carried out each equivalence group, so a restart does not remediate twice.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "actors/control/remediation/remediation_plan.hpp"
#include "messages/expected.hpp"
#include "messages/wall_time.hpp"

namespace vigil::control {

/// The annotation key on the Node object.
inline constexpr std::string_view remediation_state_annotation =
  "vigil.dev/latestFaultRemediationState";

/// One equivalence group's entry. A reset covered by a reboot in flight is
/// recorded with the reboot's kind and CR (seed 000 §4.3 case 4).
struct remediation_record {
  remediation_kind kind = remediation_kind::none;
  std::string maintenance_cr; ///< the CR's name
  wall_time created_at{};

  friend bool operator==(const remediation_record& a, const remediation_record& b) {
    return a.kind == b.kind && a.maintenance_cr == b.maintenance_cr
           && a.created_at == b.created_at;
  }
};

struct remediation_state {
  std::map<std::string, remediation_record> groups; ///< by equivalence group

  friend bool operator==(const remediation_state& a, const remediation_state& b) {
    return a.groups == b.groups;
  }
};

/// {"equivalenceGroups":{"restart":{"kind":"RebootNode","maintenanceCR":"…",
/// "createdAt":"2025-11-13T17:18:32.163469826Z"},…}}, compact, keys sorted.
std::string encode_remediation_state(const remediation_state& state);

/// Parses the annotation; "" gives an empty state. Unknown fields are ignored
/// (a newer vigil may add some); a failure names the field
/// ("equivalenceGroups.restart.createdAt").
expected<remediation_state> decode_remediation_state(std::string_view json);

/// Records that `group` was carried out by `record` (replacing an older entry).
void remember(remediation_state& state, const std::string& group,
              remediation_record record);

/// The entry for `group`, or nullptr.
const remediation_record* find_group(const remediation_state& state,
                                     std::string_view group);

} // namespace vigil::control
