// The node agent's hot paths: the kernel-log parser on a mixed log (target
// >= 1,000,000 lines/s on one core) and one NIC monitor poll cycle over
// seed 002 §8.6's 34-device tree (target <= 2 ms CPU), and one DCGM scrape
// (dcgm-exporter page parsed, every check run) of an 8- and a 72-GPU page.
// `bench_agent --agent-rss VIGIL SECONDS`: the memory of a real `vigil agent`
// (NIC monitor polling that tree every second, XID monitor, forwarder
// spooling for an unreachable control plane) after SECONDS of running.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include <benchmark/benchmark.h>

#include "actors/agent/dcgm/dcgm_health.hpp"
#include "actors/agent/nic/nic_monitor_core.hpp"
#include "actors/agent/topology/gpu_metadata.hpp"
#include "actors/agent/xid/parse_kernel_log.hpp"
#include "actors/agent/xid/xid_parser.hpp"
#include "tests/support/fake_sysfs.hpp"

namespace {

using namespace vigil;
using namespace vigil::agent;

// 96% ordinary kernel chatter, 4% NVIDIA lines of several kinds.
std::vector<std::string> mixed_log(size_t lines) {
  const char* chatter[] = {
    "[ 1200.%06d] eth0: renamed from veth3a1b2c",
    "[ 1200.%06d] IPv6: ADDRCONF(NETDEV_CHANGE): cali5d2e: link becomes ready",
    "[ 1200.%06d] audit: type=1400 audit(1700000000.123:456): apparmor=\"STATUS\"",
    "[ 1200.%06d] EXT4-fs (nvme0n1p1): mounted filesystem with ordered data mode",
    "[ 1200.%06d] mlx5_core 0000:0c:00.0: mlx5_port_module_event: Module 0, status: "
    "plugged and enabled",
  };
  const char* nvidia[] = {
    "[ 1200.%06d] NVRM: Xid (PCI:0000:03:00): 13, pid=1234, name=python, Graphics "
    "Exception on (GPC 0, TPC 1, SM 0)",
    "[ 1200.%06d] NVRM: Xid (PCI:0000:03:00): 31, pid=1234, name=python, Ch 00000008, "
    "intr 10000000. MMU Fault",
    "[ 1200.%06d] NVRM: Xid (PCI:0000:b3:00): 48, pid=91237, name=nv-hostengine, Ch "
    "00000076, errorString CTX SWITCH TIMEOUT, Info 0x3c046",
    "[ 1200.%06d] NVRM: GPU at PCI:0000:03:00: GPU-455d8f70-2051-db6c-0430-ffc457bff834",
  };
  std::vector<std::string> out;
  out.reserve(lines);
  char buf[256];
  for (size_t i = 0; i < lines; ++i) {
    const bool nv = i % 25 == 7;
    const char* fmt = nv ? nvidia[(i / 25) % 4] : chatter[i % 5];
    std::snprintf(buf, sizeof buf, fmt, static_cast<int>(i % 1000000));
    out.emplace_back(buf);
  }
  return out;
}

const std::vector<std::string>& log_lines() {
  static const auto lines = [] {
    auto l = mixed_log(1000000);
    // The same file for `grep -c NVRM` (see BENCHMARKS.md).
    std::ofstream out("/tmp/vigil-bench-kmsg.log");
    for (const auto& line : l)
      out << line << '\n';
    return l;
  }();
  return lines;
}

// The line parser alone: classify and parse each line.
void BM_kernel_log_parser(benchmark::State& state) {
  const auto& lines = log_lines();
  for (auto _ : state) {
    kernel_log_parser parser;
    size_t nvidia = 0;
    for (const auto& line : lines)
      nvidia += parser.parse(line).is_nvidia() ? 1 : 0;
    benchmark::DoNotOptimize(nvidia);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * lines.size()));
}
BENCHMARK(BM_kernel_log_parser)->Unit(benchmark::kMillisecond);

// What `vigil parse kmsg` does: read lines, parse, build events, group bursts;
// Arg 1 with the NIC driver check (the shipped mlx5_core patterns) as well.
// An input stream over a string without copying it: an istringstream would
// copy (and page-fault in) the whole 76 MB log on every iteration, which
// `vigil parse kmsg` reading stdin never does.
struct string_view_buf : std::streambuf {
  explicit string_view_buf(const std::string& text) {
    auto* begin = const_cast<char*>(text.data());
    setg(begin, begin, begin + text.size());
  }
};

void BM_parse_kernel_log(benchmark::State& state) {
  const auto& lines = log_lines();
  std::string text;
  for (const auto& line : lines)
    text.append(line).push_back('\n');
  const char* source = std::getenv("VIGIL_SOURCE_DIR");
  auto catalog = xid_catalog::load(std::string(source ? source : ".") + "/config");
  if (!catalog) {
    state.SkipWithError(catalog.error().to_string().c_str());
    return;
  }
  parse_options options;
  options.catalog = *catalog;
  options.node_name = "gpu-node-1";
  if (state.range(0) == 1) {
    auto patterns =
      load_nic_driver_patterns(std::string(source ? source : ".") + "/config");
    if (!patterns) {
      state.SkipWithError(patterns.error().to_string().c_str());
      return;
    }
    options.nic_check =
      std::make_shared<const nic_driver_check>(*nic_driver_check::make(*patterns));
  }
  for (auto _ : state) {
    string_view_buf buffer(text);
    std::istream in(&buffer);
    auto result = parse_kernel_log(in, options);
    benchmark::DoNotOptimize(result.events.size());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * lines.size()));
}
BENCHMARK(BM_parse_kernel_log)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// A dcgm-exporter page of `gpus` GPUs in its own shape (HELP/TYPE, seven
// labels, pod labels on half the GPUs), with the 26 fields of
// tests/data/dcgm/h100_8gpu.txt; `step` moves the counters on.
std::string dcgm_page(int gpus, int step) {
  static const char* fields[] = {"DCGM_FI_DEV_SM_CLOCK",
                                 "DCGM_FI_DEV_MEM_CLOCK",
                                 "DCGM_FI_DEV_MEMORY_TEMP",
                                 "DCGM_FI_DEV_GPU_TEMP",
                                 "DCGM_FI_DEV_POWER_USAGE",
                                 "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
                                 "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
                                 "DCGM_FI_DEV_GPU_UTIL",
                                 "DCGM_FI_DEV_MEM_COPY_UTIL",
                                 "DCGM_FI_DEV_FB_FREE",
                                 "DCGM_FI_DEV_FB_USED",
                                 "DCGM_FI_DEV_XID_ERRORS",
                                 "DCGM_FI_DEV_POWER_VIOLATION",
                                 "DCGM_FI_DEV_THERMAL_VIOLATION",
                                 "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
                                 "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
                                 "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
                                 "DCGM_FI_DEV_RETIRED_SBE",
                                 "DCGM_FI_DEV_RETIRED_DBE",
                                 "DCGM_FI_DEV_RETIRED_PENDING",
                                 "DCGM_FI_DEV_ROW_REMAP_FAILURE",
                                 "DCGM_FI_DEV_ROW_REMAP_PENDING",
                                 "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
                                 "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
                                 "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
                                 "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL"};
  std::string out;
  for (const char* field : fields) {
    out +=
      std::string("# HELP ") + field + " A DCGM field.\n# TYPE " + field + " gauge\n";
    for (int g = 0; g < gpus; ++g) {
      char line[512];
      std::snprintf(
        line, sizeof line,
        "%s{gpu=\"%d\",UUID=\"GPU-%08x-1c2d-4e5f-8a9b-00123456789%d\","
        "pci_bus_id=\"%08X:%02X:00.0\",device=\"nvidia%d\",modelName=\"NVIDIA "
        "GB200\",Hostname=\"gpu-node-17\",DCGM_FI_DRIVER_VERSION=\"570.133.20\"%s} "
        "%d\n",
        field, g, 0x3f2a1b00 + g, g % 10, g / 4, 0x10 + g % 200, g,
        g % 2 == 0 ? ",container=\"trainer\",namespace=\"ml\",pod=\"llm-0\"" : "",
        std::strstr(field, "TEMP") ? 45 : step);
      out += line;
    }
  }
  return out;
}

// What the agent's dcgm_monitor does with each scrape: parse the page, run
// every check; Arg: GPUs on the page (an 8-GPU HGX node, a 72-GPU NVL72 rack's
// exporter). Items are page lines.
void BM_dcgm_scrape(benchmark::State& state) {
  const int gpus = static_cast<int>(state.range(0));
  const std::string pages[2] = {dcgm_page(gpus, 1), dcgm_page(gpus, 2)};
  const auto lines = std::count(pages[0].begin(), pages[0].end(), '\n');
  dcgm_health health("gpu-node-17", dcgm_thresholds{});
  auto now = from_unix(1'800'000'000, 0);
  std::size_t i = 0;
  for (auto _ : state) {
    auto page = parse_prometheus_text(pages[i++ % 2]);
    auto events = health.observe(page, now);
    now += std::chrono::seconds(30);
    benchmark::DoNotOptimize(events.size());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * lines);
  state.counters["page_bytes"] = static_cast<double>(pages[0].size());
}
BENCHMARK(BM_dcgm_scrape)->Arg(8)->Arg(72)->Unit(benchmark::kMicrosecond);

std::string bus(int b, int fn = 0) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0000:%02x:00.%d", b, fn);
  return buf;
}

// seed 002 §8.6: 18 PFs (mlx5_0 the management NIC) and 16 VFs, 8 GPUs.
void build_34_devices(test::fake_sysfs& sys, gpu_metadata& metadata) {
  for (int g = 0; g < 8; ++g)
    metadata.gpus.push_back(
      {g, bus(0x80 + g * 4), g / 4, "GPU-" + std::to_string(g), "", "", "", {}});
  auto add = [&](const std::string& name, const std::string& pci, int numa,
                 std::vector<std::string> topo, const std::string& netdev) {
    test::fake_nic nic;
    nic.name = name;
    nic.pci = pci;
    nic.numa_node = numa;
    nic.sriov_totalvfs = 16;
    nic.netdev = netdev;
    nic.ports = {test::roce_port()};
    sys.add_nic(nic);
    metadata.nic_topology[name] = std::move(topo);
  };
  add("mlx5_0", bus(0x11), 0, std::vector<std::string>(8, "NODE"), "eth0");
  for (int n = 1; n < 18; ++n) {
    std::vector<std::string> row(8, "SYS");
    row[static_cast<size_t>((n - 1) % 8)] = "PXB";
    add("mlx5_" + std::to_string(n), bus(0x20 + n * 8), (n - 1) / 9, row,
        "en" + std::to_string(n));
  }
  for (int v = 0; v < 16; ++v) {
    test::fake_nic vf;
    vf.name = "mlx5_" + std::to_string(18 + v);
    vf.pci = bus(0x20 + (1 + v) * 8, 1 + v % 7);
    vf.physfn = bus(0x20 + (1 + v) * 8);
    vf.numa_node = v / 9;
    vf.ports = {test::roce_port("1: DOWN", "3: Disabled")};
    sys.add_nic(vf);
  }
  sys.write("route", test::route_table_with_default("eth0"));
  sys.write("boot_id", "boot-1");
}

// One poll cycle as the monitor runs it every second: read sysfs, poll.
// Argument 1: the monitor's reader (identity kept between polls, steady
// state); 0: a full read of every device each cycle (read_nic_snapshot).
void BM_nic_poll_cycle_34_devices(benchmark::State& state) {
  test::fake_sysfs sys;
  gpu_metadata metadata;
  build_34_devices(sys, metadata);
  nic_monitor_options options;
  options.sysfs_root = sys.root();
  options.node_name = "gpu-node-1";
  auto poller = nic_poller::start(
    options, metadata, resolve_default_route_device(sys.root(), sys.path("route")),
    std::nullopt);
  if (!poller) {
    state.SkipWithError(poller.error().to_string().c_str());
    return;
  }
  std::int64_t t = 1700000000;
  nic_sysfs_reader reader(sys.root());
  const bool cached = state.range(0) == 1;
  for (auto _ : state) {
    auto snapshot = cached ? reader.read() : read_nic_snapshot(sys.root());
    auto result = poller->poll(snapshot, "boot-1", from_unix(++t, 0));
    benchmark::DoNotOptimize(result.events.size());
  }
}
BENCHMARK(BM_nic_poll_cycle_34_devices)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// "VmHWM" and "VmRSS" lines of /proc/PID/status.
std::string memory_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string out;
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmHWM", 0) == 0 || line.rfind("VmRSS", 0) == 0)
      out += line + "\n";
  return out;
}

int agent_rss(const char* vigil, int seconds) {
  test::fake_sysfs sys;
  gpu_metadata metadata;
  build_34_devices(sys, metadata);
  metadata.node_name = "gpu-node-1";
  sys.write("state/gpu_metadata.json", encode_gpu_metadata(metadata));
  sys.write("state/syslog", "");
  const std::vector<std::string> args{vigil,
                                      "agent",
                                      "--node-name",
                                      "gpu-node-1",
                                      "--control-url",
                                      "http://127.0.0.1:9",
                                      "--no-collect",
                                      "--metadata",
                                      sys.path("state/gpu_metadata.json"),
                                      "--state-dir",
                                      sys.path("state"),
                                      "--log-source",
                                      "syslog",
                                      "--log-path",
                                      sys.path("state/syslog"),
                                      "--sysfs-root",
                                      sys.root(),
                                      "--proc-net-route",
                                      sys.path("route"),
                                      "--boot-id-path",
                                      sys.path("boot_id"),
                                      "--log-level",
                                      "warn"};
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (const auto& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(vigil, argv.data());
    std::perror("execv");
    _exit(127);
  }
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  int status = 0;
  if (waitpid(pid, &status, WNOHANG) == pid) {
    std::cerr << "vigil agent exited early (status " << status << ")\n";
    return 1;
  }
  std::cout << "vigil agent after " << seconds << " s, 34 devices polled every 1 s:\n"
            << memory_of(pid);
  kill(pid, SIGTERM);
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

} // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "--agent-rss") == 0)
    return agent_rss(argv[2], std::atoi(argv[3]));
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
