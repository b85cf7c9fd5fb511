// Prometheus exposition for every vigil process, on Debian's prometheus-cpp
// (core only: registry, metric families, text serializer; our own HTTP
// server serves /metrics). Two kinds of figures meet here:
// - instruments that live in a prometheus::Registry and are updated where the
//   event happens (the janitor's gpu_reset_* and reboot_node_* families);
// - figures an actor reports when asked (a JSON snapshot or a stats struct),
//   turned into metric families at scrape time with family_builder, because
//   the actor's state is its own (no shared counters into an actor's state).
// A scrape gathers both into one list and serializes it once.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

namespace vigil::metrics {

using family_list = std::vector<prometheus::MetricFamily>;
using label_pairs = std::vector<std::pair<std::string, std::string>>;

/// One family of counters or gauges read from a snapshot at scrape time.
class family_builder {
public:
  family_builder(std::string name, std::string help, prometheus::MetricType type);

  /// One series; the labels in the order given.
  family_builder& sample(double value, const label_pairs& labels = {});

  /// The family; the builder is spent afterwards.
  prometheus::MetricFamily build();

private:
  prometheus::MetricFamily family_;
};

/// A family of one unlabelled counter (or gauge).
prometheus::MetricFamily counter(std::string name, std::string help, double value);
prometheus::MetricFamily gauge(std::string name, std::string help, double value);

/// Appends `more` to `all`.
void append(family_list& all, family_list more);

/// The Prometheus text format (0.0.4) of `families`, in their order.
std::string exposition(const family_list& families);

/// The content type that goes with exposition().
inline constexpr const char* content_type = "text/plain; version=0.0.4; charset=utf-8";

} // namespace vigil::metrics
