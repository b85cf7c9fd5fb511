// A watch response body as the API server streams it, cut into chunks at
// places the input picks (its first byte), framed into lines and decoded as
// the gateway does; the lines must not depend on where the chunks end.
#include <string>
#include <vector>

#include "runtime/kube/watch_stream.hpp"
#include "tests/fuzz/fuzz_support.hpp"

using namespace vigil::kube;

namespace {

std::vector<std::string> lines_of(std::string_view body, std::size_t piece) {
  watch_line_splitter splitter(4096);
  std::vector<std::string> lines;
  for (std::size_t at = 0; at < body.size(); at += piece)
    if (!splitter.feed(body.substr(at, piece), [&](std::string_view line) {
          lines.emplace_back(line);
          return true;
        })) {
      lines.emplace_back("<over the limit>");
      break;
    }
  return lines;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0)
    return 0;
  const std::size_t piece = 1 + data[0] % 64;
  const auto body = vigil::fuzz::as_text(data + 1, size - 1);
  auto lines = lines_of(body, piece);
  vigil::fuzz::require(lines == lines_of(body, body.size() + 1),
                       "lines do not depend on chunk borders");
  for (const auto& line : lines) {
    auto event = decode_watch_line(line);
    if (!event)
      continue;
    vigil::fuzz::require(event->object.is_object(),
                         "a watch event's object is an object");
    (void)event->object.dump();
  }
  return 0;
}
