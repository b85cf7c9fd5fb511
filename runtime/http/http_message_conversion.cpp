// Between the wire and the handler: a parsed request as the handler sees it,
// and a handler's response as it is sent, with the fields only the server may
// set and those that are not valid HTTP left out.
#include "runtime/http/http_server_internal.hpp"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdint>
#include <string>

namespace vigil::http {

std::string request::header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? std::string{} : it->second;
}

response plain_text(int status, std::string text) {
  return response{status, "text/plain; charset=utf-8", {}, std::move(text)};
}

namespace detail {

namespace {

std::string lower(beast::string_view text) {
  std::string out(text);
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool valid_field_name(const std::string& name) {
  static constexpr beast::string_view extra = "!#$%&'*+-.^_`|~";
  if (name.empty())
    return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && extra.find(c) == extra.npos)
      return false;
  return true;
}

bool valid_field_value(const std::string& value) {
  return value.find_first_of(std::string("\r\n\0", 3)) == std::string::npos;
}

// Fields that frame the message: only the server may set them.
bool framing_field(const std::string& name) {
  return beast::iequals(name, "content-length") || beast::iequals(name, "connection")
         || beast::iequals(name, "transfer-encoding");
}

} // namespace

request to_request(wire_request&& message, const std::string& peer) {
  request r;
  r.method = std::string(message.method_string());
  r.target = std::string(message.target());
  const auto mark = r.target.find('?');
  r.path = r.target.substr(0, mark);
  r.query = mark == std::string::npos ? "" : r.target.substr(mark + 1);
  for (const auto& field : message) {
    const auto value = field.value();
    auto [it, added] = r.headers.emplace(lower(field.name_string()),
                                         std::string(value.data(), value.size()));
    if (!added)
      it->second.append(", ").append(value.data(), value.size());
  }
  r.body = std::move(message.body());
  r.peer = peer;
  return r;
}

void apply_limits(request_parser& parser, const server_options& options) {
  parser.header_limit(static_cast<std::uint32_t>(
    std::min<std::size_t>(options.max_header_bytes, UINT32_MAX)));
  parser.body_limit(static_cast<std::uint64_t>(options.max_body_bytes));
}

std::optional<unreadable_request> answer_to_read_error(error_code ec,
                                                       const server_options& options) {
  if (ec == wire::error::body_limit)
    return unreadable_request{413, "request body exceeds "
                                     + std::to_string(options.max_body_bytes) + " bytes"};
  if (ec == wire::error::header_limit)
    return unreadable_request{431, "request header exceeds "
                                     + std::to_string(options.max_header_bytes)
                                     + " bytes"};
  static const auto& parse_errors =
    wire::make_error_code(wire::error::bad_method).category();
  if (ec != wire::error::end_of_stream && ec.category() == parse_errors)
    return unreadable_request{400, "malformed request: " + ec.message()};
  return std::nullopt;
}

wire_response to_wire(response r, unsigned version, bool keep_alive, bool head) {
  if (r.status < 200 || r.status > 599)
    r = plain_text(500, "internal error: invalid status " + std::to_string(r.status));
  wire_response out{static_cast<wire::status>(r.status), version};
  if (!r.content_type.empty() && valid_field_value(r.content_type))
    out.set(wire::field::content_type, r.content_type);
  for (const auto& [name, value] : r.headers)
    if (valid_field_name(name) && valid_field_value(value) && !framing_field(name))
      out.insert(name, value);
  out.keep_alive(keep_alive);
  if (r.status != 204 && r.status != 304) { // RFC 9110 §8.6: these carry no length
    out.content_length(r.body.size());
    if (!head)
      out.body() = std::move(r.body);
  }
  return out;
}

std::string endpoint_text(const tcp::endpoint& endpoint) {
  const auto address = endpoint.address().to_string();
  const auto port = std::to_string(endpoint.port());
  return endpoint.address().is_v6() ? "[" + address + "]:" + port : address + ":" + port;
}

} // namespace detail
std::variant<request, unreadable_request> read_request(std::string_view bytes,
                                                       const server_options& options) {
  detail::request_parser parser;
  detail::apply_limits(parser, options);
  parser.eager(true);
  error_code ec;
  // put() takes a header only whole, and a body as far as it goes.
  while (!parser.is_done() && !bytes.empty()) {
    const auto used = parser.put(asio::buffer(bytes.data(), bytes.size()), ec);
    bytes.remove_prefix(used);
    if (ec == wire::error::need_more) {
      ec = {};
      if (used == 0)
        break;
      continue;
    }
    if (ec || used == 0)
      break;
  }
  if (!ec && !parser.is_done()) {
    parser.put_eof(ec);
    if (!ec && !parser.is_done())
      ec = wire::error::partial_message;
  }
  if (ec) {
    auto answer = detail::answer_to_read_error(ec, options);
    return answer ? *answer
                  : unreadable_request{400, "malformed request: " + ec.message()};
  }
  return detail::to_request(parser.release(), "read_request");
}

} // namespace vigil::http
