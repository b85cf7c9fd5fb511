#include "runtime/kube/kube_api.hpp"

#include <cctype>
#include <charconv>

#include <nlohmann/json.hpp>

namespace vigil::kube {

std::string resource_path(const api_resource& resource, std::string_view ns,
                          std::string_view name, std::string_view subresource) {
  std::string path = resource.group.empty()
                       ? "/api/" + resource.version
                       : "/apis/" + resource.group + "/" + resource.version;
  if (resource.namespaced && !ns.empty())
    path.append("/namespaces/").append(ns);
  path.append("/").append(resource.plural);
  if (!name.empty())
    path.append("/").append(name);
  if (!name.empty() && !subresource.empty())
    path.append("/").append(subresource);
  return path;
}

std::string query_escape(std::string_view value) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(value.size());
  for (unsigned char c : value) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

std::string kube_error::to_string() const {
  std::string out =
    status == 0 ? std::string("transport error") : "HTTP " + std::to_string(status);
  if (!reason.empty())
    out += " " + reason;
  if (!message.empty())
    out += ": " + message;
  return out;
}

kube_error error_from_response(const kube_response& response,
                               std::optional<std::chrono::seconds> retry_after) {
  kube_error err{response.status, "", "", retry_after};
  auto status = nlohmann::json::parse(response.body, nullptr, false);
  if (status.is_object() && status.value("kind", "") == "Status") {
    if (auto r = status.find("reason"); r != status.end() && r->is_string())
      err.reason = r->get<std::string>();
    if (auto m = status.find("message"); m != status.end() && m->is_string())
      err.message = m->get<std::string>();
    // The server's own hint (details.retryAfterSeconds) when no header came.
    auto details = status.find("details");
    if (!err.retry_after && details != status.end() && details->is_object())
      if (auto s = details->find("retryAfterSeconds");
          s != details->end() && s->is_number_integer())
        err.retry_after = std::chrono::seconds{s->get<long>()};
  } else {
    err.message = response.body.substr(0, 200);
  }
  if (err.reason.empty())
    err.reason = "HTTP" + std::to_string(response.status);
  return err;
}

std::optional<std::chrono::seconds> parse_retry_after(std::string_view value) {
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.front())))
    value.remove_prefix(1);
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back())))
    value.remove_suffix(1);
  if (value.empty())
    return std::nullopt;
  long seconds = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
  if (ec != std::errc{} || end != value.data() + value.size())
    return std::chrono::seconds{1}; // an HTTP date: retry soon
  return std::chrono::seconds{std::max(0L, seconds)};
}

} // namespace vigil::kube
