// A dcgm-exporter /metrics page: the Prometheus text parser, splitting of
// concatenated pages, and the DCGM check over successive scrapes of it.
#include "actors/agent/dcgm/dcgm_health.hpp"
#include "actors/agent/dcgm/prometheus_text.hpp"
#include "tests/fuzz/fuzz_support.hpp"

using namespace vigil;
using namespace vigil::agent;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto page = parse_prometheus_text(vigil::fuzz::as_text(data, size));
  dcgm_health health("node-1", dcgm_thresholds{});
  wall_time now{};
  for (auto& each : split_concatenated_pages(std::move(page))) {
    for (const auto& event : health.observe(each, now))
      vigil::fuzz::require(
        decode_health_event(encode_health_event(fit_to_limits(event))).has_value(),
        "a DCGM event decodes");
    now += std::chrono::seconds{30};
  }
  return 0;
}
