// A JSON document parsed once and then only read, by as many actors as it is
// sent to: a Node passes from the watch stream through the fleet to its node
// actor without being written out and parsed again on the way. Local only.
#pragma once

#include <memory>

#include <caf/allowed_unsafe_message_type.hpp>
#include <nlohmann/json_fwd.hpp>

namespace vigil {

/// Immutable once shared: nlohmann::json's const members read without
/// writing, so actors on different threads may read it at once.
using shared_json = std::shared_ptr<const nlohmann::json>;

} // namespace vigil

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(vigil::shared_json)
