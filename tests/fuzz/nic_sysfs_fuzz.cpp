// The NIC monitor's sysfs readers through a fake tree: one InfiniBand device
// whose every file the input fills (its parts, cut at "\n--\n", in the order
// of `files` below; the last part names the PCI directory), read as the
// monitor does: a full snapshot, the incremental reader twice, the GID table.
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "actors/agent/nic/nic_sysfs.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace fs = std::filesystem;
using namespace vigil::agent;

namespace {

// Relative to <root>/class/infiniband/mlx5_0.
const char* const files[] = {
  "hca_type",
  "fw_ver",
  "board_id",
  "device/vendor",
  "device/numa_node",
  "device/net/eth0/operstate",
  "ports/1/state",
  "ports/1/phys_state",
  "ports/1/link_layer",
  "ports/1/counters/link_downed",
  "ports/1/counters/symbol_error",
  "ports/1/hw_counters/rnr_nak_retry_err",
  "ports/1/gids/0",
  "ports/1/gid_attrs/types/0",
  "ports/1/gid_attrs/ndevs/0",
};
constexpr std::size_t file_count = sizeof(files) / sizeof(files[0]);

const fs::path& root() {
  static const fs::path r = [] {
    std::error_code ec;
    fs::path base = fs::exists("/dev/shm", ec) ? "/dev/shm" : fs::temp_directory_path();
    return base / ("vigil-fuzz-sysfs-" + std::to_string(::getpid()));
  }();
  return r;
}

void write(const fs::path& path, std::string_view content) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc)
    .write(content.data(), static_cast<std::streamsize>(content.size()));
}

// The PCI device directory's name, "0000:0c:00.0" in real sysfs, from the
// input: one path element, never "." or "..".
std::string pci_name(std::string_view name) {
  std::string out;
  for (char c : name.substr(0, 64))
    if (c != '/' && c != '\0' && c != '\n')
      out += c;
  if (out.empty() || out == "." || out == "..")
    out = "0000:0c:00.0";
  return out;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto in = vigil::fuzz::parts(vigil::fuzz::as_text(data, size), file_count + 1);
  std::error_code ec;
  fs::remove_all(root(), ec);
  // As in sysfs, the device's `device` is a link to its PCI directory.
  const fs::path device = root() / "class/infiniband/mlx5_0";
  const fs::path pci = root() / "devices/pci0000:00" / pci_name(in[file_count]);
  fs::create_directories(device, ec);
  fs::create_directories(pci, ec);
  fs::create_symlink(pci, device / "device", ec);
  for (std::size_t i = 0; i < file_count; ++i) {
    if (in[i].empty() && i >= 9) // identity and port state exist even when empty
      continue;
    const std::string_view file = files[i];
    if (file.rfind("device/", 0) == 0)
      write(pci / std::string(file.substr(7)), in[i]);
    else
      write(device / std::string(file), in[i]);
  }
  const std::string sysfs = root().string();
  auto snapshot = read_nic_snapshot(sysfs);
  vigil::fuzz::require(snapshot.listed, "the fake class/infiniband is listed");
  nic_sysfs_reader reader(sysfs, 2);
  for (int poll = 0; poll < 3; ++poll)
    (void)reader.read();
  std::vector<nic_diagnostic> diagnostics;
  (void)read_gid_table(sysfs, "mlx5_0", 1, diagnostics);
  (void)find_ib_device_for_interface(sysfs, "eth0");
  (void)ipv4_of_gid(in[12]);
  fs::remove_all(root(), ec); // nothing left in /dev/shm when the fuzzer exits
  return 0;
}
