#include "actors/agent/xid/xid_parser.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace vigil::agent {
namespace {

xid_record expect_xid(std::string_view line) {
  kernel_log_parser parser;
  auto parsed = parser.parse(line);
  const auto* xid = std::get_if<xid_record>(&parsed.record);
  EXPECT_NE(xid, nullptr) << line;
  return xid != nullptr ? *xid : xid_record{};
}

std::string_view malformed_kind(std::string_view line) {
  kernel_log_parser parser;
  auto parsed = parser.parse(line);
  const auto* bad = std::get_if<malformed_record>(&parsed.record);
  return bad != nullptr ? bad->kind : std::string_view{"(not malformed)"};
}

sxid_record expect_sxid(std::string_view line) {
  kernel_log_parser parser;
  auto parsed = parser.parse(line);
  const auto* sxid = std::get_if<sxid_record>(&parsed.record);
  EXPECT_NE(sxid, nullptr) << line;
  return sxid != nullptr ? *sxid : sxid_record{};
}

TEST(pci_entity_value, forms) {
  EXPECT_EQ(pci_entity_value("PCI:0000:03:00"), "0000:03:00");
  EXPECT_EQ(pci_entity_value("0000:03:00.0"), "0000:03:00");
  EXPECT_EQ(pci_entity_value("00000000:B3:00.0"), "0000:b3:00");
  EXPECT_EQ(pci_entity_value("03:00"), "0000:03:00");
  EXPECT_EQ(pci_entity_value("0009:01:00"), "0009:01:00");
  EXPECT_EQ(pci_entity_value("0000:03:0"), "0000:03:00");
  EXPECT_EQ(pci_entity_value("nonsense"), "");
}

TEST(xid_parser, non_nvidia_lines_are_skipped) {
  kernel_log_parser parser;
  for (std::string_view line :
       {"", "[    5.123456] nvidia: loading out-of-tree module taints kernel.",
        "Oct 23 11:38:02 node1 CRON[4242]: (root) CMD (debian-sa1 1 1)",
        "[ 12.1] mlx5_core 0000:0c:00.0: Port module event: module 0, Cable plugged"}) {
    auto parsed = parser.parse(line);
    EXPECT_FALSE(parsed.is_nvidia()) << line;
  }
}

TEST(xid_parser, seed_000_xid48) {
  auto xid = expect_xid("NVRM: Xid (PCI:0000:03:00): 48, pid=91237, name=nv-hostengine, "
                        "Ch 00000076, errorString CTX SWITCH TIMEOUT, Info 0x3c046");
  EXPECT_EQ(xid.pci, "0000:03:00");
  EXPECT_EQ(xid.code, 48);
  ASSERT_TRUE(xid.pid);
  EXPECT_EQ(*xid.pid, 91237);
  EXPECT_EQ(xid.process_name, "nv-hostengine");
  EXPECT_EQ(xid.detail, "Ch 00000076, errorString CTX SWITCH TIMEOUT, Info 0x3c046");
  EXPECT_TRUE(xid.detail_problem.empty());
}

TEST(xid_parser, xid_with_each_prefix) {
  for (std::string_view line :
       {"[  123.456789] NVRM: Xid (PCI:0000:03:00): 48, pid=1, name=a, Ch 1",
        "4,1234,123456789,-;NVRM: Xid (PCI:0000:03:00): 48, pid=1, name=a, Ch 1",
        "Oct 23 11:38:02 node1 kernel: NVRM: Xid (PCI:0000:03:00): 48, pid=1, name=a, Ch "
        "1",
        "<4>Oct 23 11:38:02 node1 kernel: [ 1.5] NVRM: Xid (PCI:0000:03:00): 48, pid=1, "
        "name=a, Ch 1",
        "2025-10-23T11:38:02.207323+00:00 node1 kernel: NVRM: Xid (PCI:0000:03:00): 48, "
        "pid=1, name=a, Ch 1"}) {
    auto xid = expect_xid(line);
    EXPECT_EQ(xid.code, 48) << line;
    EXPECT_EQ(xid.pci, "0000:03:00") << line;
    EXPECT_EQ(xid.process_name, "a") << line;
    EXPECT_EQ(xid.detail, "Ch 1") << line;
  }
}

TEST(xid_parser, pci_with_and_without_prefix_and_function) {
  EXPECT_EQ(expect_xid("NVRM: Xid (0000:03:00): 31, pid=1").pci, "0000:03:00");
  EXPECT_EQ(expect_xid("NVRM: Xid (PCI:0000:03:00.0): 31").pci, "0000:03:00");
  EXPECT_EQ(expect_xid("NVRM: Xid (PCI:00000000:B3:00.0): 31").pci, "0000:b3:00");
  EXPECT_EQ(expect_xid("NVRM: Xid ( PCI:0000:03:00 ) : 31").pci, "0000:03:00");
}

TEST(xid_parser, unknown_pid_and_name) {
  auto quoted = expect_xid(
    "NVRM: Xid (PCI:0000:05:00): 74, pid='<unknown>', name=<unknown>, NVLink: x");
  EXPECT_FALSE(quoted.pid);
  EXPECT_EQ(quoted.process_name, "<unknown>");
  EXPECT_EQ(quoted.detail, "NVLink: x");
  auto bare =
    expect_xid("NVRM: Xid (PCI:0000:05:00): 74, pid=<unknown>, name=<unknown>, x");
  EXPECT_FALSE(bare.pid);
  EXPECT_EQ(bare.process_name, "<unknown>");
}

TEST(xid_parser, without_pid_or_name_or_detail) {
  auto xid = expect_xid("NVRM: Xid (PCI:0000:06:00): 79, GPU has fallen off the bus.");
  EXPECT_FALSE(xid.pid);
  EXPECT_TRUE(xid.process_name.empty());
  EXPECT_EQ(xid.detail, "GPU has fallen off the bus.");
  auto code_only = expect_xid("NVRM: Xid (PCI:0000:06:00): 79");
  EXPECT_EQ(code_only.code, 79);
  EXPECT_TRUE(code_only.detail.empty());
}

TEST(xid_parser, odd_spacing) {
  auto xid = expect_xid(
    "NVRM:  Xid   (PCI:0000:03:00)  :  48 ,  pid=7 ,  name=x y ,  Ch 00000076  ");
  EXPECT_EQ(xid.code, 48);
  EXPECT_EQ(*xid.pid, 7);
  EXPECT_EQ(xid.process_name, "x y");
  EXPECT_EQ(xid.detail, "Ch 00000076");
}

TEST(xid_parser, truncated_detail_is_still_an_xid) {
  auto xid =
    expect_xid("[ 1.0] NVRM: Xid (PCI:0000:03:00): 48, pid=91237, name=nv-hoste");
  EXPECT_EQ(xid.code, 48);
  EXPECT_EQ(xid.process_name, "nv-hoste");
  auto pid_cut = expect_xid("NVRM: Xid (PCI:0000:03:00): 48, pid=91");
  EXPECT_EQ(*pid_cut.pid, 91);
}

TEST(xid_parser, malformed_xid_lines) {
  for (std::string_view line :
       {"NVRM: Xid (PCI:0000:03:0",
        "NVRM: Xid (PCI:0000:03:00): ", "NVRM: Xid (PCI:0000:03:00)",
        "NVRM: Xid (PCI:0000:03:00): INVALID, pid=1", "NVRM: Xid: 31",
        "NVRM: Xid (PCI:zz:qq:00): 31", "NVRM: Xid (PCI:0000:03:00): 48abc"}) {
    EXPECT_EQ(malformed_kind(line), "xid") << line;
  }
}

TEST(xid_parser, other_nvrm_lines) {
  kernel_log_parser parser;
  for (std::string_view line :
       {"NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.129.03",
        "NVRM: GPU Board Serial Number: 1324023049334"}) {
    auto parsed = parser.parse(line);
    EXPECT_TRUE(std::holds_alternative<other_nvidia_line>(parsed.record)) << line;
  }
}

TEST(xid_parser, xid13_graphics_location) {
  auto xid =
    expect_xid("NVRM: Xid (PCI:0000:04:00.0): 13, pid='<unknown>', "
               "name=<unknown>, Graphics SM Warp Exception on (GPC 2, TPC 1, SM 0): "
               "Out Of Range Address");
  ASSERT_TRUE(xid.graphics);
  EXPECT_EQ(xid.graphics->gpc, 2);
  EXPECT_EQ(xid.graphics->tpc, 1);
  EXPECT_EQ(xid.graphics->sm, 0);
  auto partial =
    expect_xid("NVRM: Xid (PCI:0000:04:00): 13, Graphics Exception on (GPC 5, TPC");
  ASSERT_TRUE(partial.graphics);
  EXPECT_EQ(partial.graphics->gpc, 5);
  EXPECT_EQ(partial.graphics->tpc, -1);
  EXPECT_FALSE(
    expect_xid("NVRM: Xid (PCI:0000:04:00): 13, Graphics Exception: ESR").graphics);
}

TEST(xid_parser, xid74_seven_registers) {
  auto xid =
    expect_xid("NVRM: Xid (PCI:0000:05:00): 74, pid=<unknown>, name=<unknown>, "
               "NVLink: fatal error detected on link 14(0x10, 0x0, 0x20000, 0x0, "
               "0x100000, 0x0, 0x0)");
  EXPECT_EQ(xid.nvlink_registers,
            (std::vector<std::uint32_t>{0x10, 0, 0x20000, 0, 0x100000, 0, 0}));
  ASSERT_TRUE(xid.nvlink_link);
  EXPECT_EQ(*xid.nvlink_link, 14);
  EXPECT_TRUE(xid.detail_problem.empty());
}

TEST(xid_parser, xid74_space_separated_and_truncated) {
  auto spaced =
    expect_xid("NVRM: Xid (PCI:0000:05:00): 74, NVLink: fatal error detected on "
               "link 0 (0x00000001 0x00000000 0x00000000 0x00000000 0x00000000 "
               "0x00000000 0x00000000)");
  EXPECT_EQ(spaced.nvlink_registers.size(), 7u);
  EXPECT_EQ(spaced.nvlink_registers[0], 1u);
  auto cut = expect_xid("NVRM: Xid (PCI:0000:05:00): 74, NVLink: fatal error detected on "
                        "link 4(0x0, 0x10");
  EXPECT_EQ(cut.nvlink_registers, (std::vector<std::uint32_t>{0, 0x10}));
  EXPECT_EQ(cut.detail_problem, "xid74_registers");
  auto none = expect_xid("NVRM: Xid (PCI:0000:05:00): 74, NVLink: fatal error");
  EXPECT_EQ(none.detail_problem, "xid74_registers");
}

TEST(xid_parser, nvlink5_r575_form) {
  auto xid =
    expect_xid("[171167.620236] NVRM: Xid (PCI:0009:01:00): 149, NETIR_LINK_EVT  "
               "Fatal   XC0 i0 Link 01 (0x021425c6 0x00000000 0x00000000 0x00000000 "
               "0x00000000 0x00000000)");
  EXPECT_EQ(xid.pci, "0009:01:00");
  ASSERT_TRUE(xid.nvlink5);
  const auto& f = *xid.nvlink5;
  EXPECT_EQ(f.subcode, "NETIR_LINK_EVT");
  EXPECT_EQ(f.fatal, true);
  EXPECT_EQ(f.cross_contain, 0);
  EXPECT_EQ(f.injected, 0);
  EXPECT_EQ(f.link, 1);
  EXPECT_EQ(f.intr_info, 0x021425c6u);
  EXPECT_EQ(f.error_status, 0u);
  EXPECT_EQ(f.debug_data.size(), 4u);
  EXPECT_TRUE(xid.detail_problem.empty());
}

TEST(xid_parser, nvlink5_variants) {
  auto nonfatal =
    expect_xid("NVRM: Xid (PCI:0000:00:1e): 146, TLW_RX_PIPE1 Nonfatal XC0 i0 "
               "Link 03 (0x00000010 0x00000020 0x00000030 0x00000040)");
  EXPECT_EQ(nonfatal.nvlink5->fatal, false);
  EXPECT_EQ(nonfatal.nvlink5->link, 3);
  EXPECT_EQ(nonfatal.nvlink5->error_status, 0x20u);
  auto with_pid =
    expect_xid("NVRM: Xid (PCI:0000:00:1e): 145, pid=4, name=<unknown>, "
               "RLW_SRC_TRACK Fatal XC0 i1 Link 00 (0x00000001 0x00000002)");
  EXPECT_EQ(with_pid.nvlink5->subcode, "RLW_SRC_TRACK");
  EXPECT_EQ(with_pid.nvlink5->injected, 1);
  EXPECT_EQ(*with_pid.pid, 4);
  auto pre_r575 = expect_xid("NVRM: Xid (PCI:0000:00:1e): 149, NETIR_LINK_EVT Fatal XC 1 "
                             "i 2 Link 01 [0x0000000a]");
  EXPECT_EQ(pre_r575.nvlink5->cross_contain, 1);
  EXPECT_EQ(pre_r575.nvlink5->injected, 2);
  EXPECT_EQ(pre_r575.nvlink5->intr_info, 0xau);
  EXPECT_FALSE(pre_r575.nvlink5->error_status);
}

TEST(xid_parser, nvlink5_missing_and_truncated_fields) {
  auto no_words =
    expect_xid("NVRM: Xid (PCI:0000:00:1e): 148, NVLPW_CTRL Fatal XC0 i0 Link 05");
  EXPECT_EQ(no_words.nvlink5->link, 5);
  EXPECT_FALSE(no_words.nvlink5->intr_info);
  EXPECT_EQ(no_words.detail_problem, "nvlink5_fields");
  auto cut =
    expect_xid("NVRM: Xid (PCI:0009:01:00): 146, TLW_RX_PIPE0 Fatal XC0 i0 Link 07 "
               "(0x0000");
  EXPECT_EQ(cut.detail_problem, "nvlink5_fields");
  auto bare = expect_xid("NVRM: Xid (PCI:0000:00:1e): 145, driver-specific detail");
  EXPECT_EQ(bare.code, 145);
  EXPECT_EQ(bare.detail_problem, "nvlink5_fields");
}

TEST(xid_parser, xid154_every_action) {
  struct sample {
    std::string_view text;
    int to_code;
    std::string_view to_label;
  };
  for (auto s :
       {sample{"0x0 (None) to 0x1 (GPU Reset Required)", 1, "GPU Reset Required"},
        sample{"0x1 (GPU Reset Required) to 0x2 (Node Reboot Required)", 2,
               "Node Reboot Required"},
        sample{"0x0 (None) to 0x3 (Drain P2P)", 3, "Drain P2P"},
        sample{"0x0 (None) to 0x4 (Drain and Reset)", 4, "Drain and Reset"},
        sample{"0x1 (GPU Reset Required) to 0x0 (None)", 0, "None"}}) {
    auto xid =
      expect_xid("NVRM: Xid (PCI:0000:06:00): 154, GPU recovery action changed from "
                 + std::string(s.text));
    ASSERT_TRUE(xid.recovery) << s.text;
    EXPECT_EQ(xid.recovery->to_code, s.to_code) << s.text;
    EXPECT_EQ(xid.recovery->to_label, s.to_label) << s.text;
    EXPECT_TRUE(xid.detail_problem.empty());
  }
}

TEST(xid_parser, xid154_truncated) {
  auto cut_label = expect_xid("NVRM: Xid (PCI:0000:06:00): 154, GPU recovery action "
                              "changed from 0x0 (None) to 0x1 (GPU Re");
  EXPECT_EQ(cut_label.recovery->to_code, 1);
  EXPECT_EQ(cut_label.recovery->to_label, "GPU Re");
  auto no_to = expect_xid(
    "NVRM: Xid (PCI:0000:06:00): 154, GPU recovery action changed from 0x0 (No");
  EXPECT_EQ(no_to.detail_problem, "xid154_action");
  EXPECT_EQ(no_to.recovery->from_code, 0);
}

TEST(xid_parser, xid45_caused_by_previous) {
  auto caused =
    expect_xid("NVRM: Xid (PCI:0008:01:00): 45, pid=2231, name=python3, channel "
               "0x00000010, intr 00000000. RC caused by previous Xid 149");
  EXPECT_EQ(caused.caused_by_xid, 149);
  auto solo =
    expect_xid("NVRM: Xid (PCI:0008:01:00): 45, pid=2231, name=python3, Ch 00000010");
  EXPECT_FALSE(solo.caused_by_xid);
}

TEST(xid_parser, sxid_fatal_with_link) {
  auto sxid =
    expect_sxid("[  500.000000] nvidia-nvswitch3: SXid (PCI:0000:86:00.0): 20034, "
                "Fatal, Link 30 LTSSM Fault Up");
  EXPECT_EQ(sxid.nvswitch, 3);
  EXPECT_EQ(sxid.pci, "0000:86:00");
  EXPECT_EQ(sxid.code, 20034);
  EXPECT_EQ(sxid.fatal, true);
  EXPECT_EQ(sxid.link, 30);
  EXPECT_EQ(sxid.text, "LTSSM Fault Up");
  EXPECT_FALSE(sxid.data_only);
}

TEST(xid_parser, sxid_non_fatal_and_forms_without_severity) {
  auto nonfatal =
    expect_sxid("nvidia-nvswitch0: SXid (PCI:0000:c1:00.0): 12028, Non-fatal, "
                "Link 46 MC TS crumbstore MCTO (First)");
  EXPECT_EQ(nonfatal.fatal, false);
  EXPECT_EQ(nonfatal.link, 46);
  EXPECT_EQ(nonfatal.text, "MC TS crumbstore MCTO (First)");
  auto data = expect_sxid(
    "nvidia-nvswitch3: SXid (PCI:0000:86:00.0): 20034, Data {0x00000000, 0x00000001}");
  EXPECT_FALSE(data.fatal);
  EXPECT_TRUE(data.data_only);
  auto halted =
    expect_sxid("nvidia-nvswitch1: SXid (PCI:0000:05:00.0): 10001, SOE HALTED");
  EXPECT_FALSE(halted.fatal);
  EXPECT_FALSE(halted.link);
  EXPECT_EQ(halted.text, "SOE HALTED");
  auto spaced =
    expect_sxid("nvidia-nvswitch2:  SXid ( PCI:0000:87:00.0 ) :  22013 ,  Fatal ,"
                "  Link  7 ,  Minion Link DLREQ interrupt");
  EXPECT_EQ(spaced.link, 7);
  EXPECT_EQ(spaced.text, "Minion Link DLREQ interrupt");
}

TEST(xid_parser, sxid_malformed) {
  EXPECT_EQ(malformed_kind("nvidia-nvswitch1: SXid (PCI:0000:05:0"), "sxid");
  EXPECT_EQ(malformed_kind("nvidia-nvswitch1: SXid (PCI:0000:05:00.0): "), "sxid");
}

TEST(xid_parser, gpu_at_pci_teaches_the_uuid) {
  kernel_log_parser parser;
  auto parsed =
    parser.parse("NVRM: GPU at PCI:0000:03:00: GPU-455d8f70-2051-db6c-0430-ffc457bff834");
  const auto* gpu = std::get_if<gpu_at_pci_record>(&parsed.record);
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->pci, "0000:03:00");
  EXPECT_EQ(gpu->uuid, "GPU-455d8f70-2051-db6c-0430-ffc457bff834");
  EXPECT_EQ(malformed_kind("NVRM: GPU at PCI:0000:03:00: GPU-455d8f70-2051-db6c"),
            "gpu_at_pci");
  EXPECT_EQ(malformed_kind("NVRM: GPU at PCI:0000:03:00:"), "gpu_at_pci");
}

TEST(xid_parser, reset_occurred) {
  kernel_log_parser parser;
  auto parsed = parser.parse("Oct 23 11:50:00 node1 gpu-reset[7781]: GPU reset occurred: "
                             "GPU-455d8f70-2051-db6c-0430-ffc457bff834");
  const auto* reset = std::get_if<reset_occurred_record>(&parsed.record);
  ASSERT_NE(reset, nullptr);
  EXPECT_EQ(reset->uuid, "GPU-455d8f70-2051-db6c-0430-ffc457bff834");
  EXPECT_EQ(malformed_kind("GPU reset occurred: GPU-455d8f70-2051"), "reset_occurred");
  EXPECT_EQ(malformed_kind("GPU reset occurred:"), "reset_occurred");
}

/// `lines` must outlive the result: parsed lines view into them.
std::vector<parsed_line> parse_all(kernel_log_parser& parser,
                                   const std::vector<std::string>& lines) {
  std::vector<parsed_line> out;
  for (const auto& line : lines)
    out.push_back(parser.parse(line));
  return out;
}

TEST(xid_parser, fallen_off_bus_dmesg_three_lines) {
  kernel_log_parser parser;
  std::vector<std::string> lines = {
    "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0",
    "               NVRM: (PCI ID: 10de:2330) installed in this system has",
    "               NVRM: fallen off the bus and is not responding to commands."};
  auto parsed = parse_all(parser, lines);
  EXPECT_TRUE(std::holds_alternative<other_nvidia_line>(parsed[0].record));
  EXPECT_TRUE(std::holds_alternative<other_nvidia_line>(parsed[1].record));
  const auto* xid = std::get_if<xid_record>(&parsed[2].record);
  ASSERT_NE(xid, nullptr);
  EXPECT_EQ(xid->code, 79);
  EXPECT_TRUE(xid->fallen_off_bus);
  EXPECT_EQ(xid->pci, "0000:b3:00");
  EXPECT_EQ(xid->pci_device_id, "10de:2330");
  ASSERT_TRUE(parsed[2].line.kernel_time_us);
  EXPECT_EQ(*parsed[2].line.kernel_time_us, 1843308145);
  EXPECT_NE(xid->detail.find("fallen off the bus"), std::string::npos);
  EXPECT_EQ(parser.abandoned_fallen_off(), 0u);
}

TEST(xid_parser, fallen_off_bus_journald_without_pci_id) {
  kernel_log_parser parser;
  const std::vector<std::string> lines = {
    "Oct 23 11:51:00 node1 kernel: NVRM: The NVIDIA GPU 0000:b4:00.0",
    "Oct 23 11:51:00 node1 kernel: NVRM: installed in this system has",
    "Oct 23 11:51:00 node1 kernel: something else entirely",
    "Oct 23 11:51:00 node1 kernel: NVRM: fallen off the bus and is not responding to "
    "commands."};
  auto parsed = parse_all(parser, lines);
  const auto* xid = std::get_if<xid_record>(&parsed[3].record);
  ASSERT_NE(xid, nullptr);
  EXPECT_EQ(xid->pci, "0000:b4:00");
  EXPECT_TRUE(xid->pci_device_id.empty());
  EXPECT_EQ(parsed[3].line.syslog_timestamp, "Oct 23 11:51:00");
}

TEST(xid_parser, fallen_off_bus_on_one_line) {
  auto xid = expect_xid("NVRM: The NVIDIA GPU 0000:b3:00.0 fallen off the bus and is not "
                        "responding to commands.");
  EXPECT_TRUE(xid.fallen_off_bus);
  EXPECT_EQ(xid.code, 79);
  EXPECT_EQ(xid.pci, "0000:b3:00");
}

TEST(xid_parser, fallen_off_bus_interrupted_by_xid_is_not_reported) {
  kernel_log_parser parser;
  const std::vector<std::string> lines = {
    "NVRM: The NVIDIA GPU 0000:b3:00.0", "NVRM: Xid (PCI:0000:b3:00.0): 79",
    "NVRM: fallen off the bus and is not responding."};
  auto parsed = parse_all(parser, lines);
  EXPECT_TRUE(std::holds_alternative<xid_record>(parsed[1].record));
  EXPECT_FALSE(std::get<xid_record>(parsed[1].record).fallen_off_bus);
  EXPECT_TRUE(std::holds_alternative<other_nvidia_line>(parsed[2].record));
}

TEST(xid_parser, xid79_line_during_fallen_off_message_stays_an_xid) {
  kernel_log_parser parser;
  const std::vector<std::string> lines = {
    "NVRM: The NVIDIA GPU 0000:b3:00.0", "NVRM: installed in this system has",
    "NVRM: Xid (PCI:0000:b3:00): 79, pid=1, name=a, GPU has fallen off the bus."};
  auto parsed = parse_all(parser, lines);
  const auto* xid = std::get_if<xid_record>(&parsed[2].record);
  ASSERT_NE(xid, nullptr);
  EXPECT_FALSE(xid->fallen_off_bus);
  EXPECT_EQ(xid->pid, 1);
  EXPECT_EQ(parser.abandoned_fallen_off(), 1u);
}

TEST(xid_parser, fallen_off_bus_truncated_is_counted) {
  kernel_log_parser parser;
  std::vector<std::string> lines = {"NVRM: The NVIDIA GPU 0000:b5:00.0",
                                    "NVRM: installed in this system has"};
  for (int i = 0; i < 6; ++i)
    lines.push_back("usb 1-2: new high-speed USB device number 3 using xhci_hcd");
  auto parsed = parse_all(parser, lines);
  for (const auto& p : parsed)
    EXPECT_FALSE(std::holds_alternative<xid_record>(p.record));
  EXPECT_EQ(parser.abandoned_fallen_off(), 1u);
  EXPECT_EQ(malformed_kind("NVRM: The NVIDIA GPU 0000:b"), "fallen_off_bus");
}

TEST(xid_parser, unsupported_gpu_message_is_not_fallen_off) {
  kernel_log_parser parser;
  const std::vector<std::string> lines = {
    "NVRM: The NVIDIA GPU 0000:01:00.0 (PCI ID: 10de:1b80)",
    "NVRM: installed in this system is not supported by the",
    "NVRM: NVIDIA 535.129.03 driver release."};
  auto parsed = parse_all(parser, lines);
  for (const auto& p : parsed)
    EXPECT_FALSE(std::holds_alternative<xid_record>(p.record));
  EXPECT_EQ(parser.abandoned_fallen_off(), 0u);
}

TEST(xid_parser, garbage_never_crashes) {
  kernel_log_parser parser;
  std::string line =
    "[ 1.0] NVRM: Xid (PCI:0000:03:00): 74, pid=1, name=a, NVLink: link "
    "3(0x1, 0x2, 0x3) nvidia-nvswitch1: SXid (PCI:0000:05:00.0): 1, Fatal, "
    "Link 2 x GPU reset occurred: GPU-455d8f70-2051-db6c-0430-ffc457bff834";
  for (size_t n = 0; n <= line.size(); ++n)
    parser.parse(std::string_view(line).substr(0, n));
  for (size_t n = 0; n <= line.size(); ++n)
    parser.parse(std::string_view(line).substr(n));
  SUCCEED();
}

} // namespace
} // namespace vigil::agent
