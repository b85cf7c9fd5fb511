#include "actors/agent/dcgm/dcgm_health.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "actors/agent/xid/xid_catalog.hpp"

#include "tests/support/source_tree.hpp"

namespace vigil::agent {
namespace {

using test::config_dir;
using test::source_dir;

using namespace std::chrono_literals;

const xid_catalog& catalog() {
  static const xid_catalog loaded = [] {
    auto c = xid_catalog::load(source_dir() + "/config");
    EXPECT_TRUE(c.has_value());
    return c ? *c : xid_catalog{};
  }();
  return loaded;
}

std::string uuid(int gpu) {
  return "GPU-0000000" + std::to_string(gpu);
}

// One sample in dcgm-exporter's shape for GPU `gpu`.
std::string sample(std::string_view field, int gpu, std::string_view value) {
  return std::string(field) + "{gpu=\"" + std::to_string(gpu) + "\",UUID=\"" + uuid(gpu)
         + "\",pci_bus_id=\"00000000:1" + std::to_string(gpu) + ":00.0\",device=\"nvidia"
         + std::to_string(gpu)
         + "\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"n1\"} " + std::string(value)
         + "\n";
}

metric_page page(const std::string& text) {
  return parse_prometheus_text(text);
}

const wall_time t0 = from_unix(1'780'000'000, 0);

struct checker {
  dcgm_health health{"n1", dcgm_thresholds{}, &catalog()};
  wall_time now = t0;

  std::vector<health_event> scrape(const std::string& text) {
    auto events = health.observe(page(text), now);
    now += 30s;
    return events;
  }
};

const health_event* find(const std::vector<health_event>& events,
                         std::string_view check) {
  for (const auto& e : events)
    if (e.check_name == check)
      return &e;
  return nullptr;
}

std::vector<std::string> gpus_named(const health_event& e) {
  std::vector<std::string> out;
  for (const auto& ent : e.entities)
    if (ent.type == "GPU_UUID")
      out.push_back(ent.value);
  return out;
}

std::string read_fixture(const std::string& name) {
  std::ifstream in(source_dir() + "/tests/data/dcgm/" + name);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A healthy 8-GPU page: each check with data says so once, for all GPUs in
// one event (clearing what an earlier run of the agent left); the next
// identical page says nothing, but the counter checks, which needed a
// baseline, now speak for the first time.
TEST(dcgm_health, a_healthy_node_is_announced_once_per_check) {
  checker c;
  const auto text = read_fixture("h100_8gpu.txt");
  ASSERT_FALSE(text.empty());
  auto first = c.scrape(text);
  EXPECT_EQ(c.health.gpus(), 8u);
  for (auto check : {dcgm_xid_check, dcgm_ecc_check, dcgm_row_remap_check,
                     dcgm_retired_pages_check, dcgm_thermal_check}) {
    const auto* e = find(first, check);
    ASSERT_NE(e, nullptr) << check;
    EXPECT_TRUE(e->is_healthy);
    EXPECT_EQ(gpus_named(*e).size(), 8u) << check;
    EXPECT_EQ(e->agent, dcgm_agent_name);
    EXPECT_EQ(e->component_class, "GPU");
    EXPECT_EQ(e->node_name, "n1");
    EXPECT_EQ(e->strategy, processing_strategy::execute_remediation);
  }
  EXPECT_EQ(first.size(), 5u); // NVLink and power need two pages
  auto second = c.scrape(text);
  ASSERT_EQ(second.size(), 2u);
  EXPECT_NE(find(second, dcgm_nvlink_check), nullptr);
  EXPECT_NE(find(second, dcgm_power_check), nullptr);
  EXPECT_TRUE(c.scrape(text).empty());
}

TEST(dcgm_health, an_xid_is_raised_with_the_catalogs_action_and_cleared_at_zero) {
  checker c;
  c.scrape(sample("DCGM_FI_DEV_XID_ERRORS", 3, "0"));
  auto raised = c.scrape(sample("DCGM_FI_DEV_XID_ERRORS", 3, "79"));
  ASSERT_EQ(raised.size(), 1u);
  const auto& e = raised[0];
  EXPECT_EQ(e.check_name, dcgm_xid_check);
  EXPECT_FALSE(e.is_healthy);
  EXPECT_EQ(e.error_codes, std::vector<std::string>{"79"});
  EXPECT_EQ(e.action, recommended_action::restart_bm); // the catalog's RESTART_BM
  EXPECT_TRUE(e.is_fatal);
  EXPECT_EQ(e.entities,
            (std::vector<entity>{{"GPU_UUID", uuid(3)}, {"PCI", "0000:13:00.0"}}));
  EXPECT_NE(e.message.find("XID 79"), std::string::npos) << e.message;
  EXPECT_TRUE(c.scrape(sample("DCGM_FI_DEV_XID_ERRORS", 3, "79")).empty());
  auto cleared = c.scrape(sample("DCGM_FI_DEV_XID_ERRORS", 3, "0"));
  ASSERT_EQ(cleared.size(), 1u);
  EXPECT_TRUE(cleared[0].is_healthy);
  EXPECT_EQ(gpus_named(cleared[0]), std::vector<std::string>{uuid(3)});
}

TEST(dcgm_health, a_standing_xid_is_reported_at_the_first_reading) {
  checker c;
  auto events = c.scrape(sample("DCGM_FI_DEV_XID_ERRORS", 0, "48")
                         + sample("DCGM_FI_DEV_XID_ERRORS", 1, "0"));
  ASSERT_EQ(events.size(), 2u);
  const auto* raised = &events[0];
  EXPECT_FALSE(raised->is_healthy);
  EXPECT_EQ(raised->error_codes[0], "48");
  // A workflow XID needs the kernel-log line: DCGM reports it, the kernel-log
  // monitor decides.
  EXPECT_EQ(raised->action, recommended_action::none);
  EXPECT_NE(raised->message.find("decided from the kernel log"), std::string::npos);
  EXPECT_TRUE(events[1].is_healthy);
  EXPECT_EQ(gpus_named(events[1]), std::vector<std::string>{uuid(1)});
}

// The windowed count (XIDs in the exporter's last minutes) is a recent fault
// even at the first reading; the count since the exporter started is only a
// baseline then. Later, growth of either raises.
TEST(dcgm_health, xid_counts_per_code_raise_when_recent_or_growing) {
  checker c;
  const auto count = [](std::string_view xid, std::string_view value) {
    return "DCGM_EXP_XID_ERRORS_COUNT{gpu=\"2\",UUID=\"" + uuid(2) + "\",xid=\""
           + std::string(xid) + "\",window_size_in_ms=\"300000\"} " + std::string(value)
           + "\n";
  };
  auto recent = c.scrape(count("79", "1"));
  ASSERT_EQ(recent.size(), 1u);
  EXPECT_EQ(recent[0].error_codes[0], "79");
  EXPECT_FALSE(recent[0].is_healthy);
  EXPECT_TRUE(c.scrape(count("79", "1")).empty());
  auto grew = c.scrape(count("79", "1") + count("94", "2"));
  ASSERT_EQ(grew.size(), 1u);
  EXPECT_EQ(grew[0].error_codes[0], "94");
  const auto total = [](std::string_view value) {
    return "DCGM_EXP_XID_ERRORS_TOTAL{gpu=\"5\",UUID=\"" + uuid(5) + "\",xid=\"31\"} "
           + std::string(value) + "\n";
  };
  EXPECT_TRUE(c.scrape(total("4")).empty()); // since the exporter started: a baseline
  auto more = c.scrape(total("5"));
  ASSERT_EQ(more.size(), 1u);
  EXPECT_EQ(more[0].error_codes[0], "31");
  // The window's "no XID" sample has no xid label: ignored.
  EXPECT_TRUE(c.scrape("DCGM_EXP_XID_ERRORS_COUNT{gpu=\"2\",UUID=\"" + uuid(2)
                       + "\",window_size_in_ms=\"300000\"} 0\n")
                .empty());
}

TEST(dcgm_health, temperature_has_hysteresis) {
  checker c;
  auto temp = [](std::string_view v) { return sample("DCGM_FI_DEV_GPU_TEMP", 0, v); };
  EXPECT_TRUE(c.scrape(temp("86"))[0].is_healthy); // first reading
  auto hot = c.scrape(temp("88"));
  ASSERT_EQ(hot.size(), 1u);
  EXPECT_FALSE(hot[0].is_healthy);
  EXPECT_FALSE(hot[0].is_fatal);
  EXPECT_EQ(hot[0].action, recommended_action::none);
  EXPECT_EQ(hot[0].check_name, dcgm_thermal_check);
  EXPECT_NE(hot[0].message.find("GPU temperature °C 88 (raise at 87, clear below 82)"),
            std::string::npos)
    << hot[0].message;
  EXPECT_TRUE(c.scrape(temp("84")).empty()); // between clear and raise: still hot
  EXPECT_TRUE(c.scrape(temp("87")).empty());
  auto cool = c.scrape(temp("81"));
  ASSERT_EQ(cool.size(), 1u);
  EXPECT_TRUE(cool[0].is_healthy);
  EXPECT_TRUE(c.scrape(temp("86")).empty()); // below raise: stays healthy
}

TEST(dcgm_health, thresholds_come_from_config) {
  dcgm_thresholds t;
  t.memory_temp_c = {80, 70};
  dcgm_health health("n1", t, &catalog());
  auto events = health.observe(page(sample("DCGM_FI_DEV_MEMORY_TEMP", 0, "81")), t0);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_FALSE(events[0].is_healthy);
}

// Old exporters print DCGM's blank values; they are no reading at all.
TEST(dcgm_health, blank_and_impossible_values_are_ignored) {
  checker c;
  EXPECT_TRUE(c.scrape(sample("DCGM_FI_DEV_GPU_TEMP", 0, "2147483632")
                       + sample("DCGM_FI_DEV_MEMORY_TEMP", 0, "9223372036854775794")
                       + sample("DCGM_FI_DEV_XID_ERRORS", 0, "NaN")
                       + sample("DCGM_FI_DEV_ROW_REMAP_PENDING", 0, "-1")
                       + sample("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 0, "+Inf"))
                .empty());
  EXPECT_EQ(c.health.gpus(), 0u);
  EXPECT_TRUE(is_dcgm_blank(2147483635, false));
  EXPECT_FALSE(is_dcgm_blank(2147483635, true)); // a counter may pass 2^31
  EXPECT_TRUE(is_dcgm_blank(9223372036854775792.0, true));
  EXPECT_FALSE(is_dcgm_blank(0, false));
}

TEST(dcgm_health, samples_are_tied_to_gpus_by_uuid_in_either_spelling) {
  checker c;
  auto events = c.scrape("DCGM_FI_DEV_GPU_TEMP{gpu=\"0\"} 99\n" // no UUID: skipped
                         "DCGM_FI_DEV_GPU_TEMP{gpu=\"1\", uuid=\"GPU-old\"} 99\n");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(gpus_named(events[0]), std::vector<std::string>{"GPU-old"});
  EXPECT_FALSE(events[0].is_healthy);
}

TEST(dcgm_health, nvlink_errors_are_a_rate_with_hysteresis) {
  checker c;
  auto crc = [](std::string_view flit, std::string_view data) {
    return sample("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", 0, flit)
           + sample("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", 0, data);
  };
  EXPECT_TRUE(c.scrape(crc("1000", "0")).empty());       // baseline
  EXPECT_TRUE(c.scrape(crc("1300", "0"))[0].is_healthy); // 10/s, first verdict
  auto bad = c.scrape(crc("4300", "3000"));              // (3000 + 3000) / 30 s
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_FALSE(bad[0].is_healthy);
  EXPECT_EQ(bad[0].error_codes[0], "NVLINK_ERRORS");
  EXPECT_NE(bad[0].message.find("NVLink CRC errors/s 200"), std::string::npos);
  EXPECT_TRUE(c.scrape(crc("4600", "3000")).empty()); // 10/s: not below clear
  // The exporter restarted: counters went down, a new baseline, no verdict.
  EXPECT_TRUE(c.scrape(crc("5", "0")).empty());
  auto good = c.scrape(crc("5", "0"));
  ASSERT_EQ(good.size(), 1u);
  EXPECT_TRUE(good[0].is_healthy);
}

TEST(dcgm_health, power_violation_is_the_share_of_time_throttled) {
  checker c;
  auto power = [](long us) {
    return sample("DCGM_FI_DEV_POWER_VIOLATION", 0, std::to_string(us));
  };
  c.scrape(power(5'000'000'000));                  // past 2^31 µs: a real counter value
  auto throttled = c.scrape(power(5'015'000'000)); // 15 s of the last 30
  ASSERT_EQ(throttled.size(), 1u);
  EXPECT_EQ(throttled[0].check_name, dcgm_power_check);
  EXPECT_FALSE(throttled[0].is_healthy);
}

TEST(dcgm_health, memory_faults_carry_the_action_that_fixes_them) {
  checker c;
  auto mem = [](std::string_view pending, std::string_view failure) {
    return sample("DCGM_FI_DEV_ROW_REMAP_PENDING", 0, pending)
           + sample("DCGM_FI_DEV_ROW_REMAP_FAILURE", 0, failure);
  };
  c.scrape(mem("0", "0"));
  auto pending = c.scrape(mem("1", "0"));
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].action, recommended_action::component_reset);
  EXPECT_EQ(pending[0].error_codes[0], "ROW_REMAP_PENDING");
  EXPECT_TRUE(pending[0].is_fatal);
  auto failed = c.scrape(mem("1", "1")); // worse: sent again
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].action, recommended_action::replace_vm);
  EXPECT_TRUE(c.scrape(mem("0", "0"))[0].is_healthy);

  auto dbe = c.scrape(sample("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 1, "2"));
  ASSERT_EQ(dbe.size(), 1u);
  EXPECT_EQ(dbe[0].check_name, dcgm_ecc_check);
  EXPECT_EQ(dbe[0].action, recommended_action::component_reset);

  auto pages = [](std::string_view sbe, std::string_view dbe_pages) {
    return sample("DCGM_FI_DEV_RETIRED_SBE", 2, sbe)
           + sample("DCGM_FI_DEV_RETIRED_DBE", 2, dbe_pages);
  };
  EXPECT_TRUE(c.scrape(pages("10", "5"))[0].is_healthy);
  auto worn = c.scrape(pages("50", "10"));
  ASSERT_EQ(worn.size(), 1u);
  EXPECT_EQ(worn[0].action, recommended_action::replace_vm);
}

// An exporter that does not answer is one store-only event per outage, not a
// GPU fault; its return is one store-only healthy event.
TEST(dcgm_health, an_unreachable_exporter_is_reported_once) {
  checker c;
  auto down = c.health.exporter_unreachable("connection refused", t0);
  ASSERT_EQ(down.size(), 1u);
  EXPECT_EQ(down[0].check_name, dcgm_exporter_check);
  EXPECT_EQ(down[0].component_class, "DCGM");
  EXPECT_EQ(down[0].strategy, processing_strategy::store_only);
  EXPECT_FALSE(down[0].is_healthy);
  EXPECT_NE(down[0].message.find("connection refused"), std::string::npos);
  EXPECT_TRUE(c.health.exporter_unreachable("still refused", t0).empty());
  EXPECT_TRUE(c.health.exporter_down());
  auto back = c.scrape(sample("DCGM_FI_DEV_GPU_TEMP", 0, "40"));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].check_name, dcgm_exporter_check);
  EXPECT_TRUE(back[0].is_healthy);
  EXPECT_EQ(back[0].strategy, processing_strategy::store_only);
  EXPECT_FALSE(c.health.exporter_down());
}

// dcgm-exporter's default counters give the XID, row-remap and thermal
// checks data and leave the others blind; a blank value is no data, and the
// fixture (every field collected) leaves no check blind.
TEST(dcgm_health, checks_the_page_gives_no_data_are_named) {
  std::vector<std::string_view> blind;
  auto defaults = sample("DCGM_FI_DEV_XID_ERRORS", 0, "0")
                  + sample("DCGM_FI_DEV_ROW_REMAP_FAILURE", 0, "0")
                  + sample("DCGM_FI_DEV_GPU_TEMP", 0, "41")
                  + sample("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 0, "9223372036854775794")
                  + sample("DCGM_FI_DEV_FB_USED", 0, "100");
  for (const auto& b : dcgm_blind_checks(page(defaults)))
    blind.push_back(b.check);
  EXPECT_EQ(blind,
            (std::vector<std::string_view>{dcgm_ecc_check, dcgm_retired_pages_check,
                                           dcgm_nvlink_check, dcgm_power_check}));
  EXPECT_EQ(
    describe(dcgm_blind_checks(page(defaults))).substr(0, 75),
    "DCGMEccDBE (DCGM_FI_DEV_ECC_DBE_VOL_TOTAL or DCGM_FI_DEV_ECC_DBE_AGG_TOTAL)");
  // One field of a check is enough; XID counts per code count as the XID field.
  auto some =
    sample("DCGM_FI_DEV_POWER_VIOLATION", 1, "0")
    + "DCGM_EXP_XID_ERRORS_COUNT{gpu=\"0\",UUID=\"GPU-00000000\",xid=\"79\"} 1\n";
  blind.clear();
  for (const auto& b : dcgm_blind_checks(page(some)))
    blind.push_back(b.check);
  EXPECT_EQ(std::count(blind.begin(), blind.end(), dcgm_power_check), 0);
  EXPECT_EQ(std::count(blind.begin(), blind.end(), dcgm_xid_check), 0);
  EXPECT_EQ(dcgm_blind_checks(page("")).size(), 7u); // no GPU: every check
  EXPECT_TRUE(dcgm_blind_checks(page(read_fixture("h100_8gpu.txt"))).empty());
  EXPECT_EQ(describe({}), "");
}

} // namespace
} // namespace vigil::agent
