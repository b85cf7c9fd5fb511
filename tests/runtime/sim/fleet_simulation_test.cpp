#include "runtime/sim/fleet_simulation.hpp"

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "actors/agent/xid/xid_catalog.hpp"

namespace vigil::demo {
namespace {

const agent::xid_catalog& catalog() {
  static const agent::xid_catalog loaded = [] {
    const char* dir = std::getenv("VIGIL_SOURCE_DIR");
    auto c =
      agent::xid_catalog::load(std::string(dir != nullptr ? dir : ".") + "/config");
    EXPECT_TRUE(c.has_value()) << c.error().to_string();
    return c.has_value() ? *c : agent::xid_catalog{};
  }();
  return loaded;
}

fleet_result run(const fleet_options& options) {
  auto result = simulate_fleet(options, catalog());
  EXPECT_TRUE(result.has_value()) << result.error().to_string();
  return result.has_value() ? *result : fleet_result{};
}

/// The default model (2,048 nodes, 54 days, seed 1), run once for the tests
/// that only read it.
const fleet_result& default_run() {
  static const fleet_result result = run({});
  return result;
}

/// A smaller fleet, quick under the sanitizers.
fleet_options small() {
  fleet_options o;
  o.nodes = 512;
  o.days = 30;
  return o;
}

/// Only the given category, no noise, on the small fleet.
fleet_options only(double fleet_model::*percent) {
  auto o = small();
  auto& m = o.model;
  for (auto p : {&fleet_model::faulty_gpu_percent, &fleet_model::hbm_percent,
                 &fleet_model::software_percent, &fleet_model::network_percent,
                 &fleet_model::host_maintenance_percent, &fleet_model::sram_percent,
                 &fleet_model::gsp_percent, &fleet_model::nic_percent,
                 &fleet_model::other_host_percent})
    m.*p = 0;
  m.*percent = 100;
  m.app_xids_per_1000_node_days = 0;
  m.nic_flaps_per_1000_node_days = 0;
  return o;
}

TEST(fleet_simulation, the_same_seed_gives_identical_results) {
  auto options = small();
  options.seed = 7;
  auto first = to_json(run(options)).dump();
  auto second = to_json(run(options)).dump();
  EXPECT_EQ(first, second);
  EXPECT_EQ(to_table(run(options)), to_table(run(options)));
}

TEST(fleet_simulation, a_different_seed_gives_a_different_trace) {
  auto options = small();
  options.seed = 7;
  auto a = to_json(run(options));
  options.seed = 8;
  auto b = to_json(run(options));
  EXPECT_NE(a["trace"].dump(), b["trace"].dump());
  EXPECT_NE(a["vigil"].dump(), b["vigil"].dump());
}

TEST(fleet_simulation, the_default_model_matches_llama_3s_rate) {
  const auto& t = default_run().trace;
  // 3.8 per 1,000 node-days on 110,592 node-days: about 420 (Llama 3: 419).
  EXPECT_GT(t.faults, 360);
  EXPECT_LT(t.faults, 480);
  EXPECT_EQ(t.nodes, 2048);
  EXPECT_EQ(t.days, 54);
  EXPECT_GT(t.faults_by_category.at("faultyGpu"), t.faults_by_category.at("nic"));
}

TEST(fleet_simulation, vigil_beats_the_baseline_on_the_default_model) {
  const auto& r = default_run();
  EXPECT_LT(r.vigil.gpu_hours_lost, r.baseline.gpu_hours_lost) << to_table(r);
  EXPECT_LT(r.vigil.false_remediations, r.baseline.false_remediations) << to_table(r);
  EXPECT_GT(r.vigil.remediations.reset, 0);
  EXPECT_EQ(r.baseline.remediations.reset, 0);
  EXPECT_EQ(r.baseline.remediations.contact_support, 0);
  EXPECT_LT(r.vigil.remediations.reboot, r.baseline.remediations.reboot);
}

TEST(fleet_simulation, counts_add_up) {
  const auto& r = default_run();
  int by_category = 0;
  for (const auto& [name, n] : r.trace.faults_by_category) {
    EXPECT_GE(n, 0) << name;
    by_category += n;
  }
  EXPECT_EQ(r.trace.faults_by_category.size(), 9u);
  EXPECT_EQ(by_category, r.trace.faults);
  EXPECT_LE(r.trace.hardware_faults, r.trace.faults);
  for (const auto* o : {&r.vigil, &r.baseline}) {
    const auto& c = o->remediations;
    EXPECT_GE(c.reset, 0);
    EXPECT_GE(c.reboot, 0);
    EXPECT_GE(c.replace, 0);
    EXPECT_GE(c.contact_support, 0);
    EXPECT_GE(o->false_remediations, 0);
    EXPECT_LE(o->false_remediations, c.total());
    EXPECT_GE(o->missed_faults, 0);
    EXPECT_GE(o->breaker_trips, 0);
    // Every hardware fault ends fixed by the policy, by a person it asked,
    // or found by people: missed.
    EXPECT_EQ(o->faults_fixed + o->faults_fixed_by_support + o->missed_faults,
              r.trace.hardware_faults);
    EXPECT_NEAR(o->gpu_hours_lost,
                o->gpu_hours_out_of_service + o->gpu_hours_faulty_in_service, 0.011);
    EXPECT_GT(o->signals, 0);
  }
  // The baseline reboots on every signal, so it never uses a GPU reset.
  EXPECT_EQ(r.baseline.remediations.reset, 0);
}

TEST(fleet_simulation, software_xids_make_vigil_do_nothing_and_the_baseline_reboot) {
  auto options = only(&fleet_model::software_percent);
  options.model.app_xids_per_1000_node_days = 20; // application XIDs are software too
  auto r = run(options);
  EXPECT_GT(r.trace.faults, 0);
  EXPECT_EQ(r.trace.hardware_faults, 0);
  EXPECT_EQ(r.vigil.remediations.total(), 0);
  EXPECT_EQ(r.vigil.cordons, 0);
  EXPECT_EQ(r.vigil.gpu_hours_lost, 0);
  EXPECT_GT(r.baseline.remediations.reboot, 0);
  EXPECT_EQ(r.baseline.false_remediations, r.baseline.remediations.total());
  EXPECT_GT(r.baseline.gpu_hours_lost, 0);
}

TEST(fleet_simulation, hbm_errors_that_a_reset_fixes_get_a_reset) {
  auto options = only(&fleet_model::hbm_percent);
  options.model.hbm_fix = {1, 0, 0};
  auto r = run(options);
  ASSERT_GT(r.trace.hardware_faults, 0);
  EXPECT_EQ(r.vigil.remediations.reset, r.trace.hardware_faults);
  EXPECT_EQ(r.vigil.remediations.reboot, 0);
  EXPECT_EQ(r.vigil.false_remediations, 0);
  EXPECT_EQ(r.vigil.missed_faults, 0);
  EXPECT_EQ(r.vigil.faults_fixed, r.trace.hardware_faults);
  EXPECT_EQ(r.baseline.remediations.reboot, r.trace.hardware_faults);
  EXPECT_LT(r.vigil.gpu_hours_lost, r.baseline.gpu_hours_lost);
  // seed 000 §3.1: with single-GPU pods the partial drain frees one GPU.
  options.model.whole_node_job_fraction = 0;
  auto pods = run(options);
  EXPECT_LT(pods.vigil.gpu_hours_out_of_service * 10,
            pods.baseline.gpu_hours_out_of_service);
}

TEST(fleet_simulation, dead_gpus_climb_the_ladder_to_a_replace) {
  auto options = only(&fleet_model::faulty_gpu_percent);
  options.model.faulty_gpu_fix = {0, 0, 1};
  auto r = run(options);
  ASSERT_GT(r.trace.hardware_faults, 0);
  // The baseline: three reboots within 24 h, then a replace (unless people
  // found the fault first, a slow ladder). vigil: the validation after the
  // first reboot finds the GPU still dead (most times) and climbs at once.
  for (const auto* o : {&r.vigil, &r.baseline}) {
    EXPECT_EQ(o->remediations.replace + o->missed_faults, r.trace.hardware_faults);
    EXPECT_GE(o->remediations.reboot, o->remediations.replace);
    EXPECT_LT(o->missed_faults * 10, r.trace.hardware_faults);
    EXPECT_EQ(o->false_remediations, 0);
  }
  EXPECT_GE(r.baseline.remediations.reboot, 3 * r.baseline.remediations.replace);
  EXPECT_LT(r.vigil.remediations.reboot, r.baseline.remediations.reboot);
  EXPECT_GE(r.vigil.escalations, r.vigil.remediations.replace);
}

TEST(fleet_simulation, a_leaf_switch_outage_is_a_fabric_incident_for_vigil) {
  auto options = only(&fleet_model::network_percent);
  options.model.network_switch_fraction = 1;
  auto r = run(options);
  ASSERT_GT(r.trace.switch_outages, 0);
  EXPECT_EQ(r.trace.hardware_faults, 0);
  EXPECT_GT(r.vigil.fabric_incidents, 0);
  EXPECT_EQ(r.vigil.remediations.total(), 0);
  EXPECT_GT(r.baseline.remediations.reboot, r.trace.switch_outages);
  EXPECT_EQ(r.baseline.false_remediations, r.baseline.remediations.total());
}

TEST(fleet_simulation, a_breaker_that_allows_no_cordon_holds_every_quarantine) {
  auto options = small();
  options.model.breaker.max_cordoned_nodes = 0;
  auto r = run(options);
  ASSERT_GT(r.trace.hardware_faults, 0);
  EXPECT_GT(r.vigil.breaker_trips, 0);
  EXPECT_EQ(r.vigil.cordons, 0);
  EXPECT_EQ(r.vigil.remediations.total(), 0);
  EXPECT_EQ(r.vigil.missed_faults, r.trace.hardware_faults);
  // The baseline has no breaker: it counts the trips it would have caused.
  EXPECT_EQ(r.baseline.breaker_trips, r.baseline.cordons);
  EXPECT_GT(r.baseline.remediations.total(), 0);
}

TEST(fleet_simulation, the_agents_catalog_decides_each_xids_action) {
  const auto& actions = default_run().trace.xid_actions;
  EXPECT_EQ(actions.at(13), "NONE");
  EXPECT_EQ(actions.at(31), "NONE");
  EXPECT_EQ(actions.at(43), "NONE");
  EXPECT_EQ(actions.at(48), "COMPONENT_RESET");
  EXPECT_EQ(actions.at(79), "RESTART_BM");
  EXPECT_EQ(actions.at(94), "NONE");
  EXPECT_EQ(actions.at(95), "COMPONENT_RESET");
  EXPECT_EQ(actions.at(119), "COMPONENT_RESET");
  EXPECT_EQ(actions.at(120), "COMPONENT_RESET");
  EXPECT_EQ(actions.at(154), "RESTART_BM");
}

TEST(fleet_simulation, json_and_table_carry_every_figure) {
  auto j = to_json(default_run());
  for (const char* policy : {"vigil", "baseline"}) {
    const auto& p = j.at(policy);
    for (const char* key :
         {"gpuHoursLost", "falseRemediations", "missedFaults", "breakerTrips"})
      EXPECT_TRUE(p.contains(key)) << policy << "." << key;
    for (const char* key : {"reset", "reboot", "replace", "contactSupport"})
      EXPECT_TRUE(p.at("remediations").contains(key)) << policy << "." << key;
  }
  EXPECT_EQ(j.at("trace").at("nodeDays"), 2048 * 54);
  auto table = to_table(default_run());
  EXPECT_NE(table.find("GPU-hours lost"), std::string::npos) << table;
  EXPECT_NE(table.find("reboot every fault"), std::string::npos) << table;
}

TEST(fleet_simulation, invalid_options_name_the_option) {
  fleet_options options;
  options.nodes = 0;
  auto r = simulate_fleet(options, catalog());
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().where, "--nodes");
  EXPECT_EQ(r.error().what, "must be at least 1");

  options = {};
  options.days = -3;
  r = simulate_fleet(options, catalog());
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().where, "--days");

  options = {};
  options.nodes = 1'000'000;
  r = simulate_fleet(options, catalog());
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().where, "--nodes");

  options = {};
  options.model.hbm_fix = {0.5, 0, 0};
  r = simulate_fleet(options, catalog());
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().where, "model.hbm_fix");

  options = {};
  options.model.app_xids_per_1000_node_days = -1;
  r = simulate_fleet(options, catalog());
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().where, "model.app_xids_per_1000_node_days");

  r = simulate_fleet({}, agent::xid_catalog{});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().where, "xid_catalog.csv");
}

// `vigil demo --fleet --model FILE`: the file's fields over the defaults.
TEST(fleet_simulation, a_model_file_overrides_fields_and_names_bad_keys) {
  auto model = read_fleet_model(R"(
interruptions_per_1000_node_days: 7.6
hbm_fix: {reset: 0.5, reboot: 0, replace: 0.5}
nodes_per_leaf: 16
replace: 7200
link_downed_counter_events: true
)");
  ASSERT_TRUE(model.has_value()) << model.error().to_string();
  EXPECT_DOUBLE_EQ(model->interruptions_per_1000_node_days, 7.6);
  EXPECT_DOUBLE_EQ(model->hbm_fix.reset, 0.5);
  EXPECT_DOUBLE_EQ(model->hbm_fix.replace, 0.5);
  EXPECT_EQ(model->nodes_per_leaf, 16);
  EXPECT_EQ(model->replace, std::chrono::seconds{7200});
  EXPECT_TRUE(model->link_downed_counter_events);
  EXPECT_DOUBLE_EQ(model->faulty_gpu_percent, fleet_model{}.faulty_gpu_percent);

  // Twice the interruptions: about twice the faults on the same seed.
  fleet_options options;
  options.model = *model;
  auto doubled = simulate_fleet(options, catalog());
  auto usual = simulate_fleet({}, catalog());
  ASSERT_TRUE(doubled.has_value() && usual.has_value());
  EXPECT_GT(doubled->trace.faults, usual->trace.faults * 3 / 2);

  for (const auto& [yaml, where] : std::vector<std::pair<std::string, std::string>>{
         {"hbm_percnt: 3", "model.hbm_percnt"},
         {"hbm_percent: lots", "model.hbm_percent"},
         {"hbm_fix: {reset: 1, fix: 0}", "model.hbm_fix"},
         {"replace: 2h", "model.replace"},
         {"nvswitch_fabric: maybe", "model.nvswitch_fabric"},
         {"[1, 2]", "model"},
         {"hbm_percent: [1", "model"}}) {
    auto bad = read_fleet_model(yaml);
    ASSERT_FALSE(bad.has_value()) << yaml;
    EXPECT_EQ(bad.error().where, where) << yaml << ": " << bad.error().to_string();
  }
}

TEST(fleet_simulation, a_single_node_for_a_day_runs) {
  fleet_options options;
  options.nodes = 1;
  options.days = 1;
  auto r = run(options);
  EXPECT_EQ(r.trace.nodes, 1);
  EXPECT_GE(r.vigil.gpu_hours_lost, 0);
}

} // namespace
} // namespace vigil::demo
