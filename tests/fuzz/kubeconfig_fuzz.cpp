// A kubeconfig as `vigil control --kubeconfig` reads it: clusters, users,
// contexts, inline base64 PEM data and file references (checked, not read).
#include <string>

#include "runtime/kube/kube_config.hpp"
#include "tests/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string yaml(vigil::fuzz::as_text(data, size));
  auto connection = vigil::kube::parse_kubeconfig(yaml, "fuzz.kubeconfig");
  if (!connection)
    vigil::fuzz::require(!connection.error().to_string().empty(), "a failure says what");
  (void)vigil::kube::base64_decode(yaml.substr(0, 256));
  return 0;
}
