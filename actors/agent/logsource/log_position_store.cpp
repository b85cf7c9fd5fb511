#include "actors/agent/logsource/log_position_store.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

namespace vigil::agent {

namespace {

using json = nlohmann::json;

constexpr int position_format_version = 1;

std::string directory_of(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string trim(std::string text) {
  const char* blanks = " \t\r\n";
  auto first = text.find_first_not_of(blanks);
  if (first == std::string::npos)
    return "";
  return text.substr(first, text.find_last_not_of(blanks) - first + 1);
}

bool write_all(int fd, const std::string& text) {
  const char* data = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    auto n = ::write(fd, data, left);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    data += n;
    left -= static_cast<std::size_t>(n);
  }
  return true;
}

// nlohmann's typed getters throw on a wrong type; decode_log_position catches
// that and names the field it was reading.
log_position decode_fields(const json& j, std::string& field) {
  log_position p;
  field = "version";
  if (j.at("version").get<int>() != position_format_version)
    throw std::invalid_argument("unsupported version");
  field = "source";
  const auto kind = parse_log_source_kind(j.at("source").get<std::string>());
  if (!kind)
    throw std::invalid_argument("unknown source kind");
  p.kind = *kind;
  field = "boot_id";
  p.boot_id = j.at("boot_id").get<std::string>();
  field = "kmsg_seq";
  if (j.contains("kmsg_seq"))
    p.kmsg_seq = j.at("kmsg_seq").get<std::uint64_t>();
  field = "journal_cursor";
  if (j.contains("journal_cursor"))
    p.journal_cursor = j.at("journal_cursor").get<std::string>();
  field = "file_inode";
  if (j.contains("file_inode"))
    p.file_inode = j.at("file_inode").get<std::uint64_t>();
  field = "file_offset";
  if (j.contains("file_offset"))
    p.file_offset = j.at("file_offset").get<std::uint64_t>();
  return p;
}

} // namespace

std::string_view to_string(log_source_kind kind) {
  switch (kind) {
    case log_source_kind::kmsg: return "kmsg";
    case log_source_kind::journald: return "journald";
    case log_source_kind::syslog_file: return "syslog_file";
  }
  return "kmsg";
}

std::optional<log_source_kind> parse_log_source_kind(std::string_view text) {
  for (auto kind :
       {log_source_kind::kmsg, log_source_kind::journald, log_source_kind::syslog_file})
    if (to_string(kind) == text)
      return kind;
  return std::nullopt;
}

log_start decide_log_start(const std::optional<log_position>& saved, log_source_kind kind,
                           const std::string& boot_id) {
  if (!saved || boot_id.empty() || saved->boot_id.empty())
    return log_start::fresh;
  if (saved->boot_id != boot_id)
    return log_start::rebooted;
  return saved->kind == kind ? log_start::resumed : log_start::fresh;
}

std::string encode_log_position(const log_position& p) {
  json j{{"version", position_format_version},
         {"source", std::string(to_string(p.kind))},
         {"boot_id", p.boot_id}};
  if (p.kmsg_seq)
    j["kmsg_seq"] = *p.kmsg_seq;
  if (!p.journal_cursor.empty())
    j["journal_cursor"] = p.journal_cursor;
  if (p.file_inode) {
    j["file_inode"] = *p.file_inode;
    j["file_offset"] = p.file_offset;
  }
  return j.dump() + "\n";
}

expected<log_position> decode_log_position(std::string_view text) {
  auto j = json::parse(text, nullptr, false);
  if (j.is_discarded())
    return failure{"", "not valid JSON"};
  if (!j.is_object())
    return failure{"", "not a JSON object"};
  std::string field;
  try {
    return decode_fields(j, field);
  } catch (const std::exception& e) {
    return failure{field, e.what()};
  }
}

expected<std::string> read_boot_id_file(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return failure{path, std::string("cannot read the boot ID: ") + std::strerror(errno)};
  std::ostringstream text;
  text << in.rdbuf();
  auto id = trim(text.str());
  if (id.empty())
    return failure{path, "empty boot ID"};
  return id;
}

log_position_store::load_result log_position_store::load() const {
  std::ifstream in(path_, std::ios::binary);
  if (!in) {
    if (errno == ENOENT)
      return {};
    return {std::nullopt, failure{path_, std::string("unreadable (")
                                           + std::strerror(errno) + "); starting fresh"}};
  }
  std::ostringstream text;
  text << in.rdbuf();
  auto position = decode_log_position(text.str());
  if (!position)
    return {std::nullopt, failure{path_, "corrupt (" + position.error().to_string()
                                           + "); starting fresh"}};
  return {std::move(*position), std::nullopt};
}

status log_position_store::save(const log_position& position) const {
  const std::string temp = path_ + ".tmp";
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return failure{path_, std::string("cannot write: ") + std::strerror(errno)};
  const bool written = write_all(fd, encode_log_position(position)) && ::fsync(fd) == 0;
  const int saved_errno = errno;
  ::close(fd);
  if (!written) {
    std::remove(temp.c_str());
    return failure{path_, std::string("write failed: ") + std::strerror(saved_errno)};
  }
  if (std::rename(temp.c_str(), path_.c_str()) != 0) {
    auto problem = std::string("cannot replace: ") + std::strerror(errno);
    std::remove(temp.c_str());
    return failure{path_, problem};
  }
  int dir = ::open(directory_of(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  return ok();
}

} // namespace vigil::agent
