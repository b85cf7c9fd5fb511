#include "actors/agent/xid/xid_catalog.hpp"

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "tests/support/source_tree.hpp"

namespace vigil::agent {
namespace {

using test::config_dir;
using test::source_dir;

const xid_catalog& catalog() {
  static const xid_catalog loaded = [] {
    auto c = xid_catalog::load(source_dir() + "/config");
    EXPECT_TRUE(c.has_value()) << c.error().to_string();
    return c.has_value() ? *c : xid_catalog{};
  }();
  return loaded;
}

constexpr std::string_view header =
  "code,mnemonic,immediate_bucket,investigatory_bucket\n";
constexpr std::string_view decode_header =
  "xid,subcode,intrinfo_v1,intrinfo_v2,error_status,bucket,investigatory_bucket,"
  "severity\n";

failure parse_failure(std::string_view xids, std::string_view decode = decode_header) {
  auto parsed = xid_catalog::parse(xids, decode);
  EXPECT_FALSE(parsed.has_value());
  return parsed.has_value() ? failure{} : parsed.error();
}

TEST(xid_catalog, config_file_covers_every_published_xid) {
  const auto& c = catalog();
  EXPECT_EQ(c.size(), 172u);
  for (int code = 1; code <= 172; ++code)
    EXPECT_NE(c.find(code), nullptr) << code;
  EXPECT_EQ(c.find(173), nullptr);
  const auto* xid48 = c.find(48);
  ASSERT_NE(xid48, nullptr);
  EXPECT_EQ(xid48->mnemonic, "ROBUST_CHANNEL_GPU_ECC_DBE");
  EXPECT_EQ(xid48->immediate, xid_bucket::workflow_xid_48);
  EXPECT_EQ(c.find(79)->immediate, xid_bucket::restart_bm);
  EXPECT_EQ(c.find(13)->investigatory, "WORKFLOW_XID_13");
  EXPECT_EQ(c.find(165)->immediate, xid_bucket::none);
  EXPECT_EQ(c.nvlink5_rows().size(), 98u);
}

TEST(xid_catalog, bucket_to_action_table) {
  using ra = recommended_action;
  EXPECT_EQ(action_for_bucket(xid_bucket::restart_app), ra::none);
  EXPECT_EQ(action_for_bucket(xid_bucket::ignore), ra::none);
  EXPECT_EQ(action_for_bucket(xid_bucket::reset_gpu), ra::component_reset);
  EXPECT_EQ(action_for_bucket(xid_bucket::restart_bm), ra::restart_bm);
  EXPECT_EQ(action_for_bucket(xid_bucket::restart_vm), ra::restart_vm);
  EXPECT_EQ(action_for_bucket(xid_bucket::contact_support), ra::contact_support);
  EXPECT_EQ(action_for_bucket(xid_bucket::update_swfw), ra::contact_support);
  EXPECT_EQ(action_for_bucket(xid_bucket::check_mechanicals), ra::contact_support);
  EXPECT_EQ(action_for_bucket(xid_bucket::check_uvm), ra::contact_support);
  EXPECT_EQ(action_for_bucket(xid_bucket::none), ra::contact_support);
  for (auto rule :
       {xid_bucket::xid_154, xid_bucket::workflow_xid_45, xid_bucket::workflow_xid_48,
        xid_bucket::workflow_nvlink_err, xid_bucket::workflow_nvlink5_err})
    EXPECT_FALSE(action_for_bucket(rule)) << to_string(rule);
}

TEST(xid_catalog, every_bucket_name_round_trips) {
  for (auto name : {"", "CONTACT_SUPPORT", "RESTART_APP", "IGNORE", "RESET_GPU",
                    "RESTART_BM", "RESTART_VM", "UPDATE_SWFW", "CHECK_MECHANICALS",
                    "CHECK_UVM", "XID_154", "WORKFLOW_XID_45", "WORKFLOW_XID_48",
                    "WORKFLOW_NVLINK_ERR", "WORKFLOW_NVLINK5_ERR"}) {
    auto bucket = parse_xid_bucket(name);
    ASSERT_TRUE(bucket) << name;
    EXPECT_EQ(to_string(*bucket), name);
  }
  EXPECT_FALSE(parse_xid_bucket("REBOOT_EVERYTHING"));
}

TEST(xid_catalog, malformed_rows_name_file_and_line) {
  auto bad_bucket = parse_failure(std::string("# comment\n") + std::string(header)
                                  + "1,A,CONTACT_SUPPORT,\n2,B,REBOOT_EVERYTHING,\n");
  EXPECT_EQ(bad_bucket.where, "xid_catalog.csv:4");
  EXPECT_NE(bad_bucket.what.find("REBOOT_EVERYTHING"), std::string::npos);
  EXPECT_EQ(parse_failure(std::string(header) + "1,A,IGNORE\n").where,
            "xid_catalog.csv:2");
  EXPECT_EQ(parse_failure(std::string(header) + "x,A,IGNORE,\n").where,
            "xid_catalog.csv:2");
  auto twice = parse_failure(std::string(header) + "1,A,IGNORE,\n1,B,IGNORE,\n");
  EXPECT_EQ(twice.where, "xid_catalog.csv:3");
  EXPECT_NE(twice.what.find("twice"), std::string::npos);
  EXPECT_EQ(parse_failure(std::string(header) + "1,\"A,IGNORE,\n").what,
            "unterminated quote");
  EXPECT_EQ(parse_failure("1,A,IGNORE,\n").where, "xid_catalog.csv:1");
  EXPECT_EQ(parse_failure("").where, "xid_catalog.csv");
}

TEST(xid_catalog, malformed_decode_rows_name_file_and_line) {
  std::string xids = std::string(header) + "144,NVLINK_SAW_ERROR,WORKFLOW_NVLINK5_ERR,\n";
  auto short_pattern = parse_failure(
    xids, std::string(decode_header) + "144,SAW_MVB,----0000,,0x1,IGNORE,,Non-fatal\n");
  EXPECT_EQ(short_pattern.where, "nvlink5_decode.csv:2");
  EXPECT_NE(short_pattern.what.find("intrinfo_v1"), std::string::npos);
  auto bad_status = parse_failure(
    xids, std::string(decode_header)
            + "144,SAW_MVB,------000000----------0000100001,,banana,IGNORE,,Non-fatal\n");
  EXPECT_NE(bad_status.what.find("error_status"), std::string::npos);
  auto bad_bucket = parse_failure(
    xids, std::string(decode_header)
            + "144,SAW_MVB,------000000----------0000100001,,0x1,MAYBE,,Non-fatal\n");
  EXPECT_NE(bad_bucket.what.find("MAYBE"), std::string::npos);
  auto bad_xid = parse_failure(
    xids, std::string(decode_header)
            + "74,SAW_MVB,------000000----------0000100001,,0x1,IGNORE,,Non-fatal\n");
  EXPECT_NE(bad_xid.what.find("144-150"), std::string::npos);
}

TEST(xid_catalog, quoted_fields_are_read) {
  auto parsed = xid_catalog::parse(
    std::string(header) + "7,\"A, \"\"quoted\"\" one\",IGNORE,\"x, y\"\n", decode_header);
  ASSERT_TRUE(parsed.has_value()) << parsed.error().to_string();
  EXPECT_EQ(parsed->find(7)->mnemonic, "A, \"quoted\" one");
  EXPECT_EQ(parsed->find(7)->investigatory, "x, y");
}

TEST(xid_catalog, bit_patterns) {
  auto p = parse_bit_pattern("------000000----------0000100001");
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->matches(0x00000021));
  EXPECT_TRUE(p->matches(0xfc0ffc21)); // don't-care bits set
  EXPECT_FALSE(p->matches(0x00100021));
  EXPECT_FALSE(p->matches(0x00000022));
  EXPECT_FALSE(parse_bit_pattern("0101"));
  EXPECT_FALSE(parse_bit_pattern("------000000----------000010000x"));
}

TEST(xid_catalog, nvlink5_decode_by_intr_info_and_status) {
  const auto& c = catalog();
  // SAW_MVB, pre-R575 layout: status 0x2 resets, 0x1 is ignorable.
  auto reset = c.decode_nvlink5(144, 0x00000021, 0x2);
  ASSERT_TRUE(reset.bucket);
  EXPECT_EQ(*reset.bucket, nvlink5_bucket::reset_gpu);
  EXPECT_EQ(reset.row->subcode, "SAW_MVB");
  EXPECT_EQ(c.decode_nvlink5(144, 0x00000021, 0x1).bucket, nvlink5_bucket::ignore);
  // The same in the R575 layout.
  EXPECT_EQ(c.decode_nvlink5(144, 0x00000001, 0x2).bucket, nvlink5_bucket::reset_gpu);
  // RLW_REMAP 0x1: XID_154_EVAL.
  EXPECT_EQ(c.decode_nvlink5(145, 0x00000004, 0x1).bucket, nvlink5_bucket::xid_154_eval);
  // RLW_RXPIPE action2 (bit 10 set in the V1 layout) resets.
  EXPECT_EQ(c.decode_nvlink5(145, 0x000004c2, 0x1).bucket, nvlink5_bucket::reset_gpu);
  EXPECT_EQ(c.decode_nvlink5(145, 0x000000c2, 0x1).bucket, nvlink5_bucket::ignore);
  // A known driver reads only its own layout.
  EXPECT_EQ(c.decode_nvlink5(144, 0x00000021, 0x2, 570).bucket,
            nvlink5_bucket::reset_gpu);
  EXPECT_FALSE(c.decode_nvlink5(144, 0x00000021, 0x2, 575).bucket);
  EXPECT_EQ(c.decode_nvlink5(144, 0x00000001, 0x2, 580).bucket,
            nvlink5_bucket::reset_gpu);
  EXPECT_FALSE(c.decode_nvlink5(144, 0x00000001, 0x2, 570).bucket);
}

TEST(xid_catalog, nvlink5_link_down_reasons_ignore_status) {
  const auto& c = catalog();
  // 0x021425c6: NETIR_LINK_DOWN, bits 25..20 = 100001 (peer device) → RESET_GPU.
  auto peer = c.decode_nvlink5(149, 0x021425c6, 0x0);
  ASSERT_TRUE(peer.bucket);
  EXPECT_EQ(*peer.bucket, nvlink5_bucket::reset_gpu);
  EXPECT_EQ(peer.row->investigatory, "INVESTIGATE_PEER_DEVICE");
  // Reason 101000 (host) → IGNORE.
  EXPECT_EQ(c.decode_nvlink5(149, 0x028001c6, std::nullopt).bucket,
            nvlink5_bucket::ignore);
  // MSE: status 0x0 or 0xFFFFFFFF.
  EXPECT_EQ(c.decode_nvlink5(150, 0x0, 0xffffffff).bucket, nvlink5_bucket::reset_gpu);
}

TEST(xid_catalog, nvlink5_without_a_row_has_no_bucket) {
  const auto& c = catalog();
  EXPECT_FALSE(c.decode_nvlink5(144, std::nullopt, 0x1).bucket);
  EXPECT_FALSE(c.decode_nvlink5(144, 0x00000021, 0x40).bucket);
  EXPECT_FALSE(c.decode_nvlink5(146, 0x00000000, 0x1).bucket);
  EXPECT_FALSE(c.decode_nvlink5(144, 0x00000021, std::nullopt).bucket);
}

TEST(xid_catalog, nvlink5_several_status_bits_take_the_worst) {
  const auto& c = catalog();
  // SAW_MVB 0x1 (IGNORE) | 0x2 (RESET_GPU).
  EXPECT_EQ(c.decode_nvlink5(144, 0x00000021, 0x3).bucket, nvlink5_bucket::reset_gpu);
  // 0x1 | 0x4: both IGNORE.
  EXPECT_EQ(c.decode_nvlink5(144, 0x00000021, 0x5).bucket, nvlink5_bucket::ignore);
  // 0x1 | 0x40: 0x40 has no row.
  EXPECT_FALSE(c.decode_nvlink5(144, 0x00000021, 0x41).bucket);
}

TEST(xid_catalog, xid74_register_decode) {
  auto ignorable = decode_nvlink_registers({0x1, 0, 0, 0, 0x100000, 0, 0});
  EXPECT_TRUE(ignorable.ignore);
  EXPECT_EQ(ignorable.findings, "r1.b0=ignore r5.b20=ecc_threshold");
  auto ecc = decode_nvlink_registers({0x10, 0, 0, 0, 0, 0, 0});
  EXPECT_FALSE(ecc.ignore);
  EXPECT_EQ(ecc.findings, "r1.b4=ecc_parity");
  auto mixed = decode_nvlink_registers({0x40000000, 0, 0, 0x10000, 0, 0, 0});
  EXPECT_FALSE(mixed.ignore);
  EXPECT_EQ(mixed.findings, "r1.b30=ignore r4.b16=sympathetic");
  EXPECT_FALSE(decode_nvlink_registers({0, 0, 0, 0, 0, 0, 0}).ignore);
  EXPECT_FALSE(decode_nvlink_registers({}).ignore);
  EXPECT_EQ(decode_nvlink_registers({0, 0x1}).findings, "r2.b0=unexpected");
}

TEST(xid_catalog, xid154_recovery_actions) {
  using ra = recommended_action;
  EXPECT_EQ(recovery_action_for("None", 0), ra::none);
  EXPECT_EQ(recovery_action_for("GPU Reset Required", 1), ra::component_reset);
  EXPECT_EQ(recovery_action_for("Node Reboot Required", 2), ra::restart_bm);
  EXPECT_EQ(recovery_action_for("Drain P2P", 3), ra::component_reset);
  EXPECT_EQ(recovery_action_for("Drain and Reset", 4), ra::component_reset);
  // The label wins over the number; a cut label falls back to the number.
  EXPECT_EQ(recovery_action_for("Drain and Reset", 1), ra::component_reset);
  EXPECT_EQ(recovery_action_for("Node Reb", 2), ra::restart_bm);
  EXPECT_FALSE(recovery_action_for("", std::nullopt));
  EXPECT_FALSE(recovery_action_for("Something New", 9));
}

TEST(xid_catalog, load_names_a_missing_file) {
  auto missing = xid_catalog::load("/nonexistent");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().where, "/nonexistent/xid_catalog.csv");
}

} // namespace
} // namespace vigil::agent
