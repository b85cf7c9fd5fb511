#include "actors/agent/topology/topology_collector.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "actors/agent/topology/topo_parser.hpp"

namespace vigil::agent {

namespace {

expected<std::string> read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return failure{path, "cannot be read"};
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A file's text when `file` is set, else the command's output.
expected<std::string> output_of(const std::string& file, const std::string& command,
                                const command_runner& run) {
  return file.empty() ? run(command) : read_file(file);
}

} // namespace

expected<std::string> run_command(const std::string& command) {
  FILE* pipe = ::popen((command + " 2>/dev/null").c_str(), "r");
  if (pipe == nullptr)
    return failure{command, "cannot be started"};
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;)
    out.append(buf, n);
  const int rc = ::pclose(pipe);
  if (rc != 0)
    return failure{command, "exited with status " + std::to_string(rc)};
  return out;
}

expected<gpu_metadata> collect_gpu_metadata(const std::string& node_name,
                                            const topology_sources& sources,
                                            const command_runner& run) {
  auto topo = output_of(sources.topo_file, sources.nvidia_smi + " topo -m", run);
  if (!topo)
    return topo.error();
  auto matrix = parse_topo_matrix(*topo);
  if (!matrix)
    return failure{sources.topo_file.empty() ? "nvidia-smi topo -m" : sources.topo_file,
                   matrix.error().to_string()};
  auto csv =
    output_of(sources.gpus_file,
              sources.nvidia_smi
                + " --query-gpu=index,uuid,pci.bus_id,serial --format=csv,noheader",
              run);
  if (!csv)
    return csv.error();
  auto gpus = parse_gpu_query_csv(*csv);
  if (!gpus)
    return failure{sources.gpus_file.empty() ? "nvidia-smi --query-gpu"
                                             : sources.gpus_file,
                   gpus.error().to_string()};
  return build_gpu_metadata(node_name, *gpus, *matrix);
}

status write_gpu_metadata(const std::string& path, const gpu_metadata& metadata) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << encode_gpu_metadata(metadata);
    if (!out.flush())
      return failure{temporary, "cannot be written"};
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0)
    return failure{path, "cannot be replaced"};
  return ok();
}

} // namespace vigil::agent
