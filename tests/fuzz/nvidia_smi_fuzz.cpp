// What the agent reads from nvidia-smi: `topo -m`, the --query-gpu CSV,
// `nvlink -R` remotes, the fabric query (with its health reading) and
// `nvlink --status`.
// The input's parts, cut at "\n--\n", feed one parser each.
#include <cstdio>

#include "actors/agent/fabric/fabric_health.hpp"
#include "actors/agent/fabric/nvlink_status.hpp"
#include "actors/agent/topology/topo_parser.hpp"
#include "tests/fuzz/fuzz_support.hpp"

using namespace vigil;
using namespace vigil::agent;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto in = vigil::fuzz::parts(vigil::fuzz::as_text(data, size), 5);
  (void)parse_topo_matrix(in[0]);
  (void)parse_gpu_query_csv(in[1]);
  (void)parse_nvlink_remotes(in[2]);
  std::vector<std::string> link_faults;
  if (auto links = parse_nvlink_status(in[4]))
    link_faults = nvlink_shortfalls(*links);
  if (auto rows = parse_fabric_query(in[3])) {
    fabric_health health("node-1", std::chrono::seconds{0});
    // What the agent sends (fitted by its forwarder) the control plane takes.
    for (const auto& event :
         health.observe(*rows, wall_time{}, {2, false}, link_faults)) {
      auto decoded = decode_health_event(encode_health_event(fit_to_limits(event)));
      if (!decoded)
        std::fprintf(stderr, "%s\n", decoded.error().to_string().c_str());
      vigil::fuzz::require(decoded.has_value(), "a fabric event decodes");
    }
  }
  return 0;
}
