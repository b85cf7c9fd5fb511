#include "actors/agent/topology/topo_parser.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "tests/support/source_tree.hpp"

namespace vigil::agent {
namespace {

using test::config_dir;
using test::source_dir;

std::string fixture(const std::string& name) {
  std::ifstream in(source_dir() + "/tests/data/topo/" + name);
  EXPECT_TRUE(in.good()) << name;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

using levels = std::vector<std::string>;

TEST(topo_parser, h100_wrapped_header_with_ansi_codes) {
  auto matrix = parse_topo_matrix(fixture("h100_8gpu_wrapped_ansi.txt"));
  ASSERT_TRUE(matrix.has_value()) << matrix.error().to_string();
  ASSERT_EQ(matrix->columns.size(), 18u);
  EXPECT_EQ(matrix->columns[0], "GPU0");
  EXPECT_EQ(matrix->columns[17], "NIC9");
  ASSERT_EQ(matrix->gpus.size(), 8u);
  const auto& gpu0 = matrix->gpus[0];
  EXPECT_EQ(gpu0.name, "GPU0");
  EXPECT_EQ(gpu0.levels[0], "X");
  EXPECT_EQ(gpu0.levels[1], "NV18");
  EXPECT_EQ(gpu0.levels[8], "PIX");
  EXPECT_EQ(gpu0.cpu_affinity, "0-55,112-167");
  EXPECT_EQ(gpu0.numa_affinity, "0");
  EXPECT_EQ(gpu0.gpu_numa_id, "N/A");
  EXPECT_EQ(matrix->gpus[7].cpu_affinity, "56-111,168-223");
  EXPECT_EQ(matrix->nic_names.size(), 10u);
  EXPECT_EQ(matrix->device_name("NIC3"), "mlx5_3");
}

TEST(topo_parser, h100_metadata) {
  auto matrix = parse_topo_matrix(fixture("h100_8gpu_wrapped_ansi.txt"));
  auto query = parse_gpu_query_csv(fixture("h100_8gpu_query.csv"));
  ASSERT_TRUE(matrix.has_value()) << matrix.error().to_string();
  ASSERT_TRUE(query.has_value()) << query.error().to_string();
  auto md = build_gpu_metadata("gpu-node-42", *query, *matrix);
  ASSERT_TRUE(md.has_value()) << md.error().to_string();
  EXPECT_EQ(md->node_name, "gpu-node-42");
  ASSERT_EQ(md->gpus.size(), 8u);
  EXPECT_EQ(md->gpus[0].pci_address, "0000:18:00.0");
  EXPECT_EQ(md->gpus[0].uuid, "GPU-00000000-2051-db6c-0430-ffc457bff830");
  EXPECT_EQ(md->gpus[0].serial_number, "1653023010000");
  EXPECT_EQ(md->gpus[0].numa_node, 0);
  EXPECT_EQ(md->gpus[5].pci_address, "0000:ab:00.0");
  EXPECT_EQ(md->gpus[5].numa_node, 1);
  EXPECT_EQ(md->gpus[5].cpu_affinity, "56-111,168-223");
  ASSERT_EQ(md->nic_topology.size(), 10u);
  EXPECT_EQ(md->nic_topology.at("mlx5_0"),
            (levels{"PIX", "NODE", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS"}));
  EXPECT_EQ(md->nic_topology.at("mlx5_5"),
            (levels{"SYS", "SYS", "SYS", "SYS", "NODE", "PIX", "NODE", "NODE"}));
  EXPECT_EQ(md->nic_topology.at("mlx5_9"),
            (levels{"SYS", "SYS", "SYS", "SYS", "NODE", "NODE", "NODE", "NODE"}));
  // The result is what gpu_metadata.json holds: it round-trips through its codec.
  auto decoded = decode_gpu_metadata(encode_gpu_metadata(*md));
  ASSERT_TRUE(decoded.has_value()) << decoded.error().to_string();
  EXPECT_EQ(*decoded, *md);
}

// Captured on a real host (one H100 passed through to a VM, driver
// 580.159.04, 2026-11-24): even redirected to a file, topo -m underlines its
// header with ANSI codes; a lone GPU has no device column but its own, and no
// NIC legend.
TEST(topo_parser, real_single_h100_vm_driver_580) {
  auto matrix = parse_topo_matrix(fixture("h100_1gpu_vm_driver580.txt"));
  ASSERT_TRUE(matrix.has_value()) << matrix.error().to_string();
  ASSERT_EQ(matrix->columns, std::vector<std::string>{"GPU0"});
  ASSERT_EQ(matrix->gpus.size(), 1u);
  EXPECT_EQ(matrix->gpus[0].levels, levels{"X"});
  EXPECT_EQ(matrix->gpus[0].cpu_affinity, "0-15");
  EXPECT_EQ(matrix->gpus[0].numa_affinity, "0");
  EXPECT_EQ(matrix->gpus[0].gpu_numa_id, "N/A");
  EXPECT_TRUE(matrix->nic_names.empty());

  auto query = parse_gpu_query_csv(fixture("h100_1gpu_vm_driver580_query.csv"));
  ASSERT_TRUE(query.has_value()) << query.error().to_string();
  auto md = build_gpu_metadata("h100-vm", *query, *matrix);
  ASSERT_TRUE(md.has_value()) << md.error().to_string();
  ASSERT_EQ(md->gpus.size(), 1u);
  EXPECT_EQ(md->gpus[0].uuid, "GPU-026102e5-21c1-3a7c-01f5-e81d771206aa");
  EXPECT_EQ(md->gpus[0].pci_address, "0000:00:06.0"); // from 00000000:00:06.0
  EXPECT_EQ(md->gpus[0].numa_node, 0);
  EXPECT_TRUE(md->nic_topology.empty());
}

TEST(topo_parser, gb200_gpu_numa_ids_and_mixed_nic_names) {
  auto matrix = parse_topo_matrix(fixture("gb200_4gpu.txt"));
  ASSERT_TRUE(matrix.has_value()) << matrix.error().to_string();
  ASSERT_EQ(matrix->gpus.size(), 4u);
  EXPECT_EQ(matrix->gpus[1].gpu_numa_id, "10");
  EXPECT_EQ(matrix->gpus[3].numa_affinity, "1");
  auto query = parse_gpu_query_csv(fixture("gb200_4gpu_query.csv"));
  ASSERT_TRUE(query.has_value()) << query.error().to_string();
  EXPECT_EQ((*query)[2].pci_address, "000a:01:00.0");
  EXPECT_EQ((*query)[2].serial, "");
  auto md = build_gpu_metadata("gb200-n1", *query, *matrix);
  ASSERT_TRUE(md.has_value()) << md.error().to_string();
  EXPECT_EQ(md->gpus[2].numa_node, 1);
  EXPECT_EQ(md->gpus[2].cpu_affinity, "72-143");
  EXPECT_EQ(md->nic_topology.at("ibp3s0"), (levels{"SYS", "SYS", "NODE", "NODE"}));
  EXPECT_EQ(md->nic_topology.at("mlx5_0"), (levels{"NODE", "NODE", "SYS", "SYS"}));
  EXPECT_EQ(md->nic_topology.count("NIC0"), 0u);
}

TEST(topo_parser, legacy_header_names_devices_and_na_affinity) {
  auto matrix = parse_topo_matrix(fixture("pcie_2gpu_legacy.txt"));
  ASSERT_TRUE(matrix.has_value()) << matrix.error().to_string();
  EXPECT_EQ(matrix->columns, (levels{"GPU0", "GPU1", "mlx5_0", "mlx5_1"}));
  EXPECT_TRUE(matrix->nic_names.empty());
  std::vector<gpu_query_row> query = {{0, "GPU-a", "0000:03:00.0", "", "", ""},
                                      {1, "GPU-b", "0000:04:00.0", "", "", ""}};
  auto md = build_gpu_metadata("n", query, *matrix);
  ASSERT_TRUE(md.has_value()) << md.error().to_string();
  EXPECT_EQ(md->gpus[0].numa_node, -1);
  EXPECT_EQ(md->gpus[0].cpu_affinity, "N/A");
  EXPECT_EQ(md->nic_topology.at("mlx5_0"), (levels{"PHB", "PHB"}));
  EXPECT_EQ(md->nic_topology.at("mlx5_1"), (levels{"SYS", "SYS"}));
}

TEST(topo_parser, spaces_instead_of_tabs_and_no_trailing_columns) {
  auto matrix = parse_topo_matrix("        GPU0    GPU1    NIC0\n"
                                  "GPU0     X      NV4     SYS\n"
                                  "GPU1    NV4      X      PIX\n"
                                  "NIC0    SYS     PIX      X \n"
                                  "\n"
                                  "NIC Legend:\n"
                                  "\n"
                                  "  NIC0: mlx5_4\n");
  ASSERT_TRUE(matrix.has_value()) << matrix.error().to_string();
  EXPECT_EQ(matrix->gpus[1].levels, (levels{"NV4", "X", "PIX"}));
  EXPECT_TRUE(matrix->gpus[1].cpu_affinity.empty());
  EXPECT_EQ(matrix->device_name("NIC0"), "mlx5_4");
}

TEST(topo_parser, malformed_matrices) {
  auto empty = parse_topo_matrix("");
  ASSERT_FALSE(empty.has_value());
  EXPECT_NE(empty.error().what.find("no header"), std::string::npos);
  auto header_only = parse_topo_matrix("\tGPU0\tGPU1\tCPU Affinity\n");
  ASSERT_FALSE(header_only.has_value());
  EXPECT_NE(header_only.error().what.find("no GPU rows"), std::string::npos);
  auto truncated =
    parse_topo_matrix("\tGPU0\tGPU1\tNIC0\nGPU0\t X \tNV4\nGPU1\tNV4\t X \tPIX\n");
  ASSERT_FALSE(truncated.has_value());
  EXPECT_EQ(truncated.error().where, "topo -m line 2");
  EXPECT_NE(truncated.error().what.find("GPU0 has 2 levels for 3 columns"),
            std::string::npos);
  EXPECT_FALSE(parse_topo_matrix("No devices were found\n").has_value());
}

TEST(topo_parser, query_csv_forms_and_errors) {
  auto rows = parse_gpu_query_csv(
    "0, GPU-455d8f70-2051-db6c-0430-ffc457bff834, 00000000:03:00.0, 1324023049334\r\n"
    "\n"
    "1,GPU-b,0000:04:00.0,[N/A]\n");
  ASSERT_TRUE(rows.has_value()) << rows.error().to_string();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].pci_address, "0000:03:00.0");
  EXPECT_EQ((*rows)[0].serial, "1324023049334");
  EXPECT_EQ((*rows)[1].serial, "");
  auto short_row = parse_gpu_query_csv("0, GPU-a, 00000000:03:00.0\n");
  ASSERT_FALSE(short_row.has_value());
  EXPECT_EQ(short_row.error().where, "query-gpu line 1");
  auto bad_index =
    parse_gpu_query_csv("0, GPU-a, 0000:03:00.0, 1\nx, GPU-b, 0000:04:00.0, 2\n");
  ASSERT_FALSE(bad_index.has_value());
  EXPECT_EQ(bad_index.error().where, "query-gpu line 2");
  auto bad_pci = parse_gpu_query_csv("0, GPU-a, not-a-bus, 1\n");
  ASSERT_FALSE(bad_pci.has_value());
  EXPECT_NE(bad_pci.error().what.find("pci.bus_id"), std::string::npos);
}

TEST(topo_parser, six_field_query_gives_names_and_the_driver) {
  // A real H200 VM (driver 580.159.04), captured on the device machine.
  auto rows = parse_gpu_query_csv(fixture("h200_1gpu_vm_driver580_query6.csv"));
  ASSERT_TRUE(rows.has_value()) << rows.error().to_string();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].name, "NVIDIA H200");
  EXPECT_EQ((*rows)[0].driver_version, "580.159.04");
  EXPECT_EQ((*rows)[0].pci_address, "0000:00:06.0");
  auto matrix = parse_topo_matrix(fixture("h100_1gpu_vm_driver580.txt"));
  ASSERT_TRUE(matrix.has_value());
  auto md = build_gpu_metadata("vm", *rows, *matrix);
  ASSERT_TRUE(md.has_value()) << md.error().to_string();
  EXPECT_EQ(md->driver_version, "580.159.04");
  EXPECT_EQ(md->gpus[0].device_name, "NVIDIA H200");
  auto five = parse_gpu_query_csv("0, GPU-a, 0000:03:00.0, 1, NVIDIA H100\n");
  ASSERT_FALSE(five.has_value());
  EXPECT_NE(five.error().what.find("has 5 fields"), std::string::npos);
}

TEST(topo_parser, nvlink_remote_info_of_an_nvswitch_board) {
  auto links = parse_nvlink_remotes(fixture("a100_2gpu_nvlink_R.txt"));
  ASSERT_EQ(links.size(), 2u);
  ASSERT_EQ(links[0].size(), 4u);
  EXPECT_EQ(links[0][0], (nvlink_info{0, "0008:00:00.0", 29}));
  EXPECT_EQ(links[1][3], (nvlink_info{3, "0005:00:00.0", 33}));
  gpu_metadata md;
  md.gpus.resize(3);
  for (int i = 0; i < 3; ++i) {
    md.gpus[static_cast<size_t>(i)].gpu_id = i;
    md.gpus[static_cast<size_t>(i)].pci_address = "0000:0" + std::to_string(i) + ":00.0";
  }
  attach_nvlinks(md, links);
  EXPECT_EQ(md.gpus[1].nvlinks, links[1]);
  EXPECT_TRUE(md.gpus[2].nvlinks.empty());
  EXPECT_EQ(md.nvswitches, (std::vector<std::string>{"0005:00:00.0", "0008:00:00.0"}));
}

TEST(topo_parser, nvlink_bridges_odd_spacing_and_garbage) {
  // Two GPUs bridged to each other: the far ends are GPUs, not switches.
  auto links = parse_nvlink_remotes("GPU 0: NVIDIA RTX A6000 (UUID: GPU-a)\n"
                                    "  Link 0: Remote Device 00000000:02:00.0: Link 0\n"
                                    "GPU 1: NVIDIA RTX A6000 (UUID: GPU-b)\r\n"
                                    "Link 0:   Remote Device 0000:01:00.0:   Link 0\r\n");
  gpu_metadata md;
  md.gpus = {gpu_info{}, gpu_info{}};
  md.gpus[0].pci_address = "0000:01:00.0";
  md.gpus[1].gpu_id = 1;
  md.gpus[1].pci_address = "0000:02:00.0";
  attach_nvlinks(md, links);
  EXPECT_EQ(md.gpus[1].nvlinks.size(), 1u);
  EXPECT_TRUE(md.nvswitches.empty());
  // No NVLink (a real H200 VM prints nothing), errors and truncation.
  EXPECT_TRUE(parse_nvlink_remotes("").empty());
  EXPECT_TRUE(parse_nvlink_remotes("NVIDIA-SMI has failed because it couldn't "
                                   "communicate with the NVIDIA driver.\n")
                .empty());
  EXPECT_TRUE(
    parse_nvlink_remotes("  Link 0: Remote Device 0000:42:00.0: Link 5\n").empty());
  auto cut =
    parse_nvlink_remotes("GPU 0: x\n Link 0: Remote Device 0000:42:00.0: Link\n"
                         " Link 1: Remote Device nowhere: Link 3\n"
                         " Link 2: Remote Device 0000:42:00.0: Link 99999999999\n"
                         "GPU x: y\n Link 3: Remote Device 0000:43:00.0: Link 4\n");
  // A far port cut off or beyond reading is -1 (the switch is still known);
  // a device that is no PCI address drops the link; the links after a header
  // it cannot read are dropped rather than given to the GPU before it.
  ASSERT_EQ(cut.size(), 1u);
  ASSERT_EQ(cut[0].size(), 2u);
  EXPECT_EQ(cut[0][0], (nvlink_info{0, "0000:42:00.0", -1}));
  EXPECT_EQ(cut[0][1], (nvlink_info{2, "0000:42:00.0", -1}));
}

TEST(topo_parser, query_gpu_missing_from_matrix) {
  auto matrix = parse_topo_matrix("\tGPU0\tNIC0\nGPU0\t X \tPIX\n");
  ASSERT_TRUE(matrix.has_value());
  std::vector<gpu_query_row> query = {{0, "GPU-a", "0000:03:00.0", "", "", ""},
                                      {1, "GPU-b", "0000:04:00.0", "", "", ""}};
  auto md = build_gpu_metadata("n", query, *matrix);
  ASSERT_FALSE(md.has_value());
  EXPECT_NE(md.error().what.find("GPU1"), std::string::npos);
}

} // namespace
} // namespace vigil::agent
