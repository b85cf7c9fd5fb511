// vigil.yaml as every process loads it: unknown keys, wrong types and values
// out of range must fail naming the key, never crash.
#include <string>

#include "runtime/config.hpp"
#include "tests/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto config = vigil::parse_config(std::string(vigil::fuzz::as_text(data, size)));
  if (!config)
    vigil::fuzz::require(!config.error().to_string().empty(), "a failure names the key");
  return 0;
}
