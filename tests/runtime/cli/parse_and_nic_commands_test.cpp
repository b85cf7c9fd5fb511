// The stable output contract of `vigil nic scan`: one HealthEvent JSON per
// line on stdout for one poll cycle, problems on stderr, exit 1 on a startup
// failure that names the file; and `vigil agent`'s startup decisions, checked
// before any actor starts (a hung nvidia-smi, its flags).
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "actors/agent/topology/gpu_metadata.hpp"
#include "runtime/cli/cli.hpp"
#include "runtime/cli/parse_command.hpp"
#include "tests/support/fake_sysfs.hpp"

namespace vigil {
namespace {

struct cli_result {
  int code;
  std::string out;
  std::string err;
};

cli_result run(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = run_cli(args, out, err);
  return {code, out.str(), err.str()};
}

std::vector<health_event> decode_lines(const std::string& text) {
  std::vector<health_event> events;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    auto e = decode_health_event(line);
    EXPECT_TRUE(e.has_value()) << line;
    if (e)
      events.push_back(*e);
  }
  return events;
}

class nic_scan_command : public testing::Test {
protected:
  void SetUp() override {
    // Two InfiniBand compute NICs beside GPU 0 (PIX) on NUMA 0.
    test::fake_nic nic;
    nic.name = "mlx5_0";
    nic.pci = "0000:0c:00.0";
    sysfs_.add_nic(nic);
    nic.name = "mlx5_1";
    nic.pci = "0000:0d:00.0";
    sysfs_.add_nic(nic);
    agent::gpu_metadata metadata;
    metadata.node_name = "gpu-node-1";
    metadata.gpus = {{0, "0000:0f:00.0", 0, "GPU-0", "", "", "", {}}};
    metadata.nic_topology = {{"mlx5_0", {"PIX"}}, {"mlx5_1", {"PIX"}}};
    sysfs_.write("meta/gpu_metadata.json", agent::encode_gpu_metadata(metadata));
    sysfs_.write("meta/boot_id", "boot-1");
    sysfs_.write("meta/route", test::route_table_with_default("eth0"));
  }

  cli_result scan() {
    return run({"nic", "scan", "--once", "--sysfs-root", sysfs_.root(), "--metadata",
                sysfs_.path("meta/gpu_metadata.json"), "--state-file",
                sysfs_.path("meta/state.json"), "--boot-id-path",
                sysfs_.path("meta/boot_id"), "--proc-net-route",
                sysfs_.path("meta/route"), "--node-name", "gpu-node-1"});
  }

  test::fake_sysfs sysfs_;
};

TEST_F(nic_scan_command, prints_one_event_per_line_and_only_on_transitions) {
  auto first = scan();
  ASSERT_EQ(first.code, 0) << first.err;
  for (const auto& e : decode_lines(first.out))
    EXPECT_TRUE(e.is_healthy) << encode_health_event(e); // baselines of a fresh boot

  sysfs_.set_state("mlx5_1", 1, "1: DOWN", "3: Disabled");
  auto second = scan();
  ASSERT_EQ(second.code, 0) << second.err;
  auto events = decode_lines(second.out);
  ASSERT_EQ(events.size(), 1u) << second.out;
  EXPECT_TRUE(events[0].is_fatal);
  EXPECT_EQ(events[0].node_name, "gpu-node-1");
  EXPECT_EQ(events[0].action, recommended_action::replace_vm);

  EXPECT_EQ(scan().out, ""); // nothing changed: nothing to say
}

TEST_F(nic_scan_command, missing_metadata_stops_with_the_file_named) {
  auto r = run({"nic", "scan", "--once", "--sysfs-root", sysfs_.root(), "--metadata",
                "/nonexistent/gpu_metadata.json", "--state-file",
                sysfs_.path("meta/state.json"), "--node-name", "n"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("/nonexistent/gpu_metadata.json"), std::string::npos) << r.err;
}

// seed 002 §12.1's names and flags on the CLI: --metadata-path for
// --metadata, --checks (unknown names are reported and skipped),
// --processing-strategy on every event; a bad value is a usage error naming
// the flag.
TEST_F(nic_scan_command, takes_the_seeds_flags) {
  auto r =
    run({"nic", "scan", "--once", "--sysfs-root", sysfs_.root(), "--metadata-path",
         sysfs_.path("meta/gpu_metadata.json"), "--state-file",
         sysfs_.path("meta/state.json"), "--boot-id-path", sysfs_.path("meta/boot_id"),
         "--node-name", "gpu-node-1", "--checks", "InfiniBandStateCheck,NoSuchCheck",
         "--processing-strategy", "STORE_ONLY"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("unknown check 'NoSuchCheck' skipped"), std::string::npos)
    << r.err;
  auto events = decode_lines(r.out);
  ASSERT_EQ(events.size(), 2u) << r.out;
  for (const auto& e : events) {
    EXPECT_EQ(e.check_name, "InfiniBandStateCheck");
    EXPECT_EQ(e.strategy, processing_strategy::store_only);
  }

  r = run({"nic", "scan", "--once", "--sysfs-root", sysfs_.root(), "--metadata",
           sysfs_.path("meta/gpu_metadata.json"), "--state-polling-interval", "soon"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--state-polling-interval"), std::string::npos) << r.err;

  r = run({"nic", "scan", "--once", "--metadata", "a.json", "--metadata-path", "b.json"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--metadata-path"), std::string::npos) << r.err;
}

// seed 002 §12.2: `vigil agent` does not start when its gpu_metadata.json
// has no nic_topology, nor with a NIC flag it cannot use; both name what is
// wrong. (All of this is checked before any actor starts.)
TEST_F(nic_scan_command, the_agent_checks_the_nic_monitors_startup) {
  agent::gpu_metadata metadata;
  metadata.node_name = "gpu-node-1";
  metadata.gpus = {{0, "0000:0f:00.0", 0, "GPU-0", "", "", "", {}}};
  sysfs_.write("meta/no-nics.json", agent::encode_gpu_metadata(metadata));
  auto agent = [&](std::vector<std::string> extra) {
    std::vector<std::string> args{"agent",
                                  "--node-name",
                                  "gpu-node-1",
                                  "--control-url",
                                  "http://127.0.0.1:9",
                                  "--no-collect",
                                  "--state-dir",
                                  sysfs_.path("meta"),
                                  "--log-source",
                                  "syslog",
                                  "--log-path",
                                  sysfs_.path("meta/syslog"),
                                  "--sysfs-root",
                                  sysfs_.root(),
                                  "--boot-id-path",
                                  sysfs_.path("meta/boot_id")};
    args.insert(args.end(), extra.begin(), extra.end());
    return run(args);
  };
  auto r = agent({"--metadata-path", sysfs_.path("meta/no-nics.json")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("nic_topology"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no-nics.json"), std::string::npos) << r.err;

  r = agent({"--metadata", sysfs_.path("meta/gpu_metadata.json"),
             "--state-polling-interval", "-1s"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--state-polling-interval"), std::string::npos) << r.err;

  r = agent({"--metadata", sysfs_.path("meta/gpu_metadata.json"), "--nic-exclusion-regex",
             "(unclosed"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--nic-exclusion-regex"), std::string::npos) << r.err;
}

// `vigil agent` up to the point where it would start its actors: a startup
// failure returns before any of them exists, so each case ends in one
// (a flag the NIC monitor refuses, a bad --log-source) to show how far it got.
class agent_startup : public nic_scan_command {
protected:
  // A fake nvidia-smi that hangs, as one does on a wedged driver.
  std::string hung_nvidia_smi() {
    sysfs_.write("bin/nvidia-smi", "#!/bin/sh\nexec sleep 10\n");
    const auto path = sysfs_.path("bin/nvidia-smi");
    ::chmod(path.c_str(), 0755);
    return path;
  }

  cli_result agent(std::vector<std::string> extra) {
    std::vector<std::string> args{"agent",
                                  "--node-name",
                                  "gpu-node-1",
                                  "--control-url",
                                  "http://127.0.0.1:9",
                                  "--state-dir",
                                  sysfs_.path("meta"),
                                  "--log-source",
                                  "syslog",
                                  "--log-path",
                                  sysfs_.path("meta/syslog"),
                                  "--sysfs-root",
                                  sysfs_.root(),
                                  "--boot-id-path",
                                  sysfs_.path("meta/boot_id")};
    args.insert(args.end(), extra.begin(), extra.end());
    return run(args);
  }
};

// nvidia-smi is killed at --nvidia-smi-timeout; with no earlier
// gpu_metadata.json the NIC monitor cannot start, and the message says both.
TEST_F(agent_startup, a_hung_nvidia_smi_without_earlier_metadata_stops_startup) {
  const auto absent = sysfs_.path("meta/absent.json");
  const auto started = std::chrono::steady_clock::now();
  auto r = agent({"--nvidia-smi", hung_nvidia_smi(), "--nvidia-smi-timeout", "200ms",
                  "--metadata", absent});
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds{5});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("nvidia-smi topo -m: timed out after 200ms; killed"),
            std::string::npos)
    << r.err;
  EXPECT_NE(r.err.find("no earlier " + absent + " to fall back on"), std::string::npos)
    << r.err;
  EXPECT_NE(r.err.find("NIC monitor"), std::string::npos) << r.err;
  EXPECT_FALSE(std::ifstream(absent).good());
}

// With an earlier file the agent goes on with it: here it reaches the NIC
// monitor's own checks of that file (this one has no nic_topology).
TEST_F(agent_startup, a_hung_nvidia_smi_falls_back_to_the_earlier_metadata) {
  agent::gpu_metadata metadata;
  metadata.node_name = "gpu-node-1";
  metadata.gpus = {{0, "0000:0f:00.0", 0, "GPU-0", "", "", "", {}}};
  sysfs_.write("meta/earlier.json", agent::encode_gpu_metadata(metadata));
  const auto earlier = sysfs_.path("meta/earlier.json");
  auto r = agent({"--nvidia-smi", hung_nvidia_smi(), "--nvidia-smi-timeout", "200ms",
                  "--metadata", earlier});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("timed out after 200ms; killed); using the earlier " + earlier),
            std::string::npos)
    << r.err;
  EXPECT_NE(r.err.find("nic_topology"), std::string::npos) << r.err;
}

// Without the NIC monitor nothing needs the file: the XID monitor goes on
// without it (here up to the --log-source it cannot use).
TEST_F(agent_startup, without_the_nic_monitor_the_xid_monitor_starts_without_metadata) {
  auto r = agent({"--nvidia-smi", hung_nvidia_smi(), "--nvidia-smi-timeout", "200ms",
                  "--metadata", sysfs_.path("meta/absent.json"), "--no-nic",
                  "--log-source", "carrier-pigeon"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("the XID monitor starts without GPU metadata"), std::string::npos)
    << r.err;
  EXPECT_NE(r.err.find("--log-source"), std::string::npos) << r.err;
}

TEST_F(agent_startup, bad_timeouts_intervals_and_ports_name_their_flag) {
  const auto metadata = sysfs_.path("meta/gpu_metadata.json");
  for (const auto& [flag, value] :
       {std::pair<std::string, std::string>{"--nvidia-smi-timeout", "0"},
        {"--nvidia-smi-timeout", "soon"},
        {"--heartbeat-interval", "-1s"},
        {"--metrics-port", "70000"},
        {"--metrics-port", "http"}}) {
    auto r = agent({"--no-collect", "--metadata", metadata, flag, value});
    EXPECT_EQ(r.code, 1) << flag << " " << value;
    EXPECT_NE(r.err.find(flag), std::string::npos) << r.err;
  }
}

// `vigil parse dcgm`: the agent's DCGM check over pages on stdin; pages
// concatenated are successive scrapes, --interval apart.
struct parse_dcgm_command : ::testing::Test {
  vigil_config config;

  cli_result run_dcgm(const std::string& pages, std::vector<std::string> args) {
    args.insert(args.begin(), "dcgm");
    auto line = parse_command_line(parse_option_specs(), args);
    EXPECT_TRUE(line.has_value());
    std::ostringstream out, err;
    std::istringstream in(pages);
    command_context ctx{*line, config, out, err};
    const int code = run_parse(ctx, in);
    return {code, out.str(), err.str()};
  }

  static std::string temp(int gpu, int celsius) {
    return "DCGM_FI_DEV_GPU_TEMP{gpu=\"" + std::to_string(gpu) + "\",UUID=\"GPU-"
           + std::to_string(gpu) + "\",pci_bus_id=\"00000000:1" + std::to_string(gpu)
           + ":00.0\"} " + std::to_string(celsius) + "\n";
  }
};

TEST_F(parse_dcgm_command, prints_the_events_of_successive_pages) {
  const auto pages = "# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n" + temp(0, 50) + temp(1, 91)
                     + "garbage{ line\n" + temp(0, 88) + temp(1, 91);
  auto r = run_dcgm(pages, {"--node", "gpu-node-3", "--time", "2026-11-26T08:00:00Z"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto events = decode_lines(r.out);
  ASSERT_EQ(events.size(), 3u) << r.out;
  EXPECT_FALSE(events[0].is_healthy); // GPU 1 hot at the first page
  EXPECT_EQ(events[0].node_name, "gpu-node-3");
  EXPECT_EQ(events[0].check_name, "DCGMThermal");
  EXPECT_EQ(format_rfc3339(*events[0].generated), "2026-11-26T08:00:00Z");
  EXPECT_TRUE(events[1].is_healthy);  // GPU 0's first reading
  EXPECT_FALSE(events[2].is_healthy); // GPU 0 hot on the second page, 30 s on
  EXPECT_EQ(format_rfc3339(*events[2].generated), "2026-11-26T08:00:30Z");
  EXPECT_NE(r.err.find("skipped line 4: label line has no ="), std::string::npos)
    << r.err;
  EXPECT_NE(r.err.find("2 pages, 4 samples, 2 GPUs, 1 lines skipped, 3 events"),
            std::string::npos)
    << r.err;
  // A page with temperatures only: the checks it gives no data are named.
  EXPECT_NE(r.err.find("no data for DCGMXidError (DCGM_FI_DEV_XID_ERRORS or"),
            std::string::npos)
    << r.err;
  EXPECT_EQ(r.err.find("DCGMThermal ("), std::string::npos) << r.err;
}

TEST_F(parse_dcgm_command, thresholds_come_from_the_config_and_bad_flags_are_named) {
  config.dcgm.thresholds.gpu_temp_c = {40, 35};
  auto r = run_dcgm(temp(0, 50), {"--node", "n"});
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(decode_lines(r.out).size(), 1u);
  EXPECT_FALSE(decode_lines(r.out)[0].is_healthy);
  EXPECT_EQ(run_dcgm("", {"--time", "yesterday"}).code, 1);
  auto bad = run_dcgm("", {"--interval", "often"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("--interval"), std::string::npos) << bad.err;
}

} // namespace
} // namespace vigil
