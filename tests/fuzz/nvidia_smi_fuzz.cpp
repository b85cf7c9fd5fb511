// What the agent reads from nvidia-smi: `topo -m`, the --query-gpu CSV,
// `nvlink -R` remotes and the fabric query (with its health reading).
// The input's parts, cut at "\n--\n", feed one parser each.
#include "actors/agent/fabric/fabric_health.hpp"
#include "actors/agent/topology/topo_parser.hpp"
#include "tests/fuzz/fuzz_support.hpp"

using namespace vigil;
using namespace vigil::agent;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto in = vigil::fuzz::parts(vigil::fuzz::as_text(data, size), 4);
  (void)parse_topo_matrix(in[0]);
  (void)parse_gpu_query_csv(in[1]);
  (void)parse_nvlink_remotes(in[2]);
  if (auto rows = parse_fabric_query(in[3])) {
    fabric_health health("node-1", std::chrono::seconds{0});
    for (const auto& event : health.observe(*rows, wall_time{}))
      vigil::fuzz::require(decode_health_event(encode_health_event(event)).has_value(),
                           "a fabric event decodes");
  }
  return 0;
}
