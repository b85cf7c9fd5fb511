#include "actors/agent/forwarder/event_spool.hpp"

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace vigil::agent {

namespace {

constexpr char spool_magic[] = "VGSPOOL1";
constexpr std::size_t magic_size = 8;
constexpr std::size_t header_size = 10;
constexpr std::uint8_t state_live = 0;
constexpr std::uint8_t state_acknowledged = 1;
constexpr std::uint8_t state_dropped = 2;
constexpr std::uint8_t flag_fatal = 1;

std::array<std::uint32_t, 256> make_crc_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k)
      c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    table[i] = c;
  }
  return table;
}

void put_u32(char* out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

std::uint32_t get_u32(const char* in) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<std::uint32_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  return v;
}

std::uint32_t record_crc(std::uint8_t flags, const char* payload, std::size_t size) {
  auto crc = crc32_update(0, &flags, 1);
  return crc32_update(crc, payload, size);
}

// Writes all of `size` bytes at `offset`; false with errno set otherwise.
bool pwrite_all(int fd, const char* data, std::size_t size, std::uint64_t offset) {
  while (size > 0) {
    auto n = ::pwrite(fd, data, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    data += n;
    size -= static_cast<std::size_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
  return true;
}

// Reads up to `size` bytes at `offset`; returns how many (short at EOF), -1 on error.
long pread_all(int fd, char* data, std::size_t size, std::uint64_t offset) {
  std::size_t done = 0;
  while (done < size) {
    auto n = ::pread(fd, data + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return -1;
    if (n == 0)
      break;
    done += static_cast<std::size_t>(n);
  }
  return static_cast<long>(done);
}

bool fsync_directory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return false;
  bool synced = ::fsync(fd) == 0;
  ::close(fd);
  return synced;
}

std::size_t record_bytes(std::size_t payload) {
  return header_size + payload;
}

} // namespace

std::uint32_t crc32_update(std::uint32_t crc, const void* data, std::size_t size) {
  static const auto table = make_crc_table();
  auto bytes = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (std::size_t i = 0; i < size; ++i)
    crc = table[(crc ^ bytes[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

event_spool::event_spool(spool_options options)
  : options_(std::move(options)), path_(options_.directory + "/spool.log") {}

event_spool::~event_spool() {
  if (fd_ >= 0)
    ::close(fd_);
}

failure event_spool::io_failure(const std::string& file, const char* what) const {
  return failure{file, std::string(what) + ": " + std::strerror(errno)};
}

status event_spool::open() {
  if (fd_ >= 0)
    return ok();
  if (::mkdir(options_.directory.c_str(), 0700) != 0 && errno != EEXIST)
    return io_failure(options_.directory, "cannot create the spool directory");
  std::remove((path_ + ".tmp").c_str());
  if (auto st = create_or_open_file(); !st)
    return st;
  if (auto st = scan(); !st) {
    ::close(fd_);
    fd_ = -1;
    return st;
  }
  return maybe_compact();
}

status event_spool::create_or_open_file() {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd_ < 0)
    return io_failure(path_, "cannot open");
  char magic[magic_size] = {};
  const long got = pread_all(fd_, magic, magic_size, 0);
  if (got < 0)
    return io_failure(path_, "cannot read");
  const auto have = static_cast<std::size_t>(got);
  if (have == magic_size && std::memcmp(magic, spool_magic, magic_size) == 0)
    return ok();
  // Empty, or a magic cut short by a crash at creation: (re)initialise.
  if (std::memcmp(magic, spool_magic, have) != 0) {
    ::close(fd_);
    fd_ = -1;
    return failure{path_, "not a vigil spool file (bad magic); refusing to overwrite"};
  }
  if (::ftruncate(fd_, 0) != 0 || !pwrite_all(fd_, spool_magic, magic_size, 0)
      || ::fsync(fd_) != 0 || !fsync_directory(options_.directory))
    return io_failure(path_, "cannot initialise");
  return ok();
}

status event_spool::scan() {
  struct stat st {};
  if (::fstat(fd_, &st) != 0)
    return io_failure(path_, "cannot stat");
  const auto file_size = static_cast<std::uint64_t>(st.st_size);
  std::uint64_t offset = magic_size;
  std::string payload;
  std::string problem;
  while (offset < file_size) {
    char header[header_size];
    if (pread_all(fd_, header, header_size, offset) != static_cast<long>(header_size)) {
      problem = "record header cut short";
      break;
    }
    const std::uint32_t length = get_u32(header);
    const auto flags = static_cast<std::uint8_t>(header[8]);
    const auto state = static_cast<std::uint8_t>(header[9]);
    if (offset + record_bytes(length) > file_size) {
      problem = "record payload cut short";
      break;
    }
    payload.resize(length);
    if (pread_all(fd_, payload.data(), length, offset + header_size)
          != static_cast<long>(length)
        || record_crc(flags, payload.data(), length) != get_u32(header + 4)
        || (flags & ~flag_fatal) != 0 || state > state_dropped) {
      problem = "record checksum mismatch";
      break;
    }
    const std::size_t bytes = record_bytes(length);
    if (state == state_live) {
      const auto id = next_id_++;
      live_.emplace(id, record_ref{offset, length, (flags & flag_fatal) != 0});
      if ((flags & flag_fatal) == 0) {
        non_fatal_.insert(id);
        non_fatal_bytes_ += bytes;
      }
      live_bytes_ += bytes;
    } else {
      dead_bytes_ += bytes;
    }
    offset += bytes;
  }
  end_offset_ = offset;
  if (offset == file_size)
    return ok();
  stats_.discarded_bytes += file_size - offset;
  recovery_problem_ =
    failure{path_, problem + " at byte " + std::to_string(offset) + "; discarded "
                     + std::to_string(file_size - offset) + " bytes (torn or corrupt)"};
  if (::ftruncate(fd_, static_cast<off_t>(offset)) != 0 || ::fsync(fd_) != 0)
    return io_failure(path_, "cannot truncate the torn tail");
  return ok();
}

spool_append_result event_spool::append(const spool_entry& entry) {
  return append_all({entry}).front();
}

std::vector<spool_append_result>
event_spool::append_all(const std::vector<spool_entry>& entries) {
  std::vector<spool_append_result> results(entries.size());
  if (fd_ < 0) {
    for (auto& r : results)
      r = {spool_append_status::io_error, 0, failure{path_, "spool is not open"}};
    return results;
  }
  bool changed = false;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    auto& result = results[i];
    const std::size_t bytes = record_bytes(entries[i].encoded.size());
    if (bytes > options_.max_bytes || entries[i].encoded.size() > UINT32_MAX) {
      result.status = spool_append_status::too_large;
      ++stats_.refused;
      continue;
    }
    if (!make_room(bytes, result.dropped, changed)) {
      result.status = spool_append_status::refused_full;
      ++stats_.refused;
      continue;
    }
    if (auto st = write_record(entries[i]); !st) {
      result = {spool_append_status::io_error, result.dropped, st.error()};
      continue;
    }
    changed = true;
  }
  if (!changed)
    return results;
  if (auto st = sync("cannot sync the append"); !st) {
    for (auto& r : results)
      if (r.status == spool_append_status::appended)
        r = {spool_append_status::io_error, r.dropped, st.error()};
    return results;
  }
  if (auto st = maybe_compact(); !st)
    recovery_problem_ = st.error();
  return results;
}

// Drops the oldest non-fatal live events until a record of `bytes` fits; drops
// nothing and returns false when even dropping all of them would not do.
bool event_spool::make_room(std::size_t bytes, std::size_t& dropped, bool& changed) {
  auto fits = [&](std::size_t count, std::size_t live) {
    return count + 1 <= options_.max_events && live + bytes <= options_.max_bytes;
  };
  if (!fits(fatal_count(), live_bytes_ - non_fatal_bytes_))
    return false;
  while (!fits(live_.size(), live_bytes_)) {
    if (!mark_dead(*non_fatal_.begin(), state_dropped))
      return false;
    ++dropped;
    ++stats_.dropped_non_fatal;
    changed = true;
  }
  return true;
}

status event_spool::write_record(const spool_entry& entry) {
  const auto length = static_cast<std::uint32_t>(entry.encoded.size());
  const std::uint8_t flags = entry.fatal ? flag_fatal : 0;
  std::string buffer(header_size, '\0');
  put_u32(buffer.data(), length);
  put_u32(buffer.data() + 4, record_crc(flags, entry.encoded.data(), length));
  buffer[8] = static_cast<char>(flags);
  buffer[9] = static_cast<char>(state_live);
  buffer += entry.encoded;
  if (!pwrite_all(fd_, buffer.data(), buffer.size(), end_offset_)) {
    auto err = io_failure(path_, "cannot append");
    if (::ftruncate(fd_, static_cast<off_t>(end_offset_)) != 0)
      err.what += " (and cannot cut the partial record)";
    return err;
  }
  const auto id = next_id_++;
  live_.emplace(id, record_ref{end_offset_, length, entry.fatal});
  if (!entry.fatal) {
    non_fatal_.insert(id);
    non_fatal_bytes_ += buffer.size();
  }
  live_bytes_ += buffer.size();
  end_offset_ += buffer.size();
  ++stats_.appended;
  return ok();
}

status event_spool::mark_dead(std::uint64_t id, std::uint8_t state) {
  auto it = live_.find(id);
  if (it == live_.end())
    return ok();
  const char byte = static_cast<char>(state);
  if (!pwrite_all(fd_, &byte, 1, it->second.offset + 9))
    return io_failure(path_, "cannot mark a record");
  const std::size_t bytes = record_bytes(it->second.length);
  live_bytes_ -= bytes;
  dead_bytes_ += bytes;
  if (non_fatal_.erase(id) != 0)
    non_fatal_bytes_ -= bytes;
  live_.erase(it);
  return ok();
}

status event_spool::sync(const char* what) {
  if (::fdatasync(fd_) != 0)
    return io_failure(path_, what);
  return ok();
}

expected<std::vector<spooled_event>> event_spool::peek(std::size_t n) const {
  if (fd_ < 0)
    return failure{path_, "spool is not open"};
  std::vector<spooled_event> out;
  for (auto it = live_.begin(); it != live_.end() && out.size() < n; ++it) {
    spooled_event event{it->first, std::string(it->second.length, '\0'),
                        it->second.fatal};
    if (pread_all(fd_, event.encoded.data(), it->second.length,
                  it->second.offset + header_size)
        != static_cast<long>(it->second.length))
      return io_failure(path_, "cannot read a record");
    out.push_back(std::move(event));
  }
  return out;
}

status event_spool::pop_front(std::size_t n) {
  std::vector<std::uint64_t> ids;
  for (auto it = live_.begin(); it != live_.end() && ids.size() < n; ++it)
    ids.push_back(it->first);
  return acknowledge(ids);
}

status event_spool::pop_through(std::uint64_t last_id) {
  std::vector<std::uint64_t> ids;
  for (auto it = live_.begin(); it != live_.end() && it->first <= last_id; ++it)
    ids.push_back(it->first);
  return acknowledge(ids);
}

status event_spool::acknowledge(const std::vector<std::uint64_t>& ids) {
  if (fd_ < 0)
    return failure{path_, "spool is not open"};
  if (ids.empty())
    return ok();
  for (auto id : ids) {
    if (auto st = mark_dead(id, state_acknowledged); !st)
      return st;
    ++stats_.acknowledged;
  }
  if (auto st = sync("cannot sync the acknowledgement"); !st)
    return st;
  return maybe_compact();
}

status event_spool::maybe_compact() {
  if (live_.empty() && end_offset_ > magic_size) {
    if (::ftruncate(fd_, magic_size) != 0 || ::fdatasync(fd_) != 0)
      return io_failure(path_, "cannot truncate the drained spool");
    end_offset_ = magic_size;
    dead_bytes_ = 0;
    return ok();
  }
  if (dead_bytes_ >= options_.compact_min_dead_bytes && dead_bytes_ > live_bytes_)
    return compact();
  return ok();
}

status event_spool::compact() {
  const std::string temp = path_ + ".tmp";
  int out = ::open(temp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (out < 0)
    return io_failure(temp, "cannot create");
  auto give_up = [&](const char* what) {
    auto err = io_failure(temp, what);
    ::close(out);
    std::remove(temp.c_str());
    return err;
  };
  std::uint64_t offset = magic_size;
  if (!pwrite_all(out, spool_magic, magic_size, 0))
    return give_up("cannot write");
  std::map<std::uint64_t, record_ref> moved;
  std::string buffer;
  for (const auto& [id, ref] : live_) {
    buffer.resize(record_bytes(ref.length));
    if (pread_all(fd_, buffer.data(), buffer.size(), ref.offset)
        != static_cast<long>(buffer.size()))
      return give_up("cannot copy a record");
    if (!pwrite_all(out, buffer.data(), buffer.size(), offset))
      return give_up("cannot write");
    moved.emplace(id, record_ref{offset, ref.length, ref.fatal});
    offset += buffer.size();
  }
  if (::fsync(out) != 0)
    return give_up("cannot sync");
  if (std::rename(temp.c_str(), path_.c_str()) != 0)
    return give_up("cannot replace the spool");
  fsync_directory(options_.directory);
  ::close(fd_);
  fd_ = out;
  live_ = std::move(moved);
  end_offset_ = offset;
  dead_bytes_ = 0;
  ++stats_.compactions;
  return ok();
}

} // namespace vigil::agent
