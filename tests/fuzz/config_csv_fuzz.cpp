// The CSV files under config/ that operators edit: the XID catalog with the
// NVLink5 decode, the mlx5_core patterns (read, not compiled) and the XID
// cancellations. The input's parts, cut at "\n--\n", are the four files.
#include "actors/agent/xid/nic_driver_check.hpp"
#include "actors/agent/xid/xid_cancellation.hpp"
#include "actors/agent/xid/xid_catalog.hpp"
#include "tests/fuzz/fuzz_support.hpp"

using namespace vigil::agent;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto in = vigil::fuzz::parts(vigil::fuzz::as_text(data, size), 4);
  if (auto catalog = xid_catalog::parse(in[0], in[1]))
    for (int code = 0; code < 200; ++code)
      (void)catalog->find(code);
  (void)parse_nic_driver_patterns(in[2]);
  (void)xid_cancellations::parse(in[3]);
  (void)parse_xid_bucket(in[0].substr(0, 32));
  (void)parse_bit_pattern(in[1].substr(0, 64));
  return 0;
}
