// `vigil replay --at` and `--what-if` over hand-made rows.
#include <gtest/gtest.h>

#include "runtime/config.hpp"
#include "runtime/control_plane.hpp"
#include "runtime/replay/replay_analysis.hpp"

namespace vigil {
namespace {

using nlohmann::json;

const wall_time t0 = from_unix(1'800'000'000, 0);

struct rows_builder {
  std::vector<journal_record> rows;
  journal_record& add(const std::string& node, const std::string& kind, std::string body,
                      std::chrono::seconds at) {
    journal_record r;
    r.seq = static_cast<std::int64_t>(rows.size()) + 1;
    r.recorded_at = t0 + at;
    r.node = node;
    r.kind = kind;
    r.body = std::move(body);
    r.idempotency_key = std::to_string(r.seq);
    rows.push_back(r);
    return rows.back();
  }
  void event(health_event e, std::chrono::seconds at) {
    e.generated = t0 + at;
    add(e.node_name, "event", encode_health_event(e), at);
  }
};

health_event xid(const std::string& node, const std::string& gpu, bool healthy = false) {
  health_event e;
  e.id = node + gpu + (healthy ? "ok" : "bad");
  e.agent = "syslog-health-monitor";
  e.component_class = "GPU";
  e.check_name = "SysLogsXIDError";
  e.is_fatal = !healthy;
  e.is_healthy = healthy;
  e.error_codes = {"48"};
  e.action = healthy ? recommended_action::none : recommended_action::component_reset;
  e.entities = {{"GPU_UUID", gpu}};
  e.node_name = node;
  return e;
}

health_event port_down(const std::string& node, int n) {
  health_event e;
  e.id = node + "-down-" + std::to_string(n);
  e.agent = "nic-health-monitor";
  e.component_class = "NIC";
  e.check_name = "InfiniBandStateCheck";
  e.is_fatal = true;
  e.action = recommended_action::replace_vm;
  e.entities = {{"NIC", "mlx5_0"}, {"NICPort", "1"}};
  e.node_name = node;
  return e;
}

// Job attribution: a pod holding a failing GPU loses every GPU it held until
// its node is released; a second fault in the same quarantine does not count
// the same pod twice; a node still quarantined counts until the end.
TEST(replay_by_namespace, gpu_hours_from_the_fault_until_the_release) {
  rows_builder b;
  const auto holders = [](json list) {
    return json{{"eventId", "e"}, {"gpus", {"GPU-a"}}, {"holders", std::move(list)}}
      .dump();
  };
  b.add(
    "node-1", "gpu_holders",
    holders({{{"namespace", "team-a"}, {"pod", "train-0"}, {"gpus", {"GPU-a", "GPU-b"}}},
             {{"namespace", "team-b"}, {"pod", "infer-0"}, {"gpus", {"GPU-a"}}}}),
    std::chrono::seconds{0});
  b.add("node-1", "gpu_holders",
        holders(
          {{{"namespace", "team-a"}, {"pod", "train-0"}, {"gpus", {"GPU-a", "GPU-b"}}}}),
        std::chrono::seconds{1800}); // the same quarantine: not counted again
  b.add("node-1", "quarantine", json{{"uncordon", false}}.dump(),
        std::chrono::seconds{60});
  b.add("node-1", "quarantine", json{{"uncordon", true}}.dump(),
        std::chrono::seconds{3600});
  b.add("node-2", "gpu_holders",
        holders({{{"namespace", "team-a"}, {"pod", "train-1"}, {"gpus", {"GPU-c"}}}}),
        std::chrono::seconds{3600});
  b.add("node-2", "gpu_holders", "garbage", std::chrono::seconds{3601});
  auto losses = losses_by_namespace(b.rows, t0 + std::chrono::seconds{3 * 3600});
  ASSERT_EQ(losses.size(), 2u);
  EXPECT_EQ(losses[0].ns, "team-a");
  EXPECT_DOUBLE_EQ(losses[0].gpu_hours,
                   2.0 * 1 + 1.0 * 2); // node-1 1 h, node-2 2 h (open)
  EXPECT_EQ(losses[0].pods, 2u);
  EXPECT_EQ(losses[0].faults, 3u);
  EXPECT_EQ(losses[0].open, 1u);
  EXPECT_EQ(losses[1].ns, "team-b");
  EXPECT_DOUBLE_EQ(losses[1].gpu_hours, 1.0);
  EXPECT_TRUE(losses_by_namespace({}, t0).empty());
}

TEST(replay_at, active_events_latest_steps_and_timelines_per_node) {
  using namespace std::chrono_literals;
  rows_builder b;
  b.event(xid("node-1", "GPU-a"), 0s);
  b.add("node-1", "drain", R"({"drain":"partial:GPU-a","phase":"started"})", 1s);
  b.add("node-1", "remediation", R"({"kind":"GPUReset","phase":"created"})", 2s);
  b.event(xid("node-2", "GPU-b"), 3s);
  b.event(xid("node-2", "GPU-b", true), 4s);
  b.add("", "fabric_incident", R"({"nodes":["node-3"],"opened":"x"})", 5s);
  auto fleet = fleet_at(b.rows, t0 + 5s);
  EXPECT_EQ(fleet["at"], format_rfc3339(t0 + 5s));
  ASSERT_EQ(fleet["nodes"].size(), 2u);
  const auto& n1 = fleet["nodes"][0];
  EXPECT_EQ(n1["name"], "node-1");
  ASSERT_EQ(n1["activeEvents"].size(), 1u);
  EXPECT_EQ(n1["activeEvents"][0]["entityValue"], "GPU-a");
  EXPECT_EQ(n1["drain"]["phase"], "started");
  EXPECT_EQ(n1["remediation"]["kind"], "GPUReset");
  EXPECT_EQ(n1["timeline"].size(), 3u);
  EXPECT_TRUE(fleet["nodes"][1]["activeEvents"].empty()); // recovered
  EXPECT_EQ(fleet["fabricIncidents"].size(), 1u);
}

TEST(replay_what_if, lists_only_the_events_decided_differently) {
  using namespace std::chrono_literals;
  rows_builder b;
  b.event(xid("node-1", "GPU-a"), 0s);
  for (int i = 0; i < 3; ++i) { // three downs in 10 minutes: a flap
    b.event(port_down("node-2", i), std::chrono::seconds{60 + 120 * i});
    if (i < 2) {
      auto up = port_down("node-2", i);
      up.id += "-up";
      up.is_healthy = true;
      up.is_fatal = false;
      up.action = recommended_action::none;
      b.event(up, std::chrono::seconds{120 + 120 * i});
    }
  }
  vigil_config now;
  vigil_config other;
  other.correlation.nic_flap_threshold = 10;
  auto decisions = decide_events(b.rows, decision_policy_from(now));
  ASSERT_EQ(decisions.size(), 6u);
  EXPECT_EQ(decisions[0].decision,
            "quarantine (rule fatal), drain partial:GPU-a, GPUReset");
  EXPECT_NE(decisions[5].decision.find("nic-flap fired (NICPortFlapping REPLACE_VM)"),
            std::string::npos)
    << decisions[5].decision;
  EXPECT_NE(decisions[5].decision.find("TerminateNode"), std::string::npos);
  auto differences =
    compare_policies(b.rows, decision_policy_from(now), decision_policy_from(other));
  ASSERT_EQ(differences.size(), 1u);
  EXPECT_EQ(differences[0].seq, 6);
  EXPECT_EQ(differences[0].node, "node-2");
  EXPECT_EQ(differences[0].what_if.find("nic-flap"), std::string::npos);
  EXPECT_TRUE(
    compare_policies(b.rows, decision_policy_from(now), decision_policy_from(now))
      .empty());
}

TEST(replay_what_if, the_fabric_hold_decides_who_an_incident_claims) {
  using namespace std::chrono_literals;
  rows_builder b;
  for (int n = 1; n <= 3; ++n) // ports down on three nodes, 10 s apart
    b.event(port_down("node-" + std::to_string(n), 0), std::chrono::seconds{10 * n});
  vigil_config held;
  vigil_config at_once;
  at_once.correlation.fabric_hold_seconds = 0;
  for (const auto& d : decide_events(b.rows, decision_policy_from(held)))
    EXPECT_EQ(d.decision.rfind("fabric incident, not acted on", 0), 0u) << d.decision;
  auto differences =
    compare_policies(b.rows, decision_policy_from(held), decision_policy_from(at_once));
  ASSERT_EQ(differences.size(), 2u); // node-1 and node-2 acted on before it formed
  EXPECT_EQ(differences[0].what_if.rfind("quarantine (rule fatal)", 0), 0u);
}

} // namespace
} // namespace vigil
