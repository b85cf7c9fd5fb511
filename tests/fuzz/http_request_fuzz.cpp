// The HTTP server's request reading (Beast's parser with the server's limits,
// chunked bodies, then the conversion every handler sees), and the answer the
// server would give a request it cannot read.
#include <variant>

#include "runtime/http/http_server.hpp"
#include "tests/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  vigil::http::server_options options;
  options.max_body_bytes = 4096;
  options.max_header_bytes = 1024;
  auto read = vigil::http::read_request(vigil::fuzz::as_text(data, size), options);
  if (auto* bad = std::get_if<vigil::http::unreadable_request>(&read)) {
    vigil::fuzz::require(bad->status == 400 || bad->status == 413 || bad->status == 431,
                         "an unreadable request is 400, 413 or 431");
    return 0;
  }
  const auto& request = std::get<vigil::http::request>(read);
  vigil::fuzz::require(request.body.size() <= options.max_body_bytes,
                       "no body over the limit reaches a handler");
  vigil::fuzz::require(request.path.find('?') == std::string::npos,
                       "the path has no query");
  (void)request.header("content-type");
  return 0;
}
