// Which nodes' agents stopped reporting: every GPU node is expected to run
// vigil's agent, whose heartbeat (POST /v1/heartbeat) or events prove it
// alive. A node silent for the window is flagged once, with a condition and
// an Event, never a remediation: a dead agent is not a dead GPU. Time is
// passed in; the fleet actor owns one.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "messages/agent_gpu_facts.hpp"
#include "messages/expected.hpp"
#include "messages/wall_time.hpp"

namespace vigil::control {

/// The body of POST /v1/heartbeat, as the agent's forwarder sends it.
struct agent_heartbeat {
  std::string node_name;
  std::string agent_version;
  std::string boot_id;
  std::optional<wall_time> sent_at;
  double interval_seconds = 0;
  std::optional<agent_gpu_facts> gpus; ///< from agents that collected metadata
};

/// Reads a heartbeat; errors name the field (`nodeName: missing or empty`).
expected<agent_heartbeat> decode_heartbeat(std::string_view body);

class agent_liveness {
public:
  /// `silence`: how long a node may be quiet; 0 turns the check off.
  explicit agent_liveness(std::chrono::seconds silence) : silence_(silence) {}

  /// A GPU node exists: its agent is expected from `now` on (unless heard).
  void watch(const std::string& node, wall_time now);
  /// The node is gone (or no GPU node any more): nothing is expected of it.
  void forget(const std::string& node);
  /// The node's agent spoke (a heartbeat or an event). True when it had been
  /// flagged silent: the caller clears the flag.
  bool heard(const std::string& node, wall_time now);
  /// Nodes quiet for the window and not flagged yet, each with the time it
  /// was last heard of (or expected from); they are flagged now.
  std::vector<std::pair<std::string, wall_time>> newly_silent(wall_time now);

  std::size_t silent() const;
  std::chrono::seconds window() const { return silence_; }

private:
  struct entry {
    wall_time last{}; ///< last heard of, or expected from
    bool flagged = false;
  };
  std::chrono::seconds silence_;
  std::map<std::string, entry> nodes_;
};

} // namespace vigil::control
