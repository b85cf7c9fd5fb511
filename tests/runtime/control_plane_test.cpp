#include "runtime/control_plane.hpp"

#include <gtest/gtest.h>

namespace vigil {
namespace {

struct stages {
  bool quarantine, drain, remediation;
};

stages dry_stages(const vigil_config& config) {
  auto settings = node_settings_from(config);
  EXPECT_TRUE(settings.has_value()) << settings.error().to_string();
  return {(*settings)->dry_run, (*settings)->drain->dry_run,
          (*settings)->remediation.dry_run};
}

// Dry run, global and per stage; a stage's dry run covers
// the stages after it, never the ones before.
TEST(node_settings_from, each_dry_run_covers_the_stages_after_it) {
  vigil_config config;
  auto none = dry_stages(config);
  EXPECT_FALSE(none.quarantine || none.drain || none.remediation);

  config.control.dry_run = true;
  auto global = dry_stages(config);
  EXPECT_TRUE(global.quarantine && global.drain && global.remediation);

  config = {};
  config.quarantine.dry_run = true;
  auto quarantine = dry_stages(config);
  EXPECT_TRUE(quarantine.quarantine && quarantine.drain && quarantine.remediation);

  config = {};
  config.drain.dry_run = true;
  auto drain = dry_stages(config);
  EXPECT_FALSE(drain.quarantine);
  EXPECT_TRUE(drain.drain && drain.remediation);

  config = {};
  config.remediation.dry_run = true;
  auto remediation = dry_stages(config);
  EXPECT_FALSE(remediation.quarantine || remediation.drain);
  EXPECT_TRUE(remediation.remediation);
}

TEST(node_settings_from, a_drain_section_that_does_not_validate_is_an_error) {
  vigil_config config;
  config.drain.namespaces.push_back({"(", "Immediate", 0});
  EXPECT_FALSE(node_settings_from(config).has_value());
}

// Journal retention must outlast every window a rule looks back: the default
// 30 days covers the default remediation window (7 days); a 2-day retention
// does not, and a window widened past it names the retention's key.
TEST(node_settings_from, retention_shorter_than_a_window_names_its_key) {
  vigil_config config;
  EXPECT_TRUE(node_settings_from(config).has_value());
  config.journal.retention_days = 2;
  auto short_retention = node_settings_from(config);
  ASSERT_FALSE(short_retention.has_value());
  EXPECT_EQ(short_retention.error().where, "journal.retention_days");
  EXPECT_NE(short_retention.error().what.find("169 h"), std::string::npos)
    << short_retention.error().what;
  config.journal.retention_days = 0; // kept for good: nothing to check
  EXPECT_TRUE(node_settings_from(config).has_value());
}

TEST(node_settings_from, a_gpu_node_selector_that_does_not_parse_names_its_key) {
  vigil_config config;
  config.control.gpu_node_label = "nvidia.com/gpu.product in H100";
  auto settings = node_settings_from(config);
  ASSERT_FALSE(settings.has_value());
  EXPECT_EQ(settings.error().where, "control.gpu_node_label");
  config.control.gpu_node_label =
    "nvidia.com/gpu.product in (A100,H100),!vigil.dev/spare";
  EXPECT_TRUE(node_settings_from(config).has_value());
}

} // namespace
} // namespace vigil
