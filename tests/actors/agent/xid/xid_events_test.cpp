#include "actors/agent/xid/xid_events.hpp"

#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/source_tree.hpp"

namespace vigil::agent {
namespace {

using test::config_dir;
using test::source_dir;

using namespace std::chrono_literals;

const xid_catalog& catalog() {
  static const xid_catalog loaded = [] {
    auto c = xid_catalog::load(source_dir() + "/config");
    EXPECT_TRUE(c.has_value()) << c.error().to_string();
    return c.has_value() ? *c : xid_catalog{};
  }();
  return loaded;
}

constexpr std::string_view uuid = "GPU-455d8f70-2051-db6c-0430-ffc457bff834";
const wall_time t0 = from_unix(1761219482, 207323127);

/// Feeds lines through a parser and a builder; events in order.
class event_fixture : public ::testing::Test {
protected:
  std::optional<health_event> feed(const std::string& line, wall_time at = t0) {
    lines_.push_back(line);
    auto parsed = parser_.parse(lines_.back());
    return builder_.build(parsed, lines_.back(), at);
  }

  health_event expect_event(const std::string& line, wall_time at = t0) {
    auto event = feed(line, at);
    EXPECT_TRUE(event) << line;
    return event ? *event : health_event{};
  }

  std::string entity_of(const health_event& e, std::string_view type) {
    for (const auto& x : e.entities)
      if (x.type == type)
        return x.value;
    return "";
  }

  std::vector<std::string> lines_ = std::vector<std::string>(); // parsed lines view here
  kernel_log_parser parser_;
  xid_event_builder builder_{catalog(), {"node1", "boot-1"}};
};

TEST_F(event_fixture, seed_000_xid48_event) {
  EXPECT_FALSE(feed("NVRM: GPU at PCI:0000:03:00: " + std::string(uuid)));
  EXPECT_FALSE(feed("NVRM: GPU Board Serial Number: 1324023049334"));
  auto e =
    expect_event("NVRM: Xid (PCI:0000:03:00): 48, pid=91237, name=nv-hostengine, Ch "
                 "00000076, errorString CTX SWITCH TIMEOUT, Info 0x3c046");
  EXPECT_EQ(e.agent, "syslog-health-monitor");
  EXPECT_EQ(e.component_class, "GPU");
  EXPECT_EQ(e.check_name, "SysLogsXIDError");
  EXPECT_TRUE(e.is_fatal);
  EXPECT_FALSE(e.is_healthy);
  EXPECT_EQ(e.action, recommended_action::component_reset);
  EXPECT_EQ(e.error_codes, std::vector<std::string>{"48"});
  EXPECT_EQ(e.entities, (std::vector<entity>{{"PCI", "0000:03:00"},
                                             {"GPU_UUID", std::string(uuid)}}));
  EXPECT_EQ(e.node_name, "node1");
  EXPECT_EQ(e.generated, t0);
  EXPECT_EQ(e.message, "ROBUST_CHANNEL_GPU_ECC_DBE");
  EXPECT_EQ(e.metadata.at("pid"), "91237");
  EXPECT_EQ(e.metadata.at("processName"), "nv-hostengine");
  EXPECT_EQ(e.metadata.at("immediateBucket"), "WORKFLOW_XID_48");
  EXPECT_EQ(e.metadata.at("decision"), "WORKFLOW_XID_48 solo: reset");
  EXPECT_NE(e.metadata.at("line").find("Xid (PCI:0000:03:00): 48"), std::string::npos);
  EXPECT_EQ(e.id.size(), 32u);
  // The JSON form passes the ingest decoder.
  auto decoded = decode_health_event(encode_health_event(e));
  ASSERT_TRUE(decoded.has_value()) << decoded.error().to_string();
  EXPECT_EQ(*decoded, e);
}

TEST_F(event_fixture, uuid_from_gpu_metadata) {
  gpu_metadata md;
  md.gpus.push_back({0, "0000:03:00.0", 0, std::string(uuid), "", "", "", {}});
  builder_.learn_gpus(md);
  auto e = expect_event("NVRM: Xid (PCI:0000:03:00.0): 79, GPU has fallen off the bus.");
  EXPECT_EQ(entity_of(e, "GPU_UUID"), uuid);
  EXPECT_EQ(e.action, recommended_action::restart_bm);
  EXPECT_EQ(builder_.pci_for_uuid(uuid), "0000:03:00");
}

TEST_F(event_fixture, unknown_gpu_has_only_pci) {
  auto e = expect_event("NVRM: Xid (PCI:0000:09:00): 48, pid=1, name=a");
  EXPECT_EQ(e.entities, (std::vector<entity>{{"PCI", "0000:09:00"}}));
}

TEST_F(event_fixture, reset_occurred_is_a_healthy_event_with_pci_looked_up) {
  feed("NVRM: GPU at PCI:0000:03:00: " + std::string(uuid));
  auto e = expect_event("GPU reset occurred: " + std::string(uuid));
  EXPECT_TRUE(e.is_healthy);
  EXPECT_FALSE(e.is_fatal);
  EXPECT_EQ(e.action, recommended_action::none);
  EXPECT_EQ(e.check_name, "SysLogsXIDError");
  EXPECT_EQ(e.component_class, "GPU");
  EXPECT_EQ(e.agent, "syslog-health-monitor");
  EXPECT_EQ(e.entities, (std::vector<entity>{{"PCI", "0000:03:00"},
                                             {"GPU_UUID", std::string(uuid)}}));
  xid_event_builder fresh(catalog(), {"node1", ""});
  const std::string line = "GPU reset occurred: " + std::string(uuid);
  auto unknown = fresh.build(parser_.parse(line), line, t0);
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->entities, (std::vector<entity>{{"GPU_UUID", std::string(uuid)}}));
}

TEST_F(event_fixture, xid48_with_63_or_64_is_drain_and_reset) {
  feed("NVRM: GPU at PCI:0000:03:00: " + std::string(uuid));
  auto remap =
    expect_event("NVRM: Xid (PCI:0000:03:00): 63, Row Remapper: New row marked", t0);
  EXPECT_EQ(remap.action, recommended_action::none);
  EXPECT_FALSE(remap.is_fatal);
  auto e = expect_event("NVRM: Xid (PCI:0000:03:00): 48, pid=1, name=a", t0 + 1s);
  EXPECT_EQ(e.action, recommended_action::component_reset);
  EXPECT_EQ(e.metadata.at("decision"), "WORKFLOW_XID_48 with XID 63/64: drain and reset");
  // Long after, or after a reset, the 48 is solo again.
  auto later = expect_event("NVRM: Xid (PCI:0000:03:00): 48, pid=1, name=a", t0 + 10min);
  EXPECT_EQ(later.metadata.at("decision"), "WORKFLOW_XID_48 solo: reset");
  expect_event("NVRM: Xid (PCI:0000:03:00): 64, Row Remapper: failure", t0 + 11min);
  expect_event("GPU reset occurred: " + std::string(uuid), t0 + 11min + 1s);
  auto after_reset =
    expect_event("NVRM: Xid (PCI:0000:03:00): 48, pid=1", t0 + 11min + 2s);
  EXPECT_EQ(after_reset.metadata.at("decision"), "WORKFLOW_XID_48 solo: reset");
  // 63/64 on another GPU do not count.
  expect_event("NVRM: Xid (PCI:0000:04:00): 64, Row Remapper: failure", t0 + 20min);
  auto other = expect_event("NVRM: Xid (PCI:0000:03:00): 48, pid=1", t0 + 20min + 1s);
  EXPECT_EQ(other.metadata.at("decision"), "WORKFLOW_XID_48 solo: reset");
}

TEST_F(event_fixture, xid45_workflow) {
  auto caused = expect_event("NVRM: Xid (PCI:0008:01:00): 45, pid=2231, name=python3, "
                             "channel 0x00000010. RC caused by previous Xid 149");
  EXPECT_EQ(caused.action, recommended_action::none);
  EXPECT_FALSE(caused.is_fatal);
  EXPECT_EQ(caused.metadata.at("causedByXid"), "149");
  EXPECT_EQ(caused.metadata.count("recommendation"), 0u);
  auto solo =
    expect_event("NVRM: Xid (PCI:0008:01:00): 45, pid=2231, name=python3, Ch 10");
  EXPECT_EQ(solo.action, recommended_action::none);
  EXPECT_FALSE(solo.is_fatal);
  EXPECT_NE(solo.metadata.at("recommendation").find("fabric manager"), std::string::npos);
}

TEST_F(event_fixture, xid13_is_non_fatal_with_location) {
  auto e =
    expect_event("NVRM: Xid (PCI:0000:04:00.0): 13, pid='<unknown>', name=<unknown>, "
                 "Graphics SM Warp Exception on (GPC 2, TPC 1, SM 0): Out Of Range");
  EXPECT_EQ(e.action, recommended_action::none);
  EXPECT_FALSE(e.is_fatal);
  EXPECT_EQ(e.metadata.at("gpc"), "2");
  EXPECT_EQ(e.metadata.at("tpc"), "1");
  EXPECT_EQ(e.metadata.at("sm"), "0");
  EXPECT_EQ(e.metadata.count("pid"), 0u);
  EXPECT_EQ(e.metadata.at("processName"), "<unknown>");
  EXPECT_EQ(e.metadata.at("investigatoryBucket"), "WORKFLOW_XID_13");
}

TEST_F(event_fixture, xid74_register_decode) {
  auto ecc =
    expect_event("NVRM: Xid (PCI:0000:05:00): 74, NVLink: fatal error detected on "
                 "link 14(0x10, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)");
  EXPECT_EQ(ecc.action, recommended_action::contact_support);
  EXPECT_TRUE(ecc.is_fatal);
  EXPECT_EQ(ecc.metadata.at("nvlinkFindings"), "r1.b4=ecc_parity");
  EXPECT_EQ(ecc.metadata.at("link"), "14");
  auto threshold =
    expect_event("NVRM: Xid (PCI:0000:05:00): 74, NVLink: fatal error detected "
                 "on link 3(0x0, 0x0, 0x0, 0x0, 0x100000, 0x0, 0x0)");
  EXPECT_EQ(threshold.action, recommended_action::none);
  EXPECT_FALSE(threshold.is_fatal);
  auto cut =
    expect_event("NVRM: Xid (PCI:0000:05:00): 74, NVLink: fatal error detected on");
  EXPECT_EQ(cut.action, recommended_action::contact_support);
  EXPECT_EQ(cut.metadata.at("parseProblem"), "xid74_registers");
}

TEST_F(event_fixture, nvlink5_decode) {
  auto link_down = expect_event(
    "NVRM: Xid (PCI:0009:01:00): 149, NETIR_LINK_EVT  Fatal   XC0 i0 Link 01 (0x021425c6 "
    "0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)");
  EXPECT_EQ(link_down.action, recommended_action::component_reset);
  EXPECT_EQ(link_down.metadata.at("nvlinkDecodedSubcode"),
            "NETIR_LINK_EVT/NETIR_LINK_DOWN");
  EXPECT_EQ(link_down.metadata.at("investigatoryBucket"), "INVESTIGATE_PEER_DEVICE");
  EXPECT_EQ(link_down.metadata.at("nvlinkIntrInfo"), "0x021425c6");
  EXPECT_EQ(link_down.metadata.at("link"), "1");
  auto ignorable =
    expect_event("NVRM: Xid (PCI:0009:01:00): 144, SAW_MVB Nonfatal XC0 i0 Link "
                 "02 (0x00000021 0x00000001 0x0 0x0 0x0 0x0)");
  EXPECT_EQ(ignorable.action, recommended_action::none);
  auto eval =
    expect_event("NVRM: Xid (PCI:0009:01:00): 145, RLW_REMAP Nonfatal XC0 i0 Link 05 "
                 "(0x00000004 0x00000001 0x0 0x0 0x0 0x0)");
  EXPECT_EQ(eval.action, recommended_action::none);
  EXPECT_EQ(eval.metadata.at("decision"), "WORKFLOW_NVLINK5_ERR: XID_154_EVAL");
  auto no_row =
    expect_event("NVRM: Xid (PCI:0009:01:00): 146, TLW_RX_PIPE0 Fatal XC0 i0 Link "
                 "07 (0x0000");
  // An intrInfo no row reads (here cut short to 0x0000) is not escalated.
  EXPECT_EQ(no_row.action, recommended_action::none);
  EXPECT_EQ(no_row.metadata.at("decision"),
            "WORKFLOW_NVLINK5_ERR: no decode row: not escalated");
  auto unreadable =
    expect_event("NVRM: Xid (PCI:0009:01:00): 146, TLW_RX_PIPE0 Fatal XC0 i0");
  EXPECT_EQ(unreadable.action, recommended_action::contact_support); // nothing to decode
  EXPECT_TRUE(unreadable.is_fatal);
}

// R575 changed the IntrInfo layout: the driver in gpu_metadata.json picks it.
TEST_F(event_fixture, nvlink5_decode_follows_the_drivers_layout) {
  const std::string v1_reset =
    "NVRM: Xid (PCI:0009:01:00): 144, SAW_MVB Fatal XC0 i0 Link "
    "02 (0x00000021 0x00000002 0x0 0x0 0x0 0x0)";
  const std::string v2_reset =
    "NVRM: Xid (PCI:0009:01:00): 144, SAW_MVB Fatal XC0 i0 Link "
    "02 (0x00000001 0x00000002 0x0 0x0 0x0 0x0)";
  // No driver known: either layout reads it.
  EXPECT_EQ(expect_event(v1_reset).action, recommended_action::component_reset);
  EXPECT_EQ(expect_event(v2_reset).action, recommended_action::component_reset);
  gpu_metadata md;
  md.driver_version = "570.133.20";
  builder_.learn_gpus(md);
  EXPECT_EQ(expect_event(v1_reset).action, recommended_action::component_reset);
  auto foreign = expect_event(v2_reset); // the R575 layout on an R570 driver
  EXPECT_EQ(foreign.action, recommended_action::none);
  EXPECT_FALSE(foreign.is_fatal);
  EXPECT_EQ(foreign.metadata.at("decision"),
            "WORKFLOW_NVLINK5_ERR: no decode row for driver R570: not escalated");
  md.driver_version = "580.159.04";
  builder_.learn_gpus(md);
  EXPECT_EQ(expect_event(v2_reset).action, recommended_action::component_reset);
  EXPECT_EQ(expect_event(v1_reset).action, recommended_action::none);
  md.driver_version = "garbage";
  builder_.learn_gpus(md);
  EXPECT_EQ(expect_event(v1_reset).action, recommended_action::component_reset);
}

TEST_F(event_fixture, xid154_takes_the_action_named_in_the_line) {
  struct sample {
    std::string to;
    recommended_action action;
  };
  for (const auto& s :
       {sample{"0x1 (GPU Reset Required)", recommended_action::component_reset},
        sample{"0x2 (Node Reboot Required)", recommended_action::restart_bm},
        sample{"0x3 (Drain P2P)", recommended_action::component_reset},
        sample{"0x4 (Drain and Reset)", recommended_action::component_reset},
        sample{"0x0 (None)", recommended_action::none}}) {
    auto e = expect_event(
      "NVRM: Xid (PCI:0000:06:00): 154, GPU recovery action changed from 0x0 (None) to "
      + s.to);
    EXPECT_EQ(e.action, s.action) << s.to;
    EXPECT_EQ(e.is_fatal, s.action != recommended_action::none) << s.to;
  }
  auto unreadable = expect_event(
    "NVRM: Xid (PCI:0000:06:00): 154, GPU recovery action changed from 0x0 (No");
  EXPECT_EQ(unreadable.action, recommended_action::contact_support);
}

TEST_F(event_fixture, codes_without_bucket_and_unknown_codes_contact_support) {
  auto unbucketed =
    expect_event("NVRM: Xid (PCI:0000:07:00): 165, PSHC lifetime exhausted");
  EXPECT_EQ(unbucketed.action, recommended_action::contact_support);
  EXPECT_EQ(unbucketed.message, "PSHC_ZERO_LIFETIME");
  EXPECT_EQ(unbucketed.metadata.at("immediateBucket"), "");
  auto unknown =
    expect_event("NVRM: Xid (PCI:0000:07:00): 999, pid=5, future driver detail");
  EXPECT_EQ(unknown.action, recommended_action::contact_support);
  EXPECT_EQ(unknown.message, "XID 999");
  EXPECT_EQ(unknown.metadata.at("mnemonic"), "UNKNOWN");
}

TEST_F(event_fixture, catalog_buckets_map_to_actions) {
  EXPECT_EQ(expect_event("NVRM: Xid (PCI:0000:07:00): 31, x").action,
            recommended_action::none);
  EXPECT_EQ(expect_event("NVRM: Xid (PCI:0000:07:00): 92, x").action,
            recommended_action::none);
  EXPECT_EQ(expect_event("NVRM: Xid (PCI:0000:07:00): 119, x").action,
            recommended_action::component_reset);
  EXPECT_EQ(expect_event("NVRM: Xid (PCI:0000:07:00): 151, x").action,
            recommended_action::restart_vm);
  EXPECT_EQ(expect_event("NVRM: Xid (PCI:0000:07:00): 54, x").action,
            recommended_action::contact_support);
  EXPECT_EQ(expect_event("NVRM: Xid (PCI:0000:07:00): 78, x").action,
            recommended_action::contact_support);
}

TEST_F(event_fixture, fallen_off_bus_event) {
  feed("NVRM: GPU at PCI:0000:b3:00: " + std::string(uuid));
  EXPECT_FALSE(feed("[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0"));
  EXPECT_FALSE(
    feed("               NVRM: (PCI ID: 10de:2330) installed in this system has"));
  auto e =
    expect_event("               NVRM: fallen off the bus and is not responding to "
                 "commands.");
  EXPECT_EQ(e.check_name, "SysLogsGPUFallenOff");
  EXPECT_EQ(e.error_codes, std::vector<std::string>{"79"});
  EXPECT_EQ(e.action, recommended_action::restart_bm);
  EXPECT_TRUE(e.is_fatal);
  EXPECT_EQ(e.entities, (std::vector<entity>{{"PCI", "0000:b3:00"},
                                             {"GPU_UUID", std::string(uuid)}}));
  EXPECT_EQ(e.metadata.at("pciDeviceId"), "10de:2330");
  EXPECT_EQ(e.metadata.at("kernelTimeUs"), "1843308145");
  EXPECT_NE(e.metadata.at("line").find("The NVIDIA GPU 0000:b3:00.0"), std::string::npos);
}

TEST_F(event_fixture, sxid_events) {
  auto fatal =
    expect_event("nvidia-nvswitch3: SXid (PCI:0000:86:00.0): 20034, Fatal, Link 30 "
                 "LTSSM Fault Up");
  EXPECT_EQ(fatal.component_class, "NVSwitch");
  EXPECT_EQ(fatal.check_name, "SysLogsSXIDError");
  EXPECT_TRUE(fatal.is_fatal);
  EXPECT_EQ(fatal.action, recommended_action::contact_support);
  EXPECT_EQ(fatal.error_codes, std::vector<std::string>{"20034"});
  EXPECT_EQ(
    fatal.entities,
    (std::vector<entity>{{"NVSWITCH", "3"}, {"PCI", "0000:86:00"}, {"NVLINK", "30"}}));
  EXPECT_EQ(fatal.message, "SXid 20034: LTSSM Fault Up");
  auto nonfatal =
    expect_event("nvidia-nvswitch0: SXid (PCI:0000:c1:00.0): 12028, Non-fatal, "
                 "Link 46 MC TS crumbstore MCTO (First)");
  EXPECT_FALSE(nonfatal.is_fatal);
  EXPECT_EQ(nonfatal.action, recommended_action::none);
  EXPECT_FALSE(feed("nvidia-nvswitch3: SXid (PCI:0000:86:00.0): 20034, Data {0x0, 0x1}"));
  auto halted =
    expect_event("nvidia-nvswitch1: SXid (PCI:0000:05:00.0): 10001, SOE HALTED");
  EXPECT_TRUE(halted.is_fatal);
  EXPECT_EQ(halted.action, recommended_action::contact_support);
}

TEST_F(event_fixture, an_sxid_names_the_gpus_behind_the_switch_port) {
  // Two GPUs on one NVSwitch at 0000:86:00.0, as gpu_metadata.json lists
  // them (NVSentinel's nvlinks form): port 30 reaches GPU-a, port 31 GPU-b.
  gpu_metadata md;
  md.gpus.resize(2);
  md.gpus[0].pci_address = "0000:07:00.0";
  md.gpus[0].uuid = "GPU-a";
  md.gpus[0].nvlinks = {{0, "0000:86:00.0", 30}};
  md.gpus[1].gpu_id = 1;
  md.gpus[1].pci_address = "0000:0f:00.0";
  md.gpus[1].uuid = "GPU-b";
  md.gpus[1].nvlinks = {{0, "0000:86:00.0", 31}};
  md.nvswitches = {"0000:86:00.0"};
  builder_.learn_gpus(md);
  auto port =
    expect_event("nvidia-nvswitch3: SXid (PCI:0000:86:00.0): 20034, Fatal, Link 30 "
                 "LTSSM Fault Up");
  EXPECT_EQ(port.entities, (std::vector<entity>{{"NVSWITCH", "3"},
                                                {"PCI", "0000:86:00"},
                                                {"NVLINK", "30"},
                                                {"GPU_UUID", "GPU-a"}}));
  EXPECT_EQ(port.metadata.at("gpusAttributedBy"), "nvlink");
  auto whole =
    expect_event("nvidia-nvswitch3: SXid (PCI:0000:86:00.0): 10001, SOE HALTED");
  EXPECT_EQ(entity_of(whole, "GPU_UUID"), "GPU-a");
  EXPECT_EQ(whole.entities.back(), (entity{"GPU_UUID", "GPU-b"}));
  EXPECT_EQ(whole.metadata.at("gpusAttributedBy"), "nvswitch");
  // Another switch, or a port no GPU uses: the event is the switch's alone.
  auto other = expect_event("nvidia-nvswitch0: SXid (PCI:0000:c1:00.0): 12028, "
                            "Non-fatal, Link 46 MC TS crumbstore MCTO (First)");
  EXPECT_EQ(entity_of(other, "GPU_UUID"), "");
  EXPECT_EQ(other.metadata.count("gpusAttributedBy"), 0u);
}

TEST_F(event_fixture, the_janitors_reset_executed_line_clears_only_on_success) {
  auto done =
    expect_event("GPU reset executed: " + std::string(uuid) + ", success: true");
  EXPECT_TRUE(done.is_healthy);
  EXPECT_EQ(done.check_name, "SysLogsXIDError");
  EXPECT_EQ(entity_of(done, "GPU_UUID"), uuid);
  EXPECT_FALSE(feed("GPU reset executed: " + std::string(uuid) + ", success: false"));
  EXPECT_FALSE(feed("GPU reset executed: " + std::string(uuid))); // no verdict
  EXPECT_FALSE(feed("GPU reset executed: " + std::string(uuid) + ", success: maybe"));
  EXPECT_FALSE(feed("GPU reset executed: , success: true")); // no UUID
  auto spaced =
    expect_event("[ 12.5] GPU reset executed:   " + std::string(uuid) + " ,success:TRUE");
  EXPECT_TRUE(spaced.is_healthy);
}

TEST_F(event_fixture, malformed_lines_make_no_event) {
  EXPECT_FALSE(feed("NVRM: Xid (PCI:0000:03:0"));
  EXPECT_FALSE(feed("GPU reset occurred: GPU-455d"));
  EXPECT_FALSE(feed("an ordinary line"));
}

TEST_F(event_fixture, ids_are_stable_and_distinct) {
  const std::string line = "[ 1000.500000] NVRM: Xid (PCI:0000:03:00): 48, pid=1, name=a";
  auto first = expect_event(line, t0);
  xid_event_builder again(catalog(), {"node1", "boot-1"});
  kernel_log_parser parser;
  auto second = again.build(parser.parse(line), line, t0 + 1h);
  ASSERT_TRUE(second);
  EXPECT_EQ(first.id, second->id); // the kernel timestamp, not the read time
  auto later =
    expect_event("[ 1001.000000] NVRM: Xid (PCI:0000:03:00): 48, pid=1, name=a");
  EXPECT_NE(first.id, later.id);
  xid_event_builder other_node(catalog(), {"node2", "boot-1"});
  EXPECT_NE(other_node.build(parser.parse(line), line, t0)->id, first.id);
  xid_event_builder other_boot(catalog(), {"node1", "boot-2"});
  EXPECT_NE(other_boot.build(parser.parse(line), line, t0)->id, first.id);
}

TEST(make_event_id, fields_do_not_run_together) {
  EXPECT_NE(make_event_id("ab", "c", "x", "y"), make_event_id("a", "bc", "x", "y"));
  EXPECT_EQ(make_event_id("a", "b", "c", "d"), make_event_id("a", "b", "c", "d"));
}

TEST_F(event_fixture, long_lines_are_clipped_for_ingest) {
  auto e = expect_event("NVRM: Xid (PCI:0000:03:00): 31, " + std::string(5000, 'x'));
  EXPECT_EQ(e.metadata.at("line").size(), 1024u);
  EXPECT_TRUE(decode_health_event(encode_health_event(e)).has_value());
}

} // namespace
} // namespace vigil::agent
