// The collector runs nvidia-smi (here a fake runner returning saved output)
// or reads files, and writes gpu_metadata.json that loads back the same.
#include "actors/agent/topology/topology_collector.hpp"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "tests/support/fresh_directory.hpp"

namespace vigil::agent {
namespace {

std::string data(const std::string& name) {
  const char* dir = std::getenv("VIGIL_SOURCE_DIR");
  return std::string(dir ? dir : ".") + "/tests/data/topo/" + name;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(topology_collector, runs_nvidia_smi_when_no_files_are_given) {
  std::vector<std::string> ran;
  auto fake = [&](const std::string& command) -> expected<std::string> {
    ran.push_back(command);
    if (command.find("topo -m") != std::string::npos)
      return slurp(data("h100_8gpu_wrapped_ansi.txt"));
    return slurp(data("h100_8gpu_query.csv"));
  };
  auto metadata = collect_gpu_metadata("gpu-node-1", {}, fake);
  ASSERT_TRUE(metadata.has_value()) << metadata.error().to_string();
  ASSERT_EQ(ran.size(), 3u);
  EXPECT_EQ(ran[1], "nvidia-smi --query-gpu=index,uuid,pci.bus_id,serial,name,"
                    "driver_version --format=csv,noheader");
  EXPECT_EQ(ran[2], "nvidia-smi nvlink -R");
  EXPECT_EQ(metadata->gpus.size(), 8u);
  EXPECT_FALSE(metadata->nic_topology.empty());

  const auto path = test::fresh_directory() + "/gpu_metadata.json";
  ASSERT_TRUE(write_gpu_metadata(path, *metadata).has_value());
  auto loaded = load_gpu_metadata(path);
  ASSERT_TRUE(loaded.has_value()) << loaded.error().to_string();
  EXPECT_EQ(*loaded, *metadata);
}

TEST(topology_collector, nvlinks_name_the_switches_and_are_optional) {
  auto fake = [](bool nvlink_works) {
    return [nvlink_works](const std::string& command) -> expected<std::string> {
      if (command.find("topo -m") != std::string::npos)
        return std::string("\tGPU0\tGPU1\nGPU0\t X \tNV12\nGPU1\tNV12\t X \n");
      if (command.find("nvlink -R") == std::string::npos)
        return std::string(
          "0, GPU-a, 0000:01:00.0, 1, NVIDIA A100-SXM4-80GB, 575.57.08\n"
          "1, GPU-b, 0000:02:00.0, 2, NVIDIA A100-SXM4-80GB, 575.57.08\n");
      if (!nvlink_works)
        return failure{command, "exited with status 3"};
      return slurp(data("a100_2gpu_nvlink_R.txt"));
    };
  };
  auto md = collect_gpu_metadata("hgx", {}, fake(true));
  ASSERT_TRUE(md.has_value()) << md.error().to_string();
  EXPECT_EQ(md->driver_version, "575.57.08");
  EXPECT_EQ(md->gpus[0].device_name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(md->gpus[0].nvlinks.size(), 4u);
  EXPECT_EQ(md->nvswitches, (std::vector<std::string>{"0005:00:00.0", "0008:00:00.0"}));
  auto without = collect_gpu_metadata("hgx", {}, fake(false));
  ASSERT_TRUE(without.has_value()) << without.error().to_string();
  EXPECT_TRUE(without->nvswitches.empty());
  EXPECT_TRUE(without->gpus[0].nvlinks.empty());
  EXPECT_EQ(gpu_facts_of(*without).nvswitch_count, -1); // unknown, not none
  EXPECT_EQ(gpu_facts_of(*md).nvswitch_count, 2);
  // A saved set of files does not run nvidia-smi for the NVLinks either;
  // a saved nvlink -R output is read.
  topology_sources files;
  files.topo_file = data("h100_8gpu_wrapped_ansi.txt");
  files.gpus_file = data("h100_8gpu_query.csv");
  files.nvlink_file = data("a100_2gpu_nvlink_R.txt");
  auto never = [](const std::string& c) -> expected<std::string> {
    ADD_FAILURE() << "ran " << c;
    return failure{c, "should not run"};
  };
  auto saved = collect_gpu_metadata("n", files, never);
  ASSERT_TRUE(saved.has_value()) << saved.error().to_string();
  EXPECT_EQ(saved->gpus[1].nvlinks.size(), 4u);
  EXPECT_EQ(saved->gpus[2].nvlinks.size(), 0u);
}

TEST(topology_collector, reads_files_and_names_what_failed) {
  topology_sources files;
  files.topo_file = data("h100_8gpu_wrapped_ansi.txt");
  files.gpus_file = data("h100_8gpu_query.csv");
  auto never = [](const std::string& c) -> expected<std::string> {
    ADD_FAILURE() << "ran " << c;
    return failure{c, "should not run"};
  };
  EXPECT_TRUE(collect_gpu_metadata("n", files, never).has_value());

  auto broken = [](const std::string& c) -> expected<std::string> {
    return failure{c, "exited with status 9"};
  };
  auto failed = collect_gpu_metadata("n", {}, broken);
  ASSERT_FALSE(failed.has_value());
  EXPECT_EQ(failed.error().where, "nvidia-smi topo -m");

  files.topo_file = "/nonexistent/topo.txt";
  auto missing = collect_gpu_metadata("n", files, never);
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().where, "/nonexistent/topo.txt");
}

// A fake nvidia-smi: a shell script with `body`, executable, in a fresh directory.
std::string fake_command(const std::string& body) {
  const auto path = test::fresh_directory() + "/nvidia-smi";
  std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
  ::chmod(path.c_str(), 0755);
  return path;
}

// The pid a fake wrote to `path`; 0 when it never got that far.
pid_t pid_in(const std::string& path) {
  std::ifstream in(path);
  pid_t pid = 0;
  in >> pid;
  return pid;
}

// Gone, or a zombie waiting for whoever inherited it: either way not running.
bool stopped(pid_t pid) {
  for (int i = 0; i < 200; ++i) { // SIGKILL lands at once; allow a busy machine 2 s
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line))
      return true;
    auto state = line.find(") ");
    if (state != std::string::npos && line[state + 2] == 'Z')
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
  }
  return false;
}

TEST(run_command, returns_stdout_and_names_a_failing_exit) {
  auto out = run_command("printf 'a\\nb'; echo ignored >&2", std::chrono::seconds{10});
  ASSERT_TRUE(out.has_value()) << out.error().to_string();
  EXPECT_EQ(*out, "a\nb");
  auto failed = run_command("exit 3", std::chrono::seconds{10});
  ASSERT_FALSE(failed.has_value());
  EXPECT_EQ(failed.error().to_string(), "exit 3: exited with status 3");
}

// A hung nvidia-smi (a wedged driver) must not hold the agent's startup: at
// the timeout the command is killed and the failure says what timed out.
TEST(run_command, a_command_past_its_timeout_is_killed) {
  const auto script = fake_command("echo $$ > \"$(dirname \"$0\")/pid\"\nexec sleep 10");
  const auto pid_file = script.substr(0, script.rfind('/')) + "/pid";
  const auto started = std::chrono::steady_clock::now();
  auto out = run_command(script + " topo -m", std::chrono::milliseconds{200});
  const auto took = std::chrono::steady_clock::now() - started;
  ASSERT_FALSE(out.has_value());
  EXPECT_EQ(out.error().to_string(), script + " topo -m: timed out after 200ms; killed");
  EXPECT_LT(took, std::chrono::seconds{5});
  const pid_t pid = pid_in(pid_file);
  ASSERT_GT(pid, 0) << "the fake never ran";
  EXPECT_TRUE(stopped(pid));
}

// The whole process group goes: a child in the background holding stdout open,
// and a command that closed stdout but keeps running.
TEST(run_command, the_timeout_kills_children_and_does_not_wait_for_eof) {
  const auto script =
    fake_command("sleep 10 &\necho $! > \"$(dirname \"$0\")/pid\"\nwait");
  const auto pid_file = script.substr(0, script.rfind('/')) + "/pid";
  auto out = run_command(script, std::chrono::milliseconds{200});
  ASSERT_FALSE(out.has_value());
  EXPECT_NE(out.error().what.find("timed out"), std::string::npos);
  const pid_t child = pid_in(pid_file);
  ASSERT_GT(child, 0) << "the fake never ran";
  EXPECT_TRUE(stopped(child));

  const auto started = std::chrono::steady_clock::now();
  auto closed = run_command("exec >&-; sleep 10", std::chrono::milliseconds{200});
  ASSERT_FALSE(closed.has_value());
  EXPECT_NE(closed.error().what.find("timed out"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds{5});
}

TEST(topology_collector, a_hung_nvidia_smi_fails_the_collection_naming_the_call) {
  topology_sources sources;
  sources.nvidia_smi = fake_command("exec sleep 10");
  auto metadata = collect_gpu_metadata(
    "n", sources, timed_command_runner(std::chrono::milliseconds{200}));
  ASSERT_FALSE(metadata.has_value());
  EXPECT_EQ(metadata.error().to_string(),
            sources.nvidia_smi + " topo -m: timed out after 200ms; killed");
}

} // namespace
} // namespace vigil::agent
