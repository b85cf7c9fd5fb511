#include "runtime/metrics/metrics.hpp"

#include <iterator>
#include <sstream>

#include <prometheus/text_serializer.h>

namespace vigil::metrics {

family_builder::family_builder(std::string name, std::string help,
                               prometheus::MetricType type) {
  family_.name = std::move(name);
  family_.help = std::move(help);
  family_.type = type;
}

family_builder& family_builder::sample(double value, const label_pairs& labels) {
  prometheus::ClientMetric m;
  for (const auto& [name, label_value] : labels)
    m.label.push_back({name, label_value});
  switch (family_.type) {
    case prometheus::MetricType::Counter: m.counter.value = value; break;
    case prometheus::MetricType::Gauge: m.gauge.value = value; break;
    default: m.untyped.value = value; break;
  }
  family_.metric.push_back(std::move(m));
  return *this;
}

prometheus::MetricFamily family_builder::build() {
  return std::move(family_);
}

prometheus::MetricFamily counter(std::string name, std::string help, double value) {
  return family_builder(std::move(name), std::move(help), prometheus::MetricType::Counter)
    .sample(value)
    .build();
}

prometheus::MetricFamily gauge(std::string name, std::string help, double value) {
  return family_builder(std::move(name), std::move(help), prometheus::MetricType::Gauge)
    .sample(value)
    .build();
}

void append(family_list& all, family_list more) {
  all.insert(all.end(), std::make_move_iterator(more.begin()),
             std::make_move_iterator(more.end()));
}

std::string exposition(const family_list& families) {
  std::ostringstream out;
  prometheus::TextSerializer{}.Serialize(out, families);
  return out.str();
}

} // namespace vigil::metrics
