// The collector runs nvidia-smi (here a fake runner returning saved output)
// or reads files, and writes gpu_metadata.json that loads back the same.
#include "actors/agent/topology/topology_collector.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

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
  ASSERT_EQ(ran.size(), 2u);
  EXPECT_EQ(ran[1], "nvidia-smi --query-gpu=index,uuid,pci.bus_id,serial "
                    "--format=csv,noheader");
  EXPECT_EQ(metadata->gpus.size(), 8u);
  EXPECT_FALSE(metadata->nic_topology.empty());

  const auto path = test::fresh_directory() + "/gpu_metadata.json";
  ASSERT_TRUE(write_gpu_metadata(path, *metadata).has_value());
  auto loaded = load_gpu_metadata(path);
  ASSERT_TRUE(loaded.has_value()) << loaded.error().to_string();
  EXPECT_EQ(*loaded, *metadata);
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

} // namespace
} // namespace vigil::agent
