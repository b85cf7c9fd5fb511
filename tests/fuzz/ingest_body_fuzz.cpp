// Request bodies of POST /v1/events (NDJSON, a JSON array, one pretty-printed
// object) and POST /v1/alertmanager, under each content type ingest takes.
// The first byte picks the endpoint and content type; the rest is the body.
#include <array>

#include "actors/control/ingest/alertmanager.hpp"
#include "actors/control/ingest/ingest_logic.hpp"
#include "tests/fuzz/fuzz_support.hpp"

using namespace vigil;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0)
    return 0;
  static constexpr std::array<std::string_view, 4> content_types{
    "", "application/json", "application/x-ndjson; charset=utf-8", "text/plain"};
  const auto content_type = content_types[data[0] % content_types.size()];
  const bool alertmanager = (data[0] & 0x80) != 0;
  const auto body = vigil::fuzz::as_text(data + 1, size - 1);
  control::ingest_limits limits;
  limits.max_body_bytes = 1 << 20;
  limits.max_line_bytes = 16 << 10;
  limits.max_events_per_request = 500;
  auto items = alertmanager ? control::parse_alertmanager_body(
                 body, content_type, control::alertmanager_mapping{}, limits)
                            : control::parse_ingest_body(body, content_type, limits);
  if (!items) {
    const int status = control::request_failure_status(items.error());
    vigil::fuzz::require(status == 400 || status == 413 || status == 415,
                         "a whole-request failure is 400, 413 or 415");
    return 0;
  }
  vigil::fuzz::require(items->size() <= limits.max_events_per_request,
                       "no more items than the limit");
  for (const auto& item : *items)
    if (item.event) {
      vigil::fuzz::require(!item.event->id.empty(), "an accepted event has an id");
      vigil::fuzz::require(
        decode_health_event(encode_health_event(*item.event)).has_value(),
        "an accepted event re-encodes");
    }
  return 0;
}
