#include "runtime/sim/kube/kube_disruption.hpp"

#include <algorithm>
#include <cstdlib>

namespace vigil::kube {

namespace {

bool is_being_deleted(const json& pod) {
  auto metadata = pod.find("metadata");
  return metadata != pod.end() && metadata->is_object()
         && metadata->contains("deletionTimestamp")
         && !(*metadata)["deletionTimestamp"].is_null();
}

// An IntOrString scaled against `total`, percentages rounded up as the
// controller does; nullopt when malformed.
std::optional<std::int64_t> scaled_value(const json& value, std::int64_t total) {
  if (value.is_number_integer())
    return value.get<std::int64_t>();
  if (!value.is_string())
    return std::nullopt;
  const auto text = value.get<std::string>();
  if (text.size() < 2 || text.back() != '%')
    return std::nullopt;
  char* end = nullptr;
  const auto percent = std::strtoll(text.c_str(), &end, 10);
  if (end != text.c_str() + text.size() - 1 || percent < 0)
    return std::nullopt;
  return (percent * total + 99) / 100;
}

std::optional<std::int64_t> desired_healthy(const json& spec, std::int64_t expected,
                                            std::string& why) {
  if (spec.contains("maxUnavailable") && !spec["maxUnavailable"].is_null()) {
    auto unavailable = scaled_value(spec["maxUnavailable"], expected);
    if (!unavailable)
      why = "invalid maxUnavailable " + spec["maxUnavailable"].dump();
    return unavailable ? std::optional{std::max<std::int64_t>(0, expected - *unavailable)}
                       : std::nullopt;
  }
  if (spec.contains("minAvailable") && !spec["minAvailable"].is_null()) {
    auto available = scaled_value(spec["minAvailable"], expected);
    if (!available)
      why = "invalid minAvailable " + spec["minAvailable"].dump();
    return available;
  }
  return std::int64_t{0};
}

json allowed_condition(const json& previous, bool allowed, const std::string& reason,
                       const std::string& message, std::int64_t generation,
                       const std::string& now_timestamp) {
  const std::string status = allowed ? "True" : "False";
  std::string since = now_timestamp;
  if (previous.is_array())
    for (const auto& condition : previous)
      if (condition.value("type", "") == "DisruptionAllowed"
          && condition.value("status", "") == status)
        since = condition.value("lastTransitionTime", now_timestamp);
  return {{"type", "DisruptionAllowed"},
          {"status", status},
          {"reason", reason},
          {"message", message},
          {"observedGeneration", generation},
          {"lastTransitionTime", since}};
}

} // namespace

bool pod_is_ready(const json& pod) {
  if (!pod.contains("status") || !pod["status"].is_object())
    return false;
  const auto conditions = pod["status"].value("conditions", json::array());
  return std::any_of(conditions.begin(), conditions.end(), [](const json& condition) {
    return condition.is_object() && condition.value("type", "") == "Ready"
           && condition.value("status", "") == "True";
  });
}

bool pod_is_healthy(const json& pod) {
  return pod_is_ready(pod) && !is_being_deleted(pod);
}

bool pod_is_finished(const json& pod) {
  const auto phase = pod.contains("status") && pod["status"].is_object()
                       ? pod["status"].value("phase", "")
                       : std::string{};
  return phase == "Succeeded" || phase == "Failed";
}

std::optional<disruption_budget_status>
compute_disruption_status(const json& pdb, const std::vector<const json*>& selected_pods,
                          std::string& why) {
  disruption_budget_status status;
  for (const json* pod : selected_pods) {
    if (pod_is_finished(*pod))
      continue;
    ++status.expected_pods;
    if (pod_is_healthy(*pod))
      ++status.current_healthy;
  }
  const auto spec = pdb.value("spec", json::object());
  auto desired = desired_healthy(spec, status.expected_pods, why);
  if (!desired)
    return std::nullopt;
  status.desired_healthy = *desired;
  status.disruptions_allowed =
    std::max<std::int64_t>(0, status.current_healthy - status.desired_healthy);
  return status;
}

json disruption_status_object(const json& pdb,
                              const std::optional<disruption_budget_status>& computed,
                              const std::string& why, const std::string& now_timestamp) {
  json status =
    pdb.contains("status") && pdb["status"].is_object() ? pdb["status"] : json::object();
  const auto generation =
    pdb.value("metadata", json::object()).value("generation", std::int64_t{1});
  const auto previous = status.value("conditions", json::array());
  const auto numbers = computed.value_or(disruption_budget_status{});
  status["observedGeneration"] = generation;
  status["expectedPods"] = numbers.expected_pods;
  status["currentHealthy"] = numbers.current_healthy;
  status["desiredHealthy"] = numbers.desired_healthy;
  status["disruptionsAllowed"] = computed ? numbers.disruptions_allowed : 0;
  const bool allowed = computed && numbers.disruptions_allowed > 0;
  const std::string reason = !computed ? "SyncFailed"
                             : allowed ? "SufficientPods"
                                       : "InsufficientPods";
  status["conditions"] = json::array({allowed_condition(
    previous, allowed, reason, computed ? "" : why, generation, now_timestamp)});
  return status;
}

} // namespace vigil::kube
