// A HealthEvent as a local CAF message, for every actor that passes one on
// (agent monitors, ingest, fleet, node). Declared once: the declaration is a
// template specialisation.
#pragma once

#include <vector>

#include <caf/allowed_unsafe_message_type.hpp>

#include "messages/health_event.hpp"

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(vigil::health_event)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<vigil::health_event>)
