#include "actors/control/rules/circuit_breaker.hpp"

#include <algorithm>
#include <cmath>

namespace vigil::control {

std::string_view to_string(breaker_refusal refusal) {
  switch (refusal) {
    case breaker_refusal::none: return "none";
    case breaker_refusal::tripped: return "tripped";
    case breaker_refusal::trips_now: return "trips_now";
    case breaker_refusal::pool_budget: return "pool_budget";
  }
  return "none";
}

circuit_breaker::circuit_breaker(breaker_config config) : config_(std::move(config)) {}

void circuit_breaker::prune(wall_time now) {
  while (!cordons_.empty() && cordons_.front().first <= now - config_.window) {
    counted_.erase(cordons_.front().second);
    cordons_.pop_front();
  }
}

std::optional<std::string> cordon_limit_exceeded(const breaker_config& config,
                                                 std::size_t count,
                                                 std::size_t gpu_nodes) {
  if (config.max_cordoned_nodes && count > *config.max_cordoned_nodes)
    return std::to_string(count) + " nodes cordoned within the window, limit "
           + std::to_string(*config.max_cordoned_nodes);
  // count / gpu_nodes > P %, kept exact in integers-as-doubles; never the
  // window's first cordon.
  if (gpu_nodes > 0 && count > 1
      && static_cast<double>(count) * 100.0
           > config.max_cordoned_percent * static_cast<double>(gpu_nodes))
    return std::to_string(count) + " of " + std::to_string(gpu_nodes)
           + " GPU nodes cordoned within the window, limit "
           + std::to_string(config.max_cordoned_percent) + "%";
  return std::nullopt;
}

double circuit_breaker::utilisation(std::size_t gpu_nodes, wall_time now) {
  const auto count = static_cast<double>(cordons_in_window(now));
  double used = 0.0;
  if (auto limit = config_.max_cordoned_nodes)
    used = *limit > 0 ? count / static_cast<double>(*limit) : (count > 0 ? 1.0 : 0.0);
  // The percentage limit allows floor(P % of gpu_nodes) cordons.
  if (gpu_nodes > 0) {
    const double allowed =
      std::floor(config_.max_cordoned_percent * static_cast<double>(gpu_nodes) / 100.0);
    used = std::max(used, allowed > 0 ? count / allowed : (count > 0 ? 1.0 : 0.0));
  }
  return used;
}

breaker_refusal circuit_breaker::admit_cordon(const std::string& node,
                                              std::size_t gpu_nodes, wall_time now) {
  if (tripped())
    return breaker_refusal::tripped;
  prune(now);
  if (counted_.count(node) > 0)
    return breaker_refusal::none;
  if (auto reason = cordon_limit_exceeded(config_, cordons_.size() + 1, gpu_nodes)) {
    tripped_at_ = now;
    trip_reason_ = *reason;
    return breaker_refusal::trips_now;
  }
  cordons_.emplace_back(now, node);
  counted_.insert(node);
  return breaker_refusal::none;
}

breaker_refusal circuit_breaker::admit_drain() const {
  return tripped() ? breaker_refusal::tripped : breaker_refusal::none;
}

breaker_refusal circuit_breaker::admit_remediation(const std::string& node,
                                                   const std::string& pool) {
  if (tripped())
    return breaker_refusal::tripped;
  auto held = in_flight_.find(node);
  const bool holds = held != in_flight_.end() && held->second == pool;
  if (!pool_admits(holds ? 0 : in_flight(pool), holds, config_.max_concurrent_per_pool))
    return breaker_refusal::pool_budget;
  in_flight_[node] = pool;
  return breaker_refusal::none;
}

void circuit_breaker::occupy(const std::string& node, const std::string& pool) {
  in_flight_[node] = pool;
}

void circuit_breaker::finish_remediation(const std::string& node) {
  in_flight_.erase(node);
}

void circuit_breaker::reset(wall_time at) {
  reset_at_ = std::max(reset_at_, at);
  tripped_at_.reset();
  trip_reason_.clear();
  cordons_.clear();
  counted_.clear();
}

void circuit_breaker::restore_cordon(wall_time at, const std::string& node) {
  if (at <= reset_at_)
    return;
  // Pruned at the row's time, which keeps a whole journal's replay small (a
  // row stamped by a replica whose clock runs ahead prunes by that much
  // early: milliseconds against minutes).
  prune(at);
  if (counted_.count(node) > 0)
    return;
  auto later = std::upper_bound(cordons_.begin(), cordons_.end(), at,
                                [](wall_time t, const auto& c) { return t < c.first; });
  cordons_.emplace(later, at, node);
  counted_.insert(node);
}

void circuit_breaker::restore_trip(wall_time at, std::string reason) {
  tripped_at_ = at;
  trip_reason_ = std::move(reason);
}

std::size_t circuit_breaker::cordons_in_window(wall_time now) {
  prune(now);
  return cordons_.size();
}

std::size_t circuit_breaker::in_flight(const std::string& pool) const {
  return static_cast<std::size_t>(
    std::count_if(in_flight_.begin(), in_flight_.end(),
                  [&](const auto& entry) { return entry.second == pool; }));
}

std::string pool_of(const std::map<std::string, std::string>& labels,
                    const std::string& label) {
  auto i = labels.find(label);
  return i != labels.end() ? i->second : std::string();
}

} // namespace vigil::control
