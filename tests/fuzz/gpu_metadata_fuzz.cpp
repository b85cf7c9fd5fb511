// gpu_metadata.json in vigil's and NVSentinel's forms (GPUs, NVLinks,
// NVSwitches, driver version), and the PCI lookups the parsers make with it.
#include "actors/agent/topology/gpu_metadata.hpp"
#include "tests/fuzz/fuzz_support.hpp"

using namespace vigil::agent;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto text = vigil::fuzz::as_text(data, size);
  (void)normalise_pci_address(text.substr(0, 64));
  auto metadata = decode_gpu_metadata(text);
  if (!metadata)
    return 0;
  for (const auto& gpu : metadata->gpus)
    (void)find_gpu_by_pci(*metadata, gpu.pci_address);
  return 0;
}
