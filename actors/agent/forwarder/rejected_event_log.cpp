#include "actors/agent/forwarder/rejected_event_log.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include <sys/stat.h>

#include <nlohmann/json.hpp>

namespace vigil::agent {

std::string encode_rejected_event(const rejected_event& event, wall_time at) {
  nlohmann::ordered_json j;
  j["rejectedAt"] = format_rfc3339(at);
  j["id"] = event.id;
  j["reason"] = event.error;
  auto sent = nlohmann::json::parse(event.encoded, nullptr, false);
  if (sent.is_discarded())
    j["event"] = event.encoded;
  else
    j["event"] = std::move(sent);
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

rejected_event_log::rejected_event_log(std::string path, std::size_t max_bytes)
  : path_(std::move(path)), max_bytes_(max_bytes) {}

status rejected_event_log::append(const rejected_event& event, wall_time at) {
  const auto record = encode_rejected_event(event, at) + "\n";
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0
      && static_cast<std::size_t>(st.st_size) + record.size() > max_bytes_
      && std::rename(path_.c_str(), (path_ + ".1").c_str()) != 0)
    return failure{path_, std::string("cannot rotate: ") + std::strerror(errno)};
  std::FILE* file = std::fopen(path_.c_str(), "ab");
  if (file == nullptr)
    return failure{path_, std::string("cannot open: ") + std::strerror(errno)};
  const bool written =
    std::fwrite(record.data(), 1, record.size(), file) == record.size();
  const bool closed = std::fclose(file) == 0;
  if (!written || !closed)
    return failure{path_, std::string("cannot write: ") + std::strerror(errno)};
  return ok();
}

} // namespace vigil::agent
