#include "actors/supervisor/message_stats.hpp"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>

#include <cxxabi.h>

#include <caf/type_nr.hpp>
#include <caf/uniform_type_info_map.hpp>

namespace vigil {

namespace {

constexpr auto rate_window = std::chrono::seconds{10};

bool same(const message_stats::key& a, const message_stats::key& b) {
  return a.empty == b.empty && a.atom == b.atom && a.type_nr == b.type_nr
         && a.type == b.type;
}

} // namespace

std::string message_stats::type_name(const key& k, const caf::actor_system& system) {
  if (k.empty)
    return "()";
  if (k.atom != static_cast<caf::atom_value>(0))
    return caf::to_string(k.atom);
  if (k.type_nr != 0)
    return caf::numbered_type_names[k.type_nr - 1];
  // CAF's name when the type is registered, else the C++ one ("???" is
  // CAF's answer for a type it does not know).
  const auto& name = system.types().portable_name(0, k.type);
  if (!name.empty() && name != "???")
    return name;
  if (k.type == nullptr)
    return "???";
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled{
    abi::__cxa_demangle(k.type->name(), nullptr, nullptr, &status), std::free};
  return status == 0 && demangled ? std::string{demangled.get()} : k.type->name();
}

message_stats::key message_stats::key_of(const caf::type_erased_tuple& content) {
  key k;
  if (content.empty())
    return k;
  k.empty = false;
  const auto rtti = content.type(0);
  k.type_nr = rtti.first;
  k.type = rtti.second;
  if (content.match_element<caf::atom_value>(0))
    k.atom = content.get_as<caf::atom_value>(0);
  return k;
}

std::size_t message_stats::bucket_of(std::uint64_t ns) {
  std::size_t bucket = 0;
  for (ns >>= 8; ns != 0 && bucket + 1 < bucket_count; ns >>= 1)
    ++bucket;
  return bucket;
}

double message_stats::quantile_micros(const entry& e, double q) {
  const auto wanted = static_cast<std::uint64_t>(q * static_cast<double>(e.count) + 0.5);
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < bucket_count; ++i) {
    seen += e.buckets[i];
    if (seen >= std::max<std::uint64_t>(wanted, 1)) {
      // The bucket's upper bound, never above the slowest seen.
      const auto upper = static_cast<double>(std::uint64_t{1} << (i + 8));
      return std::min(upper, static_cast<double>(e.max_ns)) / 1000.0;
    }
  }
  return static_cast<double>(e.max_ns) / 1000.0;
}

void message_stats::record(const key& k, clock::duration spent, clock::time_point now) {
  const auto ns = static_cast<std::uint64_t>(std::max<std::int64_t>(
    0, std::chrono::duration_cast<std::chrono::nanoseconds>(spent).count()));
  auto it = std::find_if(entries_.begin(), entries_.end(),
                         [&](const entry& e) { return same(e.k, k); });
  if (it == entries_.end()) {
    entries_.push_back({k, 0, 0, {}});
    it = entries_.end() - 1;
  }
  ++it->count;
  it->max_ns = std::max(it->max_ns, ns);
  ++it->buckets[bucket_of(ns)];
  ++handled_;
  if (window_count_ == 0 && window_start_ == clock::time_point{})
    window_start_ = now;
  ++window_count_;
  if (const auto elapsed = now - window_start_; elapsed >= rate_window) {
    last_rate_ =
      static_cast<double>(window_count_) / std::chrono::duration<double>(elapsed).count();
    window_start_ = now;
    window_count_ = 0;
  }
}

double message_stats::per_second(clock::time_point now) const {
  if (last_rate_ >= 0)
    return last_rate_;
  if (window_count_ == 0)
    return 0;
  const auto elapsed =
    std::max<clock::duration>(now - window_start_, std::chrono::seconds{1});
  return static_cast<double>(window_count_)
         / std::chrono::duration<double>(elapsed).count();
}

nlohmann::json message_stats::summary(const caf::actor_system& system,
                                      clock::time_point now,
                                      std::size_t max_types) const {
  std::vector<const entry*> order;
  for (const auto& e : entries_)
    order.push_back(&e);
  std::stable_sort(order.begin(), order.end(),
                   [](const entry* a, const entry* b) { return a->count > b->count; });
  if (order.size() > max_types)
    order.resize(max_types);
  auto types = nlohmann::json::array();
  for (const auto* e : order)
    types.push_back({{"type", type_name(e->k, system)},
                     {"count", e->count},
                     {"p50Micros", quantile_micros(*e, 0.5)},
                     {"p99Micros", quantile_micros(*e, 0.99)},
                     {"maxMicros", static_cast<double>(e->max_ns) / 1000.0}});
  return {
    {"handled", handled_}, {"perSecond", per_second(now)}, {"types", std::move(types)}};
}

} // namespace vigil
