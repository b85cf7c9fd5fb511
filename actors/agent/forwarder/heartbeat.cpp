#include "actors/agent/forwarder/heartbeat.hpp"

#include <utility>

#include <nlohmann/json.hpp>

namespace vigil::agent {

std::string encode_heartbeat(const heartbeat_options& options, wall_time sent_at) {
  nlohmann::json j;
  j["nodeName"] = options.node_name;
  j["agentVersion"] = options.agent_version;
  j["bootId"] = options.boot_id;
  j["sentAt"] = format_rfc3339(sent_at);
  const auto ms = options.interval.count();
  if (ms % 1000 == 0)
    j["intervalSeconds"] = ms / 1000;
  else
    j["intervalSeconds"] = static_cast<double>(ms) / 1000.0;
  if (options.gpus)
    j["gpus"] = encode_agent_gpu_facts(*options.gpus);
  return j.dump();
}

heartbeat_sender::heartbeat_sender(heartbeat_options options)
  : options_(std::move(options)) {}

std::optional<std::string> heartbeat_sender::start(wall_time now) {
  if (!enabled())
    return std::nullopt;
  if (in_flight_) {
    ++stats_.skipped;
    return std::nullopt;
  }
  in_flight_ = true;
  ++stats_.sent;
  return encode_heartbeat(options_, now);
}

heartbeat_news heartbeat_sender::complete(const post_result& result, wall_time now) {
  if (!in_flight_)
    return heartbeat_news::none;
  in_flight_ = false;
  if (result.outcome == post_outcome::accepted) {
    ++stats_.accepted;
    stats_.last_accepted = now;
    const bool was_failing = consecutive_failures_ > 0;
    consecutive_failures_ = 0;
    return was_failing ? heartbeat_news::recovered : heartbeat_news::none;
  }
  ++stats_.failed;
  return ++consecutive_failures_ == 1 ? heartbeat_news::failing : heartbeat_news::none;
}

} // namespace vigil::agent
