// HealthEvent decode + validate, and encode: the per-event cost at ingest.
#include <benchmark/benchmark.h>

#include "messages/health_event.hpp"

namespace {

// A typical XID event (~600 bytes) as an agent sends it.
const std::string typical_event =
  R"({"id":"node-7/xid/48/GPU-455d8f70-2051-db6c-0430-ffc457bff834/1761219482207323127","agent":"vigil-agent","componentClass":"GPU","checkName":"SysLogsXIDError","isFatal":true,"isHealthy":false,"message":"ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR: Xid (PCI:0000:03:00): 48, pid=91237, name=nv-hostengine","recommendedAction":"COMPONENT_RESET","errorCode":["48"],"entitiesImpacted":[{"entityType":"PCI","entityValue":"0000:03:00"},{"entityType":"GPU_UUID","entityValue":"GPU-455d8f70-2051-db6c-0430-ffc457bff834"}],"metadata":{"count":"1","serial":"1324023049334"},"generatedTimestamp":"2025-10-23T11:38:02.207323127Z","nodeName":"gpu-node-7","processingStrategy":"EXECUTE_REMEDIATION"})";

void decode_and_validate(benchmark::State& state) {
  for (auto _ : state) {
    auto event = vigil::decode_health_event(typical_event);
    if (!event.has_value())
      state.SkipWithError(event.error().to_string().c_str());
    benchmark::DoNotOptimize(event);
  }
  state.SetBytesProcessed(
    static_cast<int64_t>(state.iterations() * typical_event.size()));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(decode_and_validate);

void encode(benchmark::State& state) {
  const auto event = *vigil::decode_health_event(typical_event);
  for (auto _ : state)
    benchmark::DoNotOptimize(vigil::encode_health_event(event));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(encode);

} // namespace

BENCHMARK_MAIN();
