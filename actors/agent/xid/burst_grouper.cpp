#include "actors/agent/xid/burst_grouper.hpp"

#include <algorithm>
#include <utility>

namespace vigil::agent {

namespace {

std::string entity_value(const health_event& event, std::string_view type) {
  for (const auto& e : event.entities)
    if (e.type == type)
      return e.value;
  return "";
}

/// The GPU an event is about: its UUID where known, else its PCI address.
std::string gpu_identity(const health_event& event) {
  auto uuid = entity_value(event, "GPU_UUID");
  return uuid.empty() ? entity_value(event, "PCI") : uuid;
}

} // namespace

burst_grouper::burst_grouper(std::chrono::nanoseconds window) : window_(window) {}

std::string burst_grouper::burst_key(const health_event& event) {
  std::string key = event.node_name;
  key += '\x1f';
  key += event.component_class;
  key += '\x1f';
  key += gpu_identity(event);
  key += '\x1f';
  key += entity_value(event, "NVLINK");
  key += '\x1f';
  key += entity_value(event, "NIC"); // the NIC driver check's events
  for (const auto& code : event.error_codes) {
    key += '\x1f';
    key += code;
  }
  return key;
}

closed_burst burst_grouper::close(burst&& b) {
  closed_burst out{std::move(b.first), b.count};
  out.event.metadata["burstCount"] = std::to_string(b.count);
  out.event.metadata["burstFirstSeen"] = format_rfc3339(b.first_seen);
  out.event.metadata["burstLastSeen"] = format_rfc3339(b.last_seen);
  return out;
}

std::optional<health_event> burst_grouper::offer(health_event event, wall_time at,
                                                 std::vector<closed_burst>& closed) {
  if (event.is_healthy) {
    // A healthy event for a GPU ends that GPU's bursts; one without entities
    // (a whole-check recovery) ends every burst of its node and check.
    auto gpu = gpu_identity(event);
    auto uuid = entity_value(event, "GPU_UUID");
    auto pci = entity_value(event, "PCI");
    for (auto it = open_.begin(); it != open_.end();) {
      const auto& first = it->second.first;
      bool same_node = first.node_name == event.node_name;
      auto open_gpu = gpu_identity(first);
      // A healthy event naming codes (a cancellation) ends those codes' bursts only.
      bool codes_match =
        event.error_codes.empty()
        || std::any_of(first.error_codes.begin(), first.error_codes.end(),
                       [&](const std::string& code) {
                         return std::find(event.error_codes.begin(),
                                          event.error_codes.end(), code)
                                != event.error_codes.end();
                       });
      bool match = same_node && codes_match
                   && (gpu.empty() ? first.check_name == event.check_name
                                   : open_gpu == uuid || open_gpu == pci);
      if (match) {
        closed.push_back(close(std::move(it->second)));
        it = open_.erase(it);
      } else {
        ++it;
      }
    }
    return event;
  }
  auto key = burst_key(event);
  auto it = open_.find(key);
  if (it != open_.end() && at - it->second.first_seen < window_) {
    ++it->second.count;
    if (at > it->second.last_seen)
      it->second.last_seen = at;
    return std::nullopt;
  }
  if (it != open_.end()) {
    closed.push_back(close(std::move(it->second)));
    open_.erase(it);
  }
  event.metadata["burstCount"] = "1";
  burst fresh{event, at, at, 1};
  open_.emplace(std::move(key), std::move(fresh));
  return event;
}

void burst_grouper::expire(wall_time now, std::vector<closed_burst>& closed) {
  for (auto it = open_.begin(); it != open_.end();) {
    if (now - it->second.first_seen >= window_) {
      closed.push_back(close(std::move(it->second)));
      it = open_.erase(it);
    } else {
      ++it;
    }
  }
}

void burst_grouper::close_all(std::vector<closed_burst>& closed) {
  for (auto& [key, b] : open_)
    closed.push_back(close(std::move(b)));
  open_.clear();
}

} // namespace vigil::agent
