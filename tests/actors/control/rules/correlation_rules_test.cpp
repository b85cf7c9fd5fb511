#include "actors/control/rules/correlation_rules.hpp"

#include <gtest/gtest.h>

namespace vigil::control {
namespace {

using namespace std::chrono_literals;

const wall_time t0 = from_unix(1761219482, 0);

health_event xid_event(const std::string& uuid, const std::string& code) {
  health_event e;
  e.agent = "syslog-health-monitor";
  e.check_name = "SysLogsXIDError";
  e.node_name = "node1";
  e.error_codes = {code};
  e.entities = {{"GPU_UUID", uuid}, {"PCI", "0000:03:00"}};
  return e;
}

TEST(event_deduplicator, drops_repeats_within_three_minutes) {
  event_deduplicator dedup;
  auto e = xid_event("GPU-a", "48");
  EXPECT_TRUE(dedup.admit(e, t0));
  EXPECT_FALSE(dedup.admit(e, t0 + 2min + 59s));
  EXPECT_TRUE(dedup.admit(e, t0 + 3min));
  // Entity order does not matter; another GPU, code or health does.
  auto reordered = e;
  std::swap(reordered.entities[0], reordered.entities[1]);
  EXPECT_FALSE(dedup.admit(reordered, t0 + 3min + 1s));
  EXPECT_TRUE(dedup.admit(xid_event("GPU-b", "48"), t0 + 3min + 1s));
  EXPECT_TRUE(dedup.admit(xid_event("GPU-a", "79"), t0 + 3min + 1s));
  auto healthy = e;
  healthy.is_healthy = true;
  EXPECT_TRUE(dedup.admit(healthy, t0 + 3min + 1s));
}

TEST(event_deduplicator, forgets_old_keys) {
  event_deduplicator dedup;
  for (int i = 0; i < 10; ++i)
    dedup.admit(xid_event("GPU-" + std::to_string(i), "48"), t0);
  EXPECT_EQ(dedup.tracked(), 10u);
  dedup.admit(xid_event("GPU-x", "48"), t0 + 1h);
  EXPECT_EQ(dedup.tracked(), 1u);
}

TEST(gpu_xid_history, five_bursts_in_a_day_escalate_to_contact_support) {
  gpu_xid_history gpu;
  for (int i = 0; i < 4; ++i) {
    EXPECT_FALSE(gpu.on_fatal_xid(t0 + i * 1h));
    EXPECT_FALSE(gpu.on_fatal_xid(t0 + i * 1h + 2min)); // same burst
  }
  EXPECT_EQ(gpu.bursts(), 4u);
  EXPECT_EQ(gpu.on_fatal_xid(t0 + 4h), recommended_action::contact_support);
  // Sticky for 3 h after the trigger, then released.
  EXPECT_TRUE(gpu.escalated(t0 + 6h + 59min));
  EXPECT_FALSE(gpu.escalated(t0 + 7h));
}

TEST(gpu_xid_history, bursts_older_than_a_day_do_not_count) {
  gpu_xid_history gpu;
  for (int i = 0; i < 4; ++i)
    gpu.on_fatal_xid(t0 + i * 1h);
  EXPECT_FALSE(gpu.on_fatal_xid(t0 + 24h + 30min)); // the first fell out
  EXPECT_EQ(gpu.bursts(), 4u);
}

TEST(nic_port_history, three_link_downs_in_ten_minutes_is_a_flap) {
  nic_port_history port;
  EXPECT_FALSE(port.on_link_downed(1, t0 + 90s));
  EXPECT_FALSE(port.on_link_downed(1, t0 + 260s));
  auto verdict = port.on_link_downed(1, t0 + 430s);
  ASSERT_TRUE(verdict);
  EXPECT_EQ(verdict->what, nic_verdict::kind::flapping);
  EXPECT_EQ(verdict->action, recommended_action::replace_vm);
}

TEST(nic_port_history, link_downs_spread_over_more_than_the_window_are_no_flap) {
  nic_port_history port;
  port.on_link_downed(1, t0);
  port.on_link_downed(1, t0 + 6min);
  EXPECT_FALSE(port.on_link_downed(1, t0 + 10min));
  EXPECT_TRUE(port.on_link_downed(2, t0 + 11min)); // a delta of 2 counts twice
}

TEST(nic_port_history, down_four_minutes_without_link_downed_delta_is_a_drop) {
  nic_port_history port;
  port.on_state(false, t0);
  EXPECT_EQ(port.next_check(), t0 + 4min);
  EXPECT_FALSE(port.evaluate(t0 + 3min + 59s));
  auto verdict = port.evaluate(t0 + 4min);
  ASSERT_TRUE(verdict);
  EXPECT_EQ(verdict->what, nic_verdict::kind::dropped);
  EXPECT_FALSE(port.evaluate(t0 + 5min)); // once per DOWN period
  port.on_state(true, t0 + 6min);
  port.on_state(false, t0 + 7min);
  port.on_link_downed(1, t0 + 8min); // recovery attempts: not a silent drop
  EXPECT_FALSE(port.evaluate(t0 + 12min));
  EXPECT_FALSE(port.next_check());
}

// The console's NIC port row: what the agent last said, and the rises seen.
TEST(nic_port_report, keeps_what_the_agent_last_said_of_the_port) {
  nic_port_report report;
  health_event down;
  down.component_class = "NIC";
  down.check_name = "InfiniBandStateCheck";
  down.entities = {{"NIC", "mlx5_0"}, {"NICPort", "1"}};
  down.metadata = {{"state", "DOWN"},
                   {"phys_state", "Disabled"},
                   {"link_layer", "InfiniBand"},
                   {"role", "compute"}};
  note_port_report(report, down, t0);
  EXPECT_EQ(report.state, "DOWN");
  EXPECT_EQ(report.phys_state, "Disabled");
  EXPECT_EQ(report.role, "compute");
  EXPECT_EQ(report.link_downed, 1u); // a DOWN counts as one rise
  EXPECT_EQ(report.at, t0);
  // A counter event without a state keeps the state, adds its rises.
  health_event counter;
  counter.component_class = "NIC";
  counter.check_name = "InfiniBandDegradationCheck";
  counter.error_codes = {"link_downed"};
  counter.entities = down.entities;
  counter.metadata = {{"previous", "4"}, {"current", "7"}};
  note_port_report(report, counter, t0 + 1min);
  EXPECT_EQ(report.state, "DOWN");
  EXPECT_EQ(report.at, t0 + 1min);
  EXPECT_EQ(report.link_downed, 4u);
}

TEST(nic_port_history, says_since_when_the_port_is_down) {
  nic_port_history port;
  EXPECT_FALSE(port.down_since());
  port.on_state(false, t0);
  EXPECT_EQ(port.down_since(), t0);
  port.on_link_downed(1, t0 + 1min);
  EXPECT_EQ(port.link_downs(), 1u);
  port.on_state(true, t0 + 2min);
  EXPECT_FALSE(port.down_since());
}

TEST(remediation_history, fifth_remediation_in_a_week_escalates) {
  remediation_history node;
  for (int i = 0; i < 4; ++i)
    EXPECT_FALSE(node.on_remediation(t0 + i * 24h));
  EXPECT_TRUE(node.exhausted(t0 + 4 * 24h));
  EXPECT_EQ(node.on_remediation(t0 + 4 * 24h), recommended_action::contact_support);
  EXPECT_EQ(node.count(t0 + 7 * 24h), 4u); // the first left the window
  EXPECT_FALSE(node.exhausted(t0 + 9 * 24h));
}

TEST(fabric_correlator, ports_down_on_k_nodes_raise_one_incident) {
  fabric_correlator fabric;
  EXPECT_FALSE(fabric.on_port_down("n1", t0));
  EXPECT_FALSE(fabric.on_port_down("n1", t0 + 10s)); // the same node again
  EXPECT_FALSE(fabric.on_port_down("n2", t0 + 20s));
  auto incident = fabric.on_port_down("n3", t0 + 30s);
  ASSERT_TRUE(incident);
  EXPECT_EQ(incident->nodes, (std::set<std::string>{"n1", "n2", "n3"}));
  EXPECT_TRUE(fabric.suppresses("n1", t0 + 40s));
  EXPECT_FALSE(fabric.suppresses("n9", t0 + 40s));
  // A later node joins the open incident; a repeat reports nothing new.
  EXPECT_EQ(fabric.on_port_down("n4", t0 + 1min)->nodes.size(), 4u);
  EXPECT_FALSE(fabric.on_port_down("n4", t0 + 2min));
  // Closed after a quiet window.
  EXPECT_FALSE(fabric.open_incident(t0 + 7min));
  EXPECT_FALSE(fabric.suppresses("n1", t0 + 7min));
}

TEST(fabric_correlator, downs_outside_the_window_do_not_correlate) {
  fabric_correlator fabric;
  fabric.on_port_down("n1", t0);
  fabric.on_port_down("n2", t0 + 3min);
  EXPECT_FALSE(fabric.on_port_down("n3", t0 + 6min));
}

} // namespace
} // namespace vigil::control

namespace vigil::control {
namespace {

health_event nic_state(const std::string& port, bool up) {
  health_event e;
  e.agent = "nic-monitor";
  e.component_class = "NIC";
  e.check_name = "InfiniBandStateCheck";
  e.is_healthy = up;
  e.is_fatal = !up;
  e.action = up ? recommended_action::none : recommended_action::restart_vm;
  e.entities = {{"NIC", "mlx5_0"}, {"NICPort", port}};
  e.node_name = "node-1";
  return e;
}

health_event gpu_xid(const std::string& gpu) {
  health_event e;
  e.agent = "xid-monitor";
  e.component_class = "GPU";
  e.check_name = "SysLogsXIDError";
  e.is_fatal = true;
  e.error_codes = {"79"};
  e.action = recommended_action::restart_vm;
  e.entities = {{"GPU_UUID", gpu}};
  e.node_name = "node-1";
  return e;
}

// The degradation check's report of the port's link_downed counter rising
// by one: a recovery attempt.
health_event link_downed_rise(const std::string& port) {
  auto e = nic_state(port, false);
  e.check_name = "InfiniBandDegradationCheck";
  e.error_codes = {"link_downed"};
  e.metadata = {{"previous", "4"}, {"current", "5"}};
  return e;
}

const wall_time start = from_unix(1'800'000'000, 0);

TEST(node_correlator, a_port_down_three_times_in_ten_minutes_is_a_flap) {
  node_correlator rules;
  using namespace std::chrono_literals;
  EXPECT_FALSE(rules.observe(nic_state("1", false), start).escalate);
  EXPECT_FALSE(rules.observe(nic_state("1", true), start + 1min).escalate);
  // The same DOWN resent within the dedup window is not a second flap.
  EXPECT_TRUE(rules.observe(nic_state("1", true), start + 1min + 10s).repeat);
  EXPECT_FALSE(rules.observe(nic_state("1", false), start + 2min).escalate);
  EXPECT_FALSE(rules.observe(nic_state("2", false), start + 2min).escalate); // other port
  rules.observe(nic_state("1", true), start + 3min);
  auto third = rules.observe(nic_state("1", false), start + 4min);
  // The verdict is a record of its own: the port's next UP does not clear it.
  EXPECT_FALSE(third.escalate);
  EXPECT_EQ(third.rule, "nic-flap");
  EXPECT_NE(third.message.find("mlx5_0/1"), std::string::npos) << third.message;
  ASSERT_EQ(third.derived.size(), 1u);
  const auto& flapping = third.derived[0];
  EXPECT_EQ(flapping.check_name, nic_port_flapping_check);
  EXPECT_EQ(flapping.action, recommended_action::replace_vm);
  EXPECT_TRUE(flapping.is_fatal);
  EXPECT_FALSE(flapping.is_healthy);
  EXPECT_EQ(flapping.entities,
            (std::vector<entity>{{"NIC", "mlx5_0"}, {"NICPort", "1"}}));
}

// The NIC monitor reports one DOWN twice in a poll: the state check and the
// degradation check's link_downed rise, at the same instant. It counts once.
TEST(node_correlator, a_down_reported_by_both_checks_counts_once) {
  node_correlator rules;
  using namespace std::chrono_literals;
  auto counter_rise = [](std::uint64_t from, std::uint64_t to) {
    auto e = nic_state("1", false);
    e.check_name = "InfiniBandDegradationCheck";
    e.error_codes = {"link_downed"};
    e.action = recommended_action::replace_vm;
    e.metadata = {{"previous", std::to_string(from)}, {"current", std::to_string(to)}};
    return e;
  };
  for (int i = 0; i < 2; ++i) {
    const auto at = start + i * 2min;
    auto down = nic_state("1", false);
    down.generated = at;
    auto rise = counter_rise(i, i + 1);
    rise.generated = at;
    EXPECT_FALSE(rules.observe(down, at).escalate) << i;
    EXPECT_FALSE(rules.observe(rise, at).escalate) << i;
    auto up = nic_state("1", true);
    up.generated = at + 1min;
    rules.observe(up, at + 1min);
  }
  // The third DOWN is the flap; a counter that rose by 2 at once counts 2.
  auto rise = counter_rise(2, 4);
  rise.generated = start + 4min;
  auto third = rules.observe(rise, start + 4min);
  EXPECT_EQ(third.rule, "nic-flap");
  ASSERT_EQ(third.derived.size(), 1u);
}

TEST(node_correlator, five_bursts_of_fatal_xids_on_one_gpu_need_support) {
  node_correlator rules;
  using namespace std::chrono_literals;
  for (int i = 0; i < 4; ++i) {
    auto e = gpu_xid("GPU-a");
    e.error_codes = {std::to_string(79 + i)}; // not repeats of one another
    EXPECT_FALSE(rules.observe(e, start + std::chrono::hours(i)).escalate) << i;
  }
  EXPECT_FALSE(rules.observe(gpu_xid("GPU-b"), start + 4h).escalate);
  auto fifth = rules.observe(gpu_xid("GPU-a"), start + 5h);
  ASSERT_TRUE(fifth.escalate);
  EXPECT_EQ(*fifth.escalate, recommended_action::contact_support);
  EXPECT_EQ(fifth.rule, "repeated-xid");
}

TEST(node_correlator, fatal_xids_without_a_uuid_count_per_pci_address) {
  node_correlator rules;
  using namespace std::chrono_literals;
  auto on_pci = [](const std::string& pci, int code) {
    auto e = gpu_xid("");
    e.entities = {{"PCI", pci}};
    e.error_codes = {std::to_string(code)};
    return e;
  };
  EXPECT_EQ(subject_of(on_pci("0000:03:00", 79)).key, "PCI 0000:03:00");
  for (int i = 0; i < 4; ++i)
    EXPECT_FALSE(
      rules.observe(on_pci("0000:03:00", 79 + i), start + std::chrono::hours(i)).escalate)
      << i;
  EXPECT_FALSE(rules.observe(on_pci("0000:04:00", 79), start + 4h).escalate);
  auto fifth = rules.observe(on_pci("0000:03:00", 48), start + 5h);
  ASSERT_TRUE(fifth.escalate);
  EXPECT_EQ(fifth.rule, "repeated-xid");
  EXPECT_NE(fifth.message.find("PCI 0000:03:00"), std::string::npos);
}

TEST(node_correlator, a_port_down_for_four_minutes_without_recovery_is_dropped) {
  node_correlator rules;
  using namespace std::chrono_literals;
  rules.observe(nic_state("1", false), start);
  ASSERT_TRUE(rules.next_drop_check().has_value());
  EXPECT_EQ(*rules.next_drop_check(), start + 4min);
  EXPECT_TRUE(rules.due_drops("node-1", start + 3min).empty());
  auto drops = rules.due_drops("node-1", start + 4min);
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_EQ(drops[0].check_name, nic_port_dropped_check);
  EXPECT_EQ(drops[0].action, recommended_action::replace_vm);
  EXPECT_FALSE(drops[0].is_healthy);
  EXPECT_EQ(drops[0].entities,
            (std::vector<entity>{{"NIC", "mlx5_0"}, {"NICPort", "1"}}));
  EXPECT_TRUE(rules.due_drops("node-1", start + 10min).empty()); // once per DOWN
  EXPECT_FALSE(rules.next_drop_check().has_value());
  // Back up: the drop's healthy twin clears what the drop raised.
  auto up = rules.observe(nic_state("1", true), start + 11min);
  ASSERT_EQ(up.derived.size(), 1u);
  EXPECT_TRUE(up.derived[0].is_healthy);
  EXPECT_EQ(up.derived[0].check_name, nic_port_dropped_check);
}

// seed 002 §6.2 in event time: the drop happened at its deadline. A timer
// that fires late, or a replay that evaluates the rule only after the whole
// history, makes the same event (time and id) as a timer on time.
TEST(node_correlator, a_drop_is_stamped_at_its_deadline_however_late_it_is_seen) {
  using namespace std::chrono_literals;
  auto drop_seen_at = [](wall_time when) {
    node_correlator rules;
    rules.observe(nic_state("1", false), start);
    auto drops = rules.due_drops("node-1", when);
    EXPECT_EQ(drops.size(), 1u);
    return drops.empty() ? health_event{} : drops.front();
  };
  const auto on_time = drop_seen_at(start + 4min);
  const auto late = drop_seen_at(start + 3h);
  EXPECT_EQ(on_time.generated, start + 4min);
  EXPECT_EQ(late.generated, on_time.generated);
  EXPECT_EQ(late.id, on_time.id);
  EXPECT_EQ(encode_health_event(late), encode_health_event(on_time));
}

// An event after the deadline finds the drop due and it comes first: a
// link_downed rise 10 minutes into the DOWN does not undo the drop at 4
// minutes, and the port coming back up then clears it.
TEST(node_correlator, an_event_past_the_deadline_comes_after_the_drop) {
  node_correlator rules;
  using namespace std::chrono_literals;
  rules.observe(nic_state("1", false), start);
  const auto rise = link_downed_rise("1");
  auto after = rules.observe(rise, start + 10min);
  ASSERT_EQ(after.due.size(), 1u);
  EXPECT_EQ(after.due[0].check_name, nic_port_dropped_check);
  EXPECT_EQ(after.due[0].generated, start + 4min);
  const auto in_order = events_in_order(rise, after);
  ASSERT_EQ(in_order.size(), 2u);
  EXPECT_EQ(in_order[0].check_name, nic_port_dropped_check);
  EXPECT_EQ(in_order[1].check_name, "InfiniBandDegradationCheck");
  EXPECT_TRUE(rules.due_drops("node-1", start + 11min).empty()); // reported once
  auto up = rules.observe(nic_state("1", true), start + 12min);
  EXPECT_TRUE(up.due.empty());
  ASSERT_EQ(up.derived.size(), 1u);
  EXPECT_TRUE(up.derived[0].is_healthy);
  // Before the deadline an event finds nothing due.
  node_correlator early;
  early.observe(nic_state("1", false), start);
  EXPECT_TRUE(early.observe(rise, start + 3min).due.empty());
}

TEST(node_correlator, recovery_attempts_or_a_fabric_incident_are_not_a_drop) {
  node_correlator rules;
  using namespace std::chrono_literals;
  rules.observe(nic_state("1", false), start);
  const auto counter = link_downed_rise("1");
  rules.observe(counter, start + 1min); // the port tries to come back: a flap
  EXPECT_TRUE(rules.due_drops("node-1", start + 5min).empty());

  node_correlator fabric;
  fabric.observe(nic_state("2", false), start);
  fabric.explain_port_downs();
  EXPECT_TRUE(fabric.due_drops("node-1", start + 5min).empty());
  auto analysed = nic_state("3", false);
  analysed.strategy = processing_strategy::store_and_analyse;
  fabric.observe(analysed, start);
  EXPECT_FALSE(fabric.next_drop_check().has_value());
}

// A fabric incident's ports stay known until each is up again: the records it
// covers, and link-downs the fleet marks as the fabric's afterwards.
TEST(fabric_ports, remembers_covered_and_marked_ports_until_each_is_up) {
  fabric_ports fabric;
  active_record covered;
  covered.component_class = "NIC";
  covered.check_name = "InfiniBandStateCheck";
  covered.subject = {"NICPort", "1"};
  covered.reported_with = {{"NIC", "mlx5_0"}};
  active_record gpu_record;
  gpu_record.subject = {"GPU_UUID", "GPU-1"};
  // A link_downed rise has no "up" to end it: never tracked.
  active_record counter = covered;
  counter.check_name = "InfiniBandErrorCheck";
  counter.subject = {"NICPort", "4"};
  fabric.incident({covered, gpu_record, counter});
  EXPECT_EQ(fabric.ports(), std::set<std::string>{"mlx5_0/1"});

  auto later_down = nic_state("2", false);
  EXPECT_FALSE(fabric.observe(later_down)); // acts on its own: not the fabric's
  later_down.strategy = processing_strategy::store_and_analyse;
  EXPECT_TRUE(fabric.observe(later_down));
  EXPECT_FALSE(fabric.observe(later_down)); // known already
  EXPECT_FALSE(fabric.observe(gpu_xid("GPU-1")));

  EXPECT_TRUE(fabric.observe(nic_state("1", true)));
  EXPECT_EQ(fabric.ports(), std::set<std::string>{"mlx5_0/2"});
  EXPECT_TRUE(fabric.observe(nic_state("2", true)));
  EXPECT_TRUE(fabric.ports().empty());
  EXPECT_FALSE(fabric.observe(nic_state("2", true)));
}

TEST(node_correlator, event_time_wins_over_arrival) {
  node_correlator rules;
  using namespace std::chrono_literals;
  for (int i = 0; i < 3; ++i) {
    auto down = nic_state("1", false);
    down.generated = start + std::chrono::minutes(20 * i); // 20 min apart: no flap
    auto up = nic_state("1", true);
    up.generated = start + std::chrono::minutes(20 * i + 1);
    EXPECT_FALSE(rules.observe(down, start).escalate) << i; // all arrive at once
    rules.observe(up, start);
  }
}

} // namespace
} // namespace vigil::control

namespace vigil::control {
namespace {

health_event on_node(std::string node, std::string id) {
  health_event e;
  e.node_name = std::move(node);
  e.id = std::move(id);
  return e;
}

std::vector<std::string> ids(const std::vector<fabric_hold::held>& released) {
  std::vector<std::string> out;
  for (const auto& h : released)
    out.push_back(h.event.id);
  return out;
}

TEST(fabric_hold, a_link_down_waits_and_its_node_waits_behind_it_in_order) {
  using namespace std::chrono_literals;
  const wall_time t = from_unix(1'800'000'000, 0);
  fabric_hold hold(30s);
  auto down = on_node("n1", "down");
  auto next = on_node("n1", "next");
  auto other = on_node("n2", "other");
  EXPECT_TRUE(hold.take(down, 1, true, t));
  EXPECT_TRUE(hold.take(next, 2, false, t + 5s));   // behind the held one
  EXPECT_FALSE(hold.take(other, 3, false, t + 5s)); // another node: goes now
  EXPECT_EQ(hold.next_due("n1"), t + 30s);
  EXPECT_TRUE(hold.release("n1", t + 29s).empty()); // a stale timer frees nothing
  EXPECT_EQ(ids(hold.release("n1", t + 30s)), (std::vector<std::string>{"down", "next"}));
  EXPECT_FALSE(hold.next_due("n1"));
  EXPECT_EQ(hold.size(), 0u);
}

TEST(fabric_hold, a_second_link_down_behind_the_first_gets_its_own_hold) {
  using namespace std::chrono_literals;
  const wall_time t = from_unix(1'800'000'000, 0);
  fabric_hold hold(30s);
  auto first = on_node("n1", "first");
  auto second = on_node("n1", "second");
  hold.take(first, 1, true, t);
  hold.take(second, 2, true, t + 20s);
  EXPECT_EQ(ids(hold.release("n1", t + 30s)), std::vector<std::string>{"first"});
  EXPECT_EQ(hold.next_due("n1"), t + 50s);
  EXPECT_EQ(ids(hold.release("n1", t + 50s)), std::vector<std::string>{"second"});
}

TEST(fabric_hold, a_restarted_node_forgets_its_held_events) {
  using namespace std::chrono_literals;
  const wall_time t = from_unix(1'800'000'000, 0);
  fabric_hold hold(30s);
  auto down = on_node("n1", "down");
  auto next = on_node("n1", "next");
  hold.take(down, 1, true, t);
  hold.take(next, 2, false, t);
  EXPECT_EQ(hold.drop("n1"), 2u);
  EXPECT_TRUE(hold.release("n1", t + 30s).empty());
  auto later = on_node("n1", "later");
  EXPECT_FALSE(hold.take(later, 3, false, t + 31s)); // nothing to wait behind
}

TEST(fabric_hold, no_hold_configured_takes_nothing) {
  fabric_hold hold;
  auto down = on_node("n1", "down");
  EXPECT_FALSE(hold.take(down, 1, true, from_unix(0, 0)));
}

} // namespace
} // namespace vigil::control
