#include "actors/agent/nic/nic_sysfs.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "actors/agent/topology/gpu_metadata.hpp"

namespace vigil::agent {

namespace {

// sysfs attribute files are one short line; anything longer is not one.
constexpr size_t max_file_bytes = 65536;

struct file_text {
  std::string text;
  int error = 0; // errno of the failed open/read, 0 on success
};

// `path` relative to `dir_fd` (or absolute, or relative to the working
// directory with AT_FDCWD): opening relative to a device's directory saves
// walking the whole sysfs path for every attribute.
file_text read_file(int dir_fd, const std::string& path) {
  file_text out;
  int fd = ::openat(dir_fd, path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    out.error = errno;
    return out;
  }
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      out.error = errno;
      break;
    }
    if (n == 0)
      break;
    out.text.append(buf, static_cast<size_t>(n));
    if (out.text.size() > max_file_bytes) {
      out.error = EFBIG;
      break;
    }
    // A short read is the end: sysfs hands over an attribute in one read,
    // and a regular file reads short only at its end. Saves a read per file.
    if (static_cast<size_t>(n) < sizeof buf)
      break;
  }
  ::close(fd);
  return out;
}

std::string trim(std::string_view s) {
  const char* ws = " \t\r\n";
  auto b = s.find_first_not_of(ws);
  if (b == std::string_view::npos)
    return "";
  auto e = s.find_last_not_of(ws);
  return std::string(s.substr(b, e - b + 1));
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool link_exists(int dir_fd, const std::string& path) {
  struct stat st;
  return ::fstatat(dir_fd, path.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
}

// The entries of `path` (relative to `dir_fd`), sorted, without . and ..
std::optional<std::vector<std::string>> list_dir(int dir_fd, const std::string& path,
                                                 int& error) {
  int fd = ::openat(dir_fd, path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* dir = fd < 0 ? nullptr : ::fdopendir(fd);
  if (dir == nullptr) {
    error = errno;
    if (fd >= 0)
      ::close(fd);
    return std::nullopt;
  }
  std::vector<std::string> names;
  while (const dirent* entry = ::readdir(dir)) {
    std::string name = entry->d_name;
    if (name != "." && name != "..")
      names.push_back(std::move(name));
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

std::string link_basename(int dir_fd, const std::string& path) {
  char buf[4096];
  ssize_t n = ::readlinkat(dir_fd, path.c_str(), buf, sizeof buf - 1);
  if (n <= 0)
    return "";
  std::string target(buf, static_cast<size_t>(n));
  while (!target.empty() && target.back() == '/')
    target.pop_back();
  auto slash = target.find_last_of('/');
  return slash == std::string::npos ? target : target.substr(slash + 1);
}

std::string errno_text(int error) {
  return std::strerror(error);
}

bool all_digits(std::string_view s) {
  return !s.empty()
         && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Reads one device's files, noting whether the device vanished underneath.
class device_reader {
public:
  /// `known`: what an earlier full read of this device found, to read only
  /// what changes; `learn`: where to record what a full read finds.
  device_reader(const std::string& sysfs_root, const std::string& name,
                std::vector<nic_diagnostic>& diagnostics,
                const known_nic_device* known = nullptr,
                known_nic_device* learn = nullptr)
    : sysfs_root_(sysfs_root), dir_(sysfs_root + "/class/infiniband/" + name),
      dir_fd_(::open(dir_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)),
      diagnostics_(diagnostics), known_(known), learn_(learn) {
    device_.name = name;
  }
  ~device_reader() {
    if (dir_fd_ >= 0)
      ::close(dir_fd_);
  }
  device_reader(const device_reader&) = delete;
  device_reader& operator=(const device_reader&) = delete;

  nic_device read() {
    if (known_ != nullptr && still_in_place())
      read_changing();
    else {
      known_ = nullptr;
      read_identity();
      if (!vanished_ && !device_.is_vf) {
        read_net_dev();
        read_ports();
      }
    }
    device_.status = vanished_ ? device_read::vanished : device_read::complete;
    if (learn_ != nullptr && !vanished_) {
      learn_->identity = device_;
      for (auto& port : learn_->identity.ports) { // keep the link layer only
        port.state.clear();
        port.physical_state.clear();
        port.counters.clear();
      }
    }
    return std::move(device_);
  }

private:
  // The directory is there and its PCI link points where it did.
  bool still_in_place() const {
    return dir_fd_ >= 0
           && normalise_pci_address(link_basename(dir_fd_, "device"))
                == known_->identity.pci_address
           && !known_->identity.pci_address.empty();
  }

  // A known device: its identity from the earlier read; ports, states,
  // counters and the operstate read again.
  void read_changing() {
    const auto& was = known_->identity;
    device_ = was;
    device_.operstate.clear();
    device_.ports.clear();
    if (device_.is_vf)
      return;
    if (!device_.net_dev.empty()) {
      auto file = read_file(dir_fd_, "device/net/" + device_.net_dev + "/operstate");
      if (file.error == 0)
        device_.operstate = trim(file.text);
      else
        read_net_dev(); // renamed, or gone: look again
    }
    for (const auto& known_port : was.ports) {
      const auto dir = "ports/" + std::to_string(known_port.number);
      ib_port port;
      port.number = known_port.number;
      auto state = attribute(dir + "/state", true);
      auto phys = attribute(dir + "/phys_state", true);
      if (vanished_)
        return;
      port.readable = state && phys && known_port.readable;
      port.state = state.value_or("");
      port.physical_state = phys.value_or("");
      port.link_layer = known_port.link_layer;
      auto files = known_->counter_files.find(port.number);
      if (files != known_->counter_files.end())
        for (const auto& [counter, rel] : files->second)
          read_counter_file(rel, counter, port);
      if (vanished_)
        return;
      device_.ports.push_back(std::move(port));
    }
  }

  // A missing file when the device directory is gone means the device
  // vanished mid-poll (seed 002 §7): a disappearance candidate, not an error.
  // `rel` is relative to the device directory.
  std::optional<std::string> attribute(const std::string& rel, bool required) {
    if (vanished_)
      return std::nullopt;
    const std::string path = dir_ + "/" + rel;
    auto file = read_file(dir_fd_, rel);
    if (file.error == 0)
      return trim(file.text);
    if (file.error == ENOENT && !exists(dir_)) {
      vanished_ = true;
      return std::nullopt;
    }
    if (required || file.error != ENOENT)
      diagnostics_.push_back({path, "unreadable: " + errno_text(file.error)});
    return std::nullopt;
  }

  void read_identity() {
    if (dir_fd_ < 0) { // the class link or its target is gone
      vanished_ = true;
      return;
    }
    device_.hca_type = attribute("hca_type", true).value_or("");
    device_.fw_ver = attribute("fw_ver", false).value_or("");
    device_.board_id = attribute("board_id", false).value_or("");
    device_.driver = link_basename(dir_fd_, "device/driver");
    device_.is_vf = link_exists(dir_fd_, "device/physfn");
    device_.is_pf = link_exists(dir_fd_, "device/sriov_totalvfs");
    device_.vendor = is_mellanox() ? "mellanox" : "";
    read_pci_address();
    read_numa("device/numa_node");
  }

  // seed 002 §5.3: the name mlx5_<n>, or the mlx5_core driver link.
  bool is_mellanox() const {
    const std::string& n = device_.name;
    return (n.rfind("mlx5_", 0) == 0 && all_digits(std::string_view(n).substr(5)))
           || device_.driver == "mlx5_core";
  }

  void read_pci_address() {
    device_.pci_address = normalise_pci_address(link_basename(dir_fd_, "device"));
    if (!device_.pci_address.empty())
      return;
    if (auto uevent = attribute("device/uevent", false)) {
      auto pos = uevent->find("PCI_SLOT_NAME=");
      if (pos != std::string::npos) {
        auto value = uevent->substr(pos + 14);
        device_.pci_address = normalise_pci_address(value.substr(0, value.find('\n')));
      }
    }
    if (device_.pci_address.empty() && !vanished_)
      diagnostics_.push_back(
        {dir_ + "/device", "no PCI address (neither the link nor uevent)"});
  }

  void read_numa(const std::string& rel) {
    auto text = attribute(rel, true);
    if (!text)
      return;
    const std::string path = dir_ + "/" + rel;
    const std::string_view digits =
      !text->empty() && (*text)[0] == '-' ? std::string_view(*text).substr(1) : *text;
    if (!all_digits(digits) || digits.size() > 6) {
      diagnostics_.push_back({path, "unexpected value \"" + *text + "\""});
      return;
    }
    device_.numa_node = std::stoi(*text);
  }

  // seed 002 §9: the netdev of a RoCE device is under device/net/.
  void read_net_dev() {
    int error = 0;
    auto names = list_dir(dir_fd_, "device/net", error);
    if (!names || names->empty())
      return;
    device_.net_dev = names->front();
    // The same attribute as class/net/<if>/operstate, one short walk away.
    auto file = read_file(dir_fd_, "device/net/" + device_.net_dev + "/operstate");
    if (file.error != 0)
      file =
        read_file(AT_FDCWD, sysfs_root_ + "/class/net/" + device_.net_dev + "/operstate");
    if (file.error == 0)
      device_.operstate = trim(file.text);
  }

  void read_ports() {
    int error = 0;
    const std::string ports_dir = dir_ + "/ports";
    auto names = list_dir(dir_fd_, "ports", error);
    if (!names) {
      if (error == ENOENT && !exists(dir_))
        vanished_ = true;
      else
        diagnostics_.push_back({ports_dir, "unreadable: " + errno_text(error)});
      return;
    }
    for (const auto& name : *names) {
      if (!all_digits(name) || name.size() > 4) {
        diagnostics_.push_back({ports_dir + "/" + name, "not a port number"});
        continue;
      }
      auto port = read_port("ports/" + name, static_cast<unsigned>(std::stoul(name)));
      if (vanished_)
        return;
      device_.ports.push_back(std::move(port));
    }
  }

  // `dir` relative to the device directory: "ports/1".
  ib_port read_port(const std::string& dir, unsigned number) {
    ib_port port;
    port.number = number;
    auto state = attribute(dir + "/state", true);
    auto phys = attribute(dir + "/phys_state", true);
    auto layer = attribute(dir + "/link_layer", true);
    port.readable = state && phys && layer;
    port.state = state.value_or("");
    port.physical_state = phys.value_or("");
    port.link_layer = layer.value_or("");
    if (port.readable && port.link_layer != "InfiniBand"
        && port.link_layer != "Ethernet") {
      diagnostics_.push_back({dir_ + "/" + dir + "/link_layer",
                              "unexpected value \"" + port.link_layer + "\""});
      port.readable = false;
    }
    for (const auto& counter : nic_counter_names())
      read_counter(dir, counter, port);
    return port;
  }

  // Appendix A counters live in counters/ or, for rnr_nak_retry_err, hw_counters/.
  void read_counter(const std::string& port_dir, const std::string& counter,
                    ib_port& port) {
    for (const char* sub : {"/counters/", "/hw_counters/"}) {
      auto rel = port_dir + sub + counter;
      if (read_counter_file(rel, counter, port)) {
        if (learn_ != nullptr)
          learn_->counter_files[port.number][counter] = rel;
        return;
      }
    }
  }

  // False when the file is not there; a value that is no counter is a
  // diagnostic (and counts as found).
  bool read_counter_file(const std::string& rel, const std::string& counter,
                         ib_port& port) {
    auto text = attribute(rel, false);
    if (!text)
      return false;
    if (!all_digits(*text) || text->size() > 19) {
      diagnostics_.push_back({dir_ + "/" + rel, "unexpected value \"" + *text + "\""});
      return true;
    }
    port.counters[counter] = std::stoull(*text);
    return true;
  }

  std::string sysfs_root_;
  std::string dir_;
  int dir_fd_; // O_PATH descriptor of dir_, -1 when it is gone
  std::vector<nic_diagnostic>& diagnostics_;
  nic_device device_;
  bool vanished_ = false;
  const known_nic_device* known_;
  known_nic_device* learn_;
};

} // namespace

const std::vector<std::string>& nic_counter_names() {
  static const std::vector<std::string> names = {
    "link_downed", "excessive_buffer_overrun_errors", "local_link_integrity_errors",
    "rnr_nak_retry_err"};
  return names;
}

std::string nic_device::link_layer() const {
  for (const auto& port : ports)
    if (port.readable)
      return port.link_layer;
  return "";
}

const nic_device* nic_snapshot::find(std::string_view name) const {
  for (const auto& device : devices)
    if (device.name == name)
      return &device;
  return nullptr;
}

std::optional<std::vector<std::string>>
list_ib_devices(const std::string& sysfs_root, std::vector<nic_diagnostic>& diagnostics) {
  int error = 0;
  const std::string dir = sysfs_root + "/class/infiniband";
  auto names = list_dir(AT_FDCWD, dir, error);
  if (!names && error == ENOENT) {
    // The RDMA core is gone (its module unloaded): no device is listed, and
    // every known one has disappeared (seed 002 §7.3 makes no difference
    // between a driver unload and a crash).
    diagnostics.push_back({dir, "missing: no InfiniBand device is registered"});
    return std::vector<std::string>{};
  }
  if (!names)
    diagnostics.push_back({dir, "unreadable: " + errno_text(error)});
  return names;
}

nic_device read_nic_device(const std::string& sysfs_root, const std::string& name,
                           std::vector<nic_diagnostic>& diagnostics) {
  return device_reader{sysfs_root, name, diagnostics}.read();
}

nic_snapshot read_nic_snapshot(const std::string& sysfs_root) {
  nic_snapshot snapshot;
  auto names = list_ib_devices(sysfs_root, snapshot.diagnostics);
  if (!names)
    return snapshot;
  snapshot.listed = true;
  for (const auto& name : *names)
    snapshot.devices.push_back(read_nic_device(sysfs_root, name, snapshot.diagnostics));
  return snapshot;
}

nic_snapshot nic_sysfs_reader::read() {
  if (++reads_ % relearn_every_ == 0)
    known_.clear();
  nic_snapshot snapshot;
  auto names = list_ib_devices(root_, snapshot.diagnostics);
  if (!names) {
    known_.clear(); // nothing can be concluded: read everything afresh
    return snapshot;
  }
  snapshot.listed = true;
  std::map<std::string, known_nic_device> still_known;
  for (const auto& name : *names) {
    auto was = known_.find(name);
    known_nic_device learned;
    const bool known = was != known_.end();
    auto device =
      device_reader{root_, name, snapshot.diagnostics, known ? &was->second : nullptr,
                    known ? nullptr : &learned}
        .read();
    if (device.status == device_read::vanished) {
      snapshot.devices.push_back(std::move(device));
      continue;
    }
    // A known device read in full again (it moved) is learned next poll, and
    // so is one with a port that could not be read (a transient failure must
    // not stick).
    const bool whole = std::all_of(device.ports.begin(), device.ports.end(),
                                   [](const ib_port& p) { return p.readable; });
    if (known && device.pci_address == was->second.identity.pci_address)
      still_known.emplace(name, std::move(was->second));
    else if (!known && whole)
      still_known.emplace(name, std::move(learned));
    snapshot.devices.push_back(std::move(device));
  }
  known_ = std::move(still_known);
  return snapshot;
}

std::string find_ib_device_for_interface(const std::string& sysfs_root,
                                         const std::string& iface) {
  if (iface.empty() || iface.find('/') != std::string::npos)
    return "";
  int error = 0;
  auto names =
    list_dir(AT_FDCWD, sysfs_root + "/class/net/" + iface + "/device/infiniband", error);
  if (names && !names->empty())
    return names->front();
  // The other direction: an InfiniBand device whose device/net/ holds iface.
  const std::string ib_dir = sysfs_root + "/class/infiniband/";
  auto devices = list_dir(AT_FDCWD, ib_dir, error);
  for (const auto& device : devices.value_or(std::vector<std::string>{}))
    if (exists(ib_dir + device + "/device/net/" + iface))
      return device;
  return "";
}

expected<std::string> read_small_file(const std::string& path) {
  auto file = read_file(AT_FDCWD, path);
  if (file.error != 0)
    return failure{path, "unreadable: " + errno_text(file.error)};
  return std::move(file.text);
}

std::string ipv4_of_gid(std::string_view gid) {
  // 0000:0000:0000:0000:0000:ffff:AABB:CCDD
  static constexpr std::string_view mapped = "0000:0000:0000:0000:0000:ffff:";
  if (gid.size() != mapped.size() + 9 || gid.substr(0, mapped.size()) != mapped
      || gid[mapped.size() + 4] != ':')
    return "";
  unsigned octets[4];
  for (int i = 0; i < 4; ++i) {
    const auto at = mapped.size() + static_cast<std::size_t>(i / 2) * 5
                    + static_cast<std::size_t>(i % 2) * 2;
    unsigned value = 0;
    for (char c : gid.substr(at, 2)) {
      const int digit = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
                        : (c >= 'a' && c <= 'f')                    ? c - 'a' + 10
                        : (c >= 'A' && c <= 'F')                    ? c - 'A' + 10
                                                                    : -1;
      if (digit < 0)
        return "";
      value = value * 16 + static_cast<unsigned>(digit);
    }
    octets[i] = value;
  }
  return std::to_string(octets[0]) + "." + std::to_string(octets[1]) + "."
         + std::to_string(octets[2]) + "." + std::to_string(octets[3]);
}

std::optional<std::vector<gid_entry>>
read_gid_table(const std::string& sysfs_root, const std::string& device, unsigned port,
               std::vector<nic_diagnostic>& diagnostics) {
  const auto dir =
    sysfs_root + "/class/infiniband/" + device + "/ports/" + std::to_string(port);
  int error = 0;
  auto names = list_dir(AT_FDCWD, dir + "/gids", error);
  if (!names) {
    // A port without a table (an old kernel, a vanished device) has nothing
    // to diagnose; one that cannot be read is worth a word.
    if (error != ENOENT)
      diagnostics.push_back({dir + "/gids", std::strerror(error)});
    return std::nullopt;
  }
  std::vector<gid_entry> table;
  for (const auto& name : *names) {
    unsigned index = 0;
    if (name.empty() || name.size() > 5
        || !std::all_of(name.begin(), name.end(), [](char c) {
             return std::isdigit(static_cast<unsigned char>(c));
           }))
      continue;
    index = static_cast<unsigned>(std::stoul(name));
    // An unused entry reads as zeros, or fails (EINVAL) on newer kernels.
    auto gid = read_file(AT_FDCWD, dir + "/gids/" + name);
    const auto value = trim(gid.text);
    if (gid.error != 0 || value.empty()
        || value.find_first_not_of("0:") == std::string::npos)
      continue;
    gid_entry entry;
    entry.index = index;
    entry.gid = value;
    entry.ipv4 = ipv4_of_gid(value);
    const auto type = trim(read_file(AT_FDCWD, dir + "/gid_attrs/types/" + name).text);
    entry.type = type == "RoCE v2" ? "v2" : type == "IB/RoCE v1" ? "v1" : "";
    entry.net_dev = trim(read_file(AT_FDCWD, dir + "/gid_attrs/ndevs/" + name).text);
    table.push_back(std::move(entry));
  }
  std::sort(table.begin(), table.end(),
            [](const gid_entry& a, const gid_entry& b) { return a.index < b.index; });
  return table;
}

std::vector<std::string> gid_problems(const std::vector<gid_entry>& table) {
  if (table.empty())
    return {"empty GID table: queue-pair setup fails with ENODATA (61)"};
  // RoCE v2 routes over IP: it needs an IPv4 GID of type v2 (an IPv4 GID of
  // type v1 does not help it; one whose type could not be read may be v2).
  const bool ipv4_v2 = std::any_of(table.begin(), table.end(), [](const gid_entry& g) {
    return !g.ipv4.empty() && g.type != "v1";
  });
  if (!ipv4_v2)
    return {"no IPv4 RoCE v2 GID: RoCE v2 traffic cannot be routed"};
  return {};
}

expected<std::string> read_boot_id(const std::string& path) {
  auto text = read_small_file(path);
  if (!text)
    return text.error();
  auto id = trim(*text);
  if (id.empty())
    return failure{path, "empty boot ID"};
  return id;
}

} // namespace vigil::agent
