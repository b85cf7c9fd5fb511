// The forwarder's heartbeat: a small POST to <control>/v1/heartbeat every
// interval, events or not, so the control plane can tell an agent that
// stopped from a node with nothing to report. Never spooled or retried: the
// next heartbeat is the retry, and a stale one says nothing worth keeping.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "actors/agent/forwarder/http_event_poster.hpp"
#include "messages/agent_gpu_facts.hpp"
#include "messages/wall_time.hpp"

namespace vigil::agent {

struct heartbeat_options {
  std::chrono::milliseconds interval{60'000}; ///< between heartbeats; 0: none
  std::string node_name;                      ///< "nodeName"
  std::string agent_version;                  ///< "agentVersion"
  std::string boot_id;                        ///< "bootId": the host's, at start
  /// "gpus": what gpu_metadata.json says of the GPUs; absent without metadata
  std::optional<agent_gpu_facts> gpus;
};

/// The body, one JSON object:
/// {"nodeName":…,"agentVersion":…,"bootId":…,"sentAt":RFC 3339,"intervalSeconds":N,
///  "gpus":{…}} (N an integer, or a fraction for sub-second intervals):
/// intervalSeconds lets the control plane judge staleness per agent; "gpus"
/// (messages/agent_gpu_facts.hpp) what may be reset alone.
std::string encode_heartbeat(const heartbeat_options& options, wall_time sent_at);

struct heartbeat_stats {
  std::uint64_t sent = 0;     ///< POSTs made
  std::uint64_t accepted = 0; ///< answered 2xx
  std::uint64_t failed = 0;   ///< anything else: no answer, 4xx, 5xx
  std::uint64_t skipped = 0;  ///< due while the previous one was still out
  std::optional<wall_time> last_accepted;
};

/// What complete() found worth a log line.
enum class heartbeat_news {
  none,      ///< as before (accepted again, or failing again)
  failing,   ///< the first failure after a success (or at start)
  recovered, ///< the first success after failures
};

/// One heartbeat out at a time; the caller's timer says when.
class heartbeat_sender {
public:
  explicit heartbeat_sender(heartbeat_options options);

  bool enabled() const { return options_.interval.count() > 0; }
  const heartbeat_options& options() const { return options_; }
  std::chrono::milliseconds interval() const { return options_.interval; }

  /// The body to POST now; nullopt while the previous one is out (counted
  /// as skipped) or when heartbeats are off.
  std::optional<std::string> start(wall_time now);

  /// The outcome of the POST that start() asked for.
  heartbeat_news complete(const post_result& result, wall_time now);

  bool in_flight() const { return in_flight_; }
  unsigned consecutive_failures() const { return consecutive_failures_; }
  const heartbeat_stats& stats() const { return stats_; }

private:
  heartbeat_options options_;
  bool in_flight_ = false;
  unsigned consecutive_failures_ = 0;
  heartbeat_stats stats_;
};

} // namespace vigil::agent
