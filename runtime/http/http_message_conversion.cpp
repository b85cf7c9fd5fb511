// Between the wire and the handler: a parsed request as the handler sees it,
// and a handler's response as it is sent, with the fields only the server may
// set and those that are not valid HTTP left out.
#include "runtime/http/http_server_internal.hpp"

#include <cctype>
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
} // namespace vigil::http
