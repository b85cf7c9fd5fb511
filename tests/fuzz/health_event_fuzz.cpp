// One HealthEvent document as ingest decodes it (any key spelling, enums as
// names or numbers); a valid one must survive encode → decode unchanged.
#include "messages/health_event.hpp"
#include "tests/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto event = vigil::decode_health_event(vigil::fuzz::as_text(data, size));
  if (!event) {
    vigil::fuzz::require(!event.error().to_string().empty(), "a failure says what");
    return 0;
  }
  auto again = vigil::decode_health_event(vigil::encode_health_event(*event));
  vigil::fuzz::require(again.has_value(), "an encoded event decodes");
  vigil::fuzz::require(*again == *event, "decode(encode(e)) == e");
  return 0;
}
