// The agent's whole kernel-log path (vigil parse kmsg's and the XID
// monitor's): line split, timestamps, XID/SXid parsing with the NVLink5
// decode, catalog rules, the mlx5_core patterns, cancellation and burst
// grouping, with GPUs and NVSwitch links known from gpu_metadata.
#include <memory>
#include <sstream>

#include "actors/agent/xid/parse_kernel_log.hpp"
#include "tests/fuzz/fuzz_support.hpp"

using namespace vigil;
using namespace vigil::agent;

namespace {

const char* const metadata_json = R"({
  "version": "1.0", "node_name": "node-1", "driver_version": "575.57.08",
  "gpus": [
    {"gpu_id": 0, "uuid": "GPU-11111111-2222-3333-4444-555555555555",
     "pci_address": "0000:18:00.0", "nvlinks": [
       {"link_id": 0, "remote_pci_address": "0000:c1:00.0", "remote_link_id": 5}]},
    {"gpu_id": 1, "uuid": "GPU-66666666-7777-8888-9999-000000000000",
     "pci_address": "0000:2a:00.0"}],
  "nvswitches": ["0000:c1:00.0"]
})";

const parse_options& options() {
  static const parse_options o = [] {
    parse_options o;
    auto catalog = xid_catalog::load(xid_catalog::default_dir());
    vigil::fuzz::require(catalog.has_value(), "config/xid_catalog.csv loads");
    o.catalog = std::move(*catalog);
    o.node_name = "node-1";
    o.boot_id = "boot";
    if (auto metadata = decode_gpu_metadata(metadata_json))
      o.metadata = std::move(*metadata);
    if (auto patterns = load_nic_driver_patterns(xid_catalog::default_dir()))
      if (auto check = nic_driver_check::make(std::move(*patterns)))
        o.nic_check = std::make_shared<const nic_driver_check>(std::move(*check));
    if (auto rules = xid_cancellations::load(xid_catalog::default_dir()))
      o.cancellations = std::make_shared<const xid_cancellations>(std::move(*rules));
    o.sysfs_root = "/nonexistent-sysfs";
    o.syslog_year = 2026;
    return o;
  }();
  return o;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::istringstream in{std::string(vigil::fuzz::as_text(data, size))};
  auto result = parse_kernel_log(in, options());
  vigil::fuzz::require(result.counters.lines >= result.counters.nvidia_lines,
                       "NVIDIA lines are lines");
  for (std::size_t i = 0; i < result.events.size(); ++i) {
    vigil::fuzz::require(result.events[i].node_name == "node-1", "events name the node");
    // Whatever the agent makes of a line, the control plane must take once
    // the forwarder fitted it to the limits (a
    // few per input: the round trip costs more than the parsing).
    if (i < 4)
      vigil::fuzz::require(
        decode_health_event(encode_health_event(fit_to_limits(result.events[i])))
          .has_value(),
        "every event the parser emits decodes");
  }
  return 0;
}
