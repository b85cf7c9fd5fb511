#include "actors/agent/xid/xid_cancellation.hpp"

#include <cstdlib>
#include <sstream>

#include <gtest/gtest.h>

#include "actors/agent/xid/parse_kernel_log.hpp"

#include "tests/support/source_tree.hpp"

namespace vigil::agent {
namespace {

using test::config_dir;
using test::source_dir;

health_event xid(std::string code) {
  health_event e;
  e.id = "line-1";
  e.agent = "syslog-health-monitor";
  e.component_class = "GPU";
  e.check_name = "SysLogsXIDError";
  e.error_codes = {std::move(code)};
  e.entities = {{"PCI", "0000:18:00.0"}, {"GPU_UUID", "GPU-1"}};
  e.node_name = "n1";
  e.strategy = processing_strategy::store_and_analyse;
  e.generated = from_unix(1'780'000'000, 0);
  return e;
}

TEST(xid_cancellations, the_shipped_rule_ends_163_with_162) {
  auto rules = xid_cancellations::load(config_dir());
  ASSERT_TRUE(rules.has_value()) << rules.error().to_string();
  EXPECT_EQ(rules->size(), 1u);
  auto healthy = rules->cancelled_by(xid("162"));
  ASSERT_EQ(healthy.size(), 1u);
  const auto& e = healthy[0];
  EXPECT_TRUE(e.is_healthy);
  EXPECT_FALSE(e.is_fatal);
  EXPECT_EQ(e.action, recommended_action::none);
  EXPECT_EQ(e.error_codes, std::vector<std::string>{"163"});
  EXPECT_EQ(e.entities, xid("162").entities);
  EXPECT_EQ(e.agent, "syslog-health-monitor");
  EXPECT_EQ(e.check_name, "SysLogsXIDError");
  EXPECT_EQ(e.node_name, "n1");
  EXPECT_EQ(e.strategy, processing_strategy::store_and_analyse);
  EXPECT_EQ(e.id, "line-1-cancels-163");
  EXPECT_EQ(e.message, "cancelled by SysLogsXIDError error code 162");
  EXPECT_EQ(e.metadata.at(std::string(cancel_source_key)), "162");
  EXPECT_TRUE(rules->cancelled_by(xid("163")).empty());
  auto healthy_source = xid("162");
  healthy_source.is_healthy = true;
  EXPECT_TRUE(rules->cancelled_by(healthy_source).empty());
}

TEST(xid_cancellations, one_code_may_cancel_several_per_check) {
  auto rules = xid_cancellations::parse("check,on_error_code,cancel_error_codes\n"
                                        "SysLogsXIDError,162,163 164  165\n"
                                        "# a comment\n"
                                        "SysLogsXIDError,31,13 43\n"
                                        "SysLogsSXIDError,31,12\n");
  ASSERT_TRUE(rules.has_value()) << rules.error().to_string();
  EXPECT_EQ(rules->cancelled_by(xid("162")).size(), 3u);
  auto two = rules->cancelled_by(xid("31"));
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[1].error_codes[0], "43");
  EXPECT_TRUE(
    xid_cancellations::parse("check,on_error_code,cancel_error_codes\n")->empty());
}

TEST(xid_cancellations, bad_rules_are_refused_naming_the_line) {
  const std::string header = "check,on_error_code,cancel_error_codes\n";
  for (const auto& [body, expected] : std::vector<std::pair<std::string, std::string>>{
         {"SysLogsXIDError,162\n", "expected check,on_error_code,cancel_error_codes"},
         {",162,163\n", "check: empty or has spaces"},
         {"SysLogsXIDError, ,163\n", "on_error_code: empty or has spaces"},
         {"SysLogsXIDError,162,\n", "cancel_error_codes: none"},
         {"SysLogsXIDError,162,162\n", "cancel_error_codes: 162 cancels itself"},
         {"SysLogsXIDError,162,163 163\n", "cancel_error_codes: 163 listed twice"},
         {"SysLogsXIDError,162,163\nSysLogsXIDError,162,164\n",
          "SysLogsXIDError 162 has a rule already"}}) {
    auto rules = xid_cancellations::parse(header + body);
    ASSERT_FALSE(rules.has_value()) << body;
    EXPECT_EQ(rules.error().what, expected) << body;
    EXPECT_EQ(rules.error().where.rfind("line ", 0), 0u);
  }
}

// Through the whole kernel-log path: the 162 line is followed by a healthy
// event for 163 on the same GPU, and a 163 after it is raised again (the
// cancellation ended its burst).
TEST(xid_cancellations, parse_kmsg_follows_a_superseding_xid_with_its_cancellation) {
  auto catalog = xid_catalog::load(config_dir());
  ASSERT_TRUE(catalog.has_value());
  parse_options options;
  options.catalog = std::move(*catalog);
  options.node_name = "n1";
  auto rules = xid_cancellations::load(config_dir());
  ASSERT_TRUE(rules.has_value());
  options.cancellations = std::make_shared<const xid_cancellations>(std::move(*rules));
  std::istringstream log(
    "[  100.000000] NVRM: Xid (PCI:0000:18:00): 163, pid=1, name=x, PSHC disengaged\n"
    "[  110.000000] NVRM: Xid (PCI:0000:18:00): 162, pid=1, name=x, PSHC re-engaged\n"
    "[  120.000000] NVRM: Xid (PCI:0000:18:00): 163, pid=1, name=x, PSHC disengaged\n");
  auto result = parse_kernel_log(log, options);
  ASSERT_EQ(result.events.size(), 4u);
  EXPECT_EQ(result.events[0].error_codes[0], "163");
  EXPECT_EQ(result.events[1].error_codes[0], "162");
  EXPECT_TRUE(result.events[2].is_healthy);
  EXPECT_EQ(result.events[2].error_codes, std::vector<std::string>{"163"});
  EXPECT_EQ(result.events[2].entities, result.events[0].entities);
  EXPECT_FALSE(result.events[3].is_healthy);
  EXPECT_EQ(result.events[3].error_codes[0], "163");
}

} // namespace
} // namespace vigil::agent
