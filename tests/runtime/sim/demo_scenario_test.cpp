// `vigil demo`: scenario parsing and step checks as plain code, and the
// built-in scenario run end to end on the virtual clock — the real control
// plane, agents' parsers and janitor against the simulated cluster —
// asserting every step: which pods were evicted, which CRs were created and
// how they ended, and the nodes' final state.
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/cli/cli.hpp"
#include "runtime/cli/demo_command.hpp"
#include "runtime/command_line.hpp"
#include "runtime/config.hpp"
#include "runtime/control_plane.hpp"
#include "runtime/journal/journal_store.hpp"
#include "runtime/replay/replay_analysis.hpp"
#include "runtime/sim/scenario_run.hpp"
#include "runtime/sim/simulated_cluster.hpp"
#include "tests/support/fresh_directory.hpp"
#include "tests/support/test_databases.hpp"

namespace vigil::demo {
namespace {

using nlohmann::json;

std::string failure_of(const std::string& yaml) {
  auto s = parse_scenario(yaml);
  return s ? "" : s.error().to_string();
}

TEST(demo_scenario, the_builtin_scenario_parses) {
  auto s = parse_scenario(builtin_scenario_yaml());
  ASSERT_TRUE(s.has_value()) << s.error().to_string();
  EXPECT_EQ(s->nodes, 16);
  ASSERT_EQ(s->steps.size(), 5u);
  EXPECT_EQ(s->steps[0].actions[0].codes, std::vector<int>{48});
  EXPECT_EQ(s->steps[2].actions[0].what, scenario_action::kind::nic_flap);
  EXPECT_EQ(s->steps[2].actions[0].times, 3);
  EXPECT_EQ(s->steps[4].actions[1].at, std::chrono::minutes{2});
  EXPECT_EQ(s->steps[4].expect.cordoned.size(), 6u);
  EXPECT_EQ(s->reset_job.low, std::chrono::minutes{1});
  EXPECT_EQ(s->reboot_job.high, std::chrono::minutes{30});
}

TEST(demo_scenario, errors_name_the_key) {
  EXPECT_NE(failure_of("steps: []").find("steps"), std::string::npos);
  EXPECT_NE(failure_of("steps: [{name: a, do: [{xid: {node: 1, gpu: 0}}]}]")
              .find("steps[0].do[0].xid.codes"),
            std::string::npos);
  EXPECT_NE(failure_of("steps: [{name: a, do: [{xid: {node: 17, gpu: 0, codes: [48]}}]}]")
              .find("steps[0].do[0].xid.node"),
            std::string::npos);
  EXPECT_NE(failure_of("steps: [{name: a, run_for: 5 minutes}]").find("steps[0].run_for"),
            std::string::npos);
  EXPECT_NE(failure_of("steps: [{name: a, expect: {evicted: [pod]}}]")
              .find("steps[0].expect.evicted[0]"),
            std::string::npos);
  EXPECT_NE(failure_of("steps: [{name: a, colour: red}]").find("steps[0].colour"),
            std::string::npos);
  EXPECT_NE(failure_of("steps: [{name: a, do: [{xid: {node: 1, gpu: 0, codes: [48]}, "
                       "nic_up: {node: 1}}]}]")
              .find("has both"),
            std::string::npos);
  EXPECT_NE(failure_of("{{{").find("not valid YAML"), std::string::npos);
}

TEST(demo_scenario, the_command_line_sizes_and_seeds_the_cluster) {
  auto bigger = parse_scenario(builtin_scenario_yaml(), {32, 7});
  ASSERT_TRUE(bigger.has_value()) << bigger.error().to_string();
  EXPECT_EQ(bigger->nodes, 32);
  EXPECT_EQ(bigger->seed, 7u);
  // Too small for the nodes the steps name: the step's key says which.
  auto smaller = parse_scenario(builtin_scenario_yaml(), {3, std::nullopt});
  ASSERT_FALSE(smaller.has_value());
  EXPECT_NE(smaller.error().to_string().find("is outside 1..3"), std::string::npos)
    << smaller.error().to_string();
}

TEST(demo_scenario, durations) {
  EXPECT_EQ(parse_duration("90s"), std::chrono::seconds{90});
  EXPECT_EQ(parse_duration("1h30m"), std::chrono::seconds{5400});
  EXPECT_FALSE(parse_duration("5").has_value());
  EXPECT_FALSE(parse_duration("m").has_value());
  EXPECT_FALSE(parse_duration("3d").has_value());
}

scenario_step reset_step() {
  auto s = parse_scenario(builtin_scenario_yaml());
  return s->steps[0];
}

step_observation as_expected() {
  step_observation seen;
  seen.evicted = {"inference/infer-gpu-node-03-gpu2"};
  seen.new_remediations = {
    {"GPUReset", "gpureset-x", node_name(3), gpu_uuid(3, 2), "Succeeded"}};
  seen.cordoned_during = {node_name(3)};
  for (int n = 1; n <= 16; ++n)
    seen.after.nodes.push_back(
      {{"name", node_name(n)}, {"cordoned", false}, {"cordonedByVigil", false}});
  return seen;
}

TEST(demo_scenario, a_step_passes_when_everything_matches) {
  auto result = check_step(reset_step(), as_expected());
  EXPECT_TRUE(result.passed) << result.detail;
}

TEST(demo_scenario, a_step_fails_naming_each_difference) {
  auto seen = as_expected();
  seen.evicted.push_back("inference/infer-gpu-node-03-gpu3");
  seen.new_remediations[0].outcome = "Failed";
  seen.after.nodes[2]["cordoned"] = true;
  seen.after.nodes[2]["cordonedByVigil"] = true;
  auto result = check_step(reset_step(), seen);
  EXPECT_FALSE(result.passed);
  for (const char* part :
       {"EXPECTED evicted: inference/infer-gpu-node-03-gpu2", "ending Succeeded",
        "gpu-node-03 not cordoned", "0 node(s) quarantined by vigil, saw 1"})
    EXPECT_NE(result.detail.find(part), std::string::npos) << result.detail;
}

// A step whose end state looks right still fails when vigil cordoned another
// node in between, or when a node it names does not exist.
TEST(demo_scenario, checks_do_not_pass_vacuously) {
  auto seen = as_expected();
  seen.cordoned_during.insert(node_name(7));
  auto result = check_step(reset_step(), seen);
  EXPECT_FALSE(result.passed);
  EXPECT_NE(result.detail.find("cordoned during the step"), std::string::npos);
  seen = as_expected();
  seen.after.nodes.erase(seen.after.nodes.begin() + 2); // gpu-node-03
  result = check_step(reset_step(), seen);
  EXPECT_FALSE(result.passed);
  EXPECT_NE(result.detail.find("gpu-node-03 to exist"), std::string::npos)
    << result.detail;
}

TEST(demo_scenario, limits_are_errors_naming_the_key) {
  EXPECT_NE(failure_of("steps: [{name: a, run_for: 48h}]").find("steps[0].run_for"),
            std::string::npos);
  EXPECT_NE(failure_of("steps: [{name: a, run_for: 1m, do: [{nic_flap: {node: 1, nic: 0, "
                       "times: 5, every: 20s}}]}]")
              .find("ends after the step's run_for"),
            std::string::npos);
  EXPECT_NE(failure_of("jobs: {reset: [5m, 1m]}\nsteps: [{name: a}]").find("jobs.reset"),
            std::string::npos);
  EXPECT_NE(failure_of("jobs: {reset: 5m}\nsteps: [{name: a}]").find("jobs.reset"),
            std::string::npos);
  EXPECT_NE(failure_of("steps: [{name: a, expect: {cordoned: {[1]: true}}}]")
              .find("steps[0].expect.cordoned"),
            std::string::npos);
}

TEST(demo_scenario, an_unexpected_remediation_fails_the_step) {
  auto seen = as_expected();
  seen.new_remediations.push_back({"RebootNode", "r", node_name(3), "", "Pending"});
  EXPECT_FALSE(check_step(reset_step(), seen).passed);
}

// `vigil demo ARGS` under `config`: the exit status, the JSON it printed
// (discarded when it printed none) and what it wrote to stderr.
struct demo_run {
  int rc = 0;
  json out;
  std::string err;
};

demo_run run_demo_command(const std::vector<std::string>& args,
                          const vigil_config& config = {}) {
  auto line = parse_command_line(demo_option_specs(), args);
  EXPECT_TRUE(line.has_value());
  std::ostringstream out, err;
  command_context ctx{*line, config, out, err};
  const int rc = run_demo(ctx);
  return {rc, json::parse(out.str(), nullptr, false), err.str()};
}

// The whole demo, as `vigil demo --json --journal JOURNAL` prints it.
json run_builtin_demo(const std::string& journal) {
  auto run = run_demo_command({"--json", "--journal", journal});
  EXPECT_EQ(run.rc, 0) << run.err;
  EXPECT_FALSE(run.out.is_discarded());
  return run.out;
}

// The demo on each journal it offers: embedded SQLite (the default) and
// `--journal postgresql://…` (the server scripts/with-postgres started).
class demo_end_to_end : public testing::TestWithParam<std::string> {};

INSTANTIATE_TEST_SUITE_P(journals, demo_end_to_end,
                         testing::Values("sqlite", "postgresql"));

TEST_P(demo_end_to_end, the_builtin_scenario_heals_the_cluster) {
  const auto journal = GetParam() == "postgresql"
                         ? test::fresh_postgres_database()
                         : "sqlite:" + test::fresh_directory() + "/journal.db";
  if (journal.empty())
    GTEST_SKIP() << "no PostgreSQL server: run under scripts/with-postgres";
  const auto summary = run_builtin_demo(journal);
  ASSERT_TRUE(summary.is_object());
  EXPECT_TRUE(summary.value("passed", false));
  ASSERT_EQ(summary["steps"].size(), 5u);
  for (const auto& step : summary["steps"])
    EXPECT_TRUE(step["passed"].get<bool>()) << step.dump();

  // Every eviction of the run: the one pod of the reset GPU, the training
  // job of the rebooted node, the whole node that is to be replaced.
  std::set<std::string> evicted;
  for (const auto& e : summary["evictions"])
    evicted.insert(e["namespace"].get<std::string>() + "/" + e["pod"].get<std::string>());
  std::set<std::string> expected{"inference/infer-gpu-node-03-gpu2",
                                 "training/train-gpu-node-04"};
  for (int g = 0; g < 8; ++g)
    expected.insert("inference/infer-gpu-node-05-gpu" + std::to_string(g));
  EXPECT_EQ(evicted, expected);

  // The CRs and how they ended.
  std::multiset<std::string> crs;
  for (const auto& r : summary["remediations"])
    crs.insert(r["kind"].get<std::string>() + " " + r["node"].get<std::string>() + " "
               + r["gpuUUID"].get<std::string>() + " " + r["outcome"].get<std::string>());
  EXPECT_EQ(
    crs, (std::multiset<std::string>{
           "GPUReset gpu-node-03 " + gpu_uuid(3, 2) + " Succeeded",
           "RebootNode gpu-node-04  Succeeded", "TerminateNode gpu-node-05  Pending"}));

  // Only the node waiting for its replacement is still out.
  ASSERT_EQ(summary["nodes"].size(), 16u);
  for (const auto& n : summary["nodes"]) {
    const bool replaced = n["name"] == node_name(5);
    EXPECT_EQ(n["cordoned"].get<bool>(), replaced) << n.dump();
    EXPECT_EQ(n["cordonedByVigil"].get<bool>(), replaced) << n.dump();
  }
  EXPECT_EQ(summary["events"]["sent"], summary["events"]["acknowledged"]);

  // `vigil replay --at` and `--what-if` on the demo's own journal: the fleet
  // at its end, and the same events under a policy that tolerates more NIC
  // flaps.
  auto store = make_journal_store(journal);
  ASSERT_TRUE(store.has_value());
  ASSERT_TRUE((*store)->open().has_value());
  auto rows = (*store)->read(journal_query{});
  ASSERT_TRUE(rows.has_value());
  ASSERT_FALSE(rows->empty());
  const auto fleet = fleet_at(*rows, rows->back().recorded_at);
  std::map<std::string, std::size_t> active;
  for (const auto& n : fleet["nodes"])
    active[n["name"].get<std::string>()] = n["activeEvents"].size();
  EXPECT_GT(active[node_name(5)], 0u) << fleet.dump(); // waiting for its replacement
  EXPECT_EQ(active[node_name(3)], 0u);                 // reset and verified
  EXPECT_EQ(active[node_name(4)], 0u);                 // rebooted and back
  std::set<std::string> incidents; // one row each time the incident grew
  for (const auto& row : fleet["fabricIncidents"])
    incidents.insert(row.value("opened", ""));
  EXPECT_EQ(incidents.size(), 1u) << fleet["fabricIncidents"].dump();

  vigil_config lenient;
  lenient.correlation.nic_flap_threshold = 10;
  const auto policy = decision_policy_from(vigil_config{});
  EXPECT_TRUE(compare_policies(*rows, policy, policy).empty());
  const auto differences = compare_policies(*rows, policy, decision_policy_from(lenient));
  ASSERT_FALSE(differences.empty());
  for (const auto& d : differences)
    EXPECT_EQ(d.node, node_name(5)) << d.event; // only the flapping port's node

  // The same through the command line: `vigil replay --at` and `--what-if`.
  auto replay = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"replay", "--journal", journal});
    std::ostringstream out, err;
    const int rc = run_cli(args, out, err);
    return std::tuple{rc, out.str(), err.str()};
  };
  const auto end = format_rfc3339(rows->back().recorded_at);
  auto [at_rc, at_out, at_err] = replay({"--at", end, "--node", node_name(5), "--json"});
  ASSERT_EQ(at_rc, 0) << at_err;
  const auto at = json::parse(at_out, nullptr, false);
  ASSERT_EQ(at["nodes"].size(), 1u) << at_out;
  EXPECT_FALSE(at["nodes"][0]["activeEvents"].empty()) << at_out;
  const auto lenient_file = test::fresh_directory() + "/lenient.yaml";
  std::ofstream(lenient_file) << "correlation:\n  nic_flap_threshold: 10\n";
  auto [if_rc, if_out, if_err] = replay({"--what-if", lenient_file, "--json"});
  ASSERT_EQ(if_rc, 0) << if_err;
  const auto what_if = json::parse(if_out, nullptr, false);
  ASSERT_FALSE(what_if["differences"].empty()) << if_out;
  for (const auto& d : what_if["differences"])
    EXPECT_EQ(d["node"], node_name(5)) << d.dump();
  auto [bad_rc, bad_out, bad_err] = replay({"--at", end, "--since", end});
  EXPECT_EQ(bad_rc, 2);
  EXPECT_NE(bad_err.find("--since"), std::string::npos) << bad_err;
}

// `vigil demo --scenario FILE` (SCENARIOS.md) through the command line: a
// scenario of its own on a smaller cluster, and a step whose expectation is
// wrong fails the run (exit 1) naming the difference.
TEST(demo_scenario_file, runs_a_scenario_of_its_own_and_fails_a_wrong_expectation) {
  const auto dir = test::fresh_directory();
  auto run = [&](const std::string& yaml) {
    const auto file = dir + "/scenario.yaml";
    std::ofstream(file) << yaml;
    auto r = run_demo_command({"--scenario", file, "--json", "--journal",
                               "sqlite:" + test::fresh_directory() + "/j.db"});
    return std::tuple{r.rc, r.out, r.err};
  };
  const std::string scenario = R"(name: application XIDs on a small cluster
nodes: 4
steps:
  - name: XIDs 13 and 31 on node 2
    do:
      - xid: {node: 2, gpu: 1, codes: [13, 31]}
    run_for: 5m
    expect:
      evicted: []
      remediations: []
      cordoned_during: []
)";
  auto [rc, summary, err] = run(scenario);
  ASSERT_EQ(rc, 0) << err;
  EXPECT_EQ(summary["scenario"], "application XIDs on a small cluster") << summary.dump();
  ASSERT_EQ(summary["steps"].size(), 1u);
  EXPECT_TRUE(summary["steps"][0]["passed"].get<bool>()) << summary.dump();
  EXPECT_EQ(summary["nodes"].size(), 4u);

  std::string wrong = scenario;
  wrong.replace(wrong.find("cordoned_during: []"), 19, "cordoned_during: [2]");
  auto [bad_rc, bad_summary, bad_err] = run(wrong);
  EXPECT_EQ(bad_rc, 1) << bad_err;
  ASSERT_EQ(bad_summary["steps"].size(), 1u) << bad_summary.dump();
  EXPECT_FALSE(bad_summary["steps"][0]["passed"].get<bool>());
  EXPECT_FALSE(bad_summary["steps"][0]["detail"].get<std::string>().empty());
}

// The safety scenarios shipped in runtime/sim/scenarios (each states the
// rule it holds vigil to): every step passes, and the expectations there list
// every eviction and every CR of the step, so nothing else may happen.
class shipped_scenario : public testing::TestWithParam<std::string> {};

INSTANTIATE_TEST_SUITE_P(safety, shipped_scenario,
                         testing::Values("reboot-after-a-failed-reset",
                                         "full-drain-during-a-reset",
                                         "a-failed-validation",
                                         "a-fault-after-the-boot-began"));

TEST_P(shipped_scenario, passes) {
  const auto file = std::string{std::getenv("VIGIL_SOURCE_DIR")}
                    + "/runtime/sim/scenarios/" + GetParam() + ".yaml";
  auto run = run_demo_command({"--scenario", file, "--json", "--journal",
                               "sqlite:" + test::fresh_directory() + "/j.db"});
  ASSERT_EQ(run.rc, 0) << run.err << run.out.dump();
  for (const auto& step : run.out["steps"])
    EXPECT_TRUE(step["passed"].get<bool>()) << step.dump();
}

// `vigil demo --fleet` runs vigil's side with the thresholds of --config: a
// fabric rule that needs more nodes than a leaf switch takes down turns each
// switch outage into quarantines, so vigil's figures change.
TEST(demo_fleet, vigils_thresholds_come_from_the_config) {
  auto fleet = [](const vigil_config& config) {
    auto r =
      run_demo_command({"--fleet", "--json", "--nodes", "2048", "--days", "54"}, config);
    EXPECT_EQ(r.rc, 0) << r.err;
    return r.out;
  };
  const auto defaults = fleet(vigil_config{});
  ASSERT_TRUE(defaults.is_object());
  vigil_config no_fabric_rule;
  no_fabric_rule.correlation.fabric_min_nodes = 100000;
  const auto changed = fleet(no_fabric_rule);
  ASSERT_TRUE(changed.is_object());
  EXPECT_EQ(defaults["baseline"], changed["baseline"]);
  EXPECT_NE(defaults["vigil"], changed["vigil"]);
}

} // namespace
} // namespace vigil::demo
