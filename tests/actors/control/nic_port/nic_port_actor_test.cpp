// The nic_port actors: a flapping port and a port dropped without recovery
// attempts (seed 002 §6.2, §6.3).
#define CAF_SUITE control_nic_port
#include <caf/test/dsl.hpp>

#include "tests/actors/control/control_fixture.hpp"

using namespace caf;
using namespace vigil;
using namespace vigil::test;
using nlohmann::json;

CAF_TEST_FIXTURE_SCOPE(control_nic_port_tests, control_fixture)

CAF_TEST(a_flapping_nic_port_escalates_to_replace_vm) {
  start();
  for (int i = 0; i < 3; ++i) {
    advance(std::chrono::minutes{1});
    post({port_state("node-1", false, i)});
    CAF_CHECK(cordoned("node-1"));
    post({port_state("node-1", true, i)});
  }
  // The port is up again, but the flap verdict stays until a reboot or a
  // new node (seed 002 §6.3): the node stays out.
  CAF_CHECK(cordoned("node-1"));
  CAF_CHECK_EQUAL(events_posted("CorrelationRuleFired", "node-1"), 1u);
  {
    auto summary = node_summary("node-1");
    bool flapping = false;
    for (const auto& a : summary["active"])
      flapping = flapping || a["check"] == control::nic_port_flapping_check;
    CAF_CHECK(flapping);
  }
  CAF_CHECK_EQUAL(journal_rows(correlation_row), 1u);
  auto rows = journal_db->read({});
  CAF_REQUIRE(rows.has_value());
  for (const auto& r : *rows)
    if (r.kind == correlation_row) {
      auto body = json::parse(r.body);
      CAF_CHECK_EQUAL(body["rule"], "nic-flap");
      CAF_CHECK_EQUAL(body["recommendedAction"], "REPLACE_VM");
    }
  auto summary = node_summary("node-1");
  CAF_CHECK_EQUAL(summary["ruleFirings"], 1);
  auto fleet_summary = json::parse(ask(fleet, summary_atom::value)); // a named copy
  CAF_CHECK_EQUAL(fleet_summary["ruleFiringsNicFlap"], 1);
  CAF_CHECK_EQUAL(fleet_summary["ruleFiringsRepeatedXid"], 0);
}

CAF_TEST(a_port_down_without_recovery_attempts_is_dropped_and_replace_vm) {
  start();
  post({port_state("node-1", false, 0)});
  CAF_CHECK(cordoned("node-1"));
  CAF_CHECK_EQUAL(journal_rows(correlation_row), 0u);
  advance(std::chrono::minutes{4});
  CAF_CHECK_EQUAL(journal_rows(correlation_row), 1u);
  {
    auto summary = node_summary("node-1"); // a named copy: the check keeps references
    bool dropped = false;
    for (const auto& a : summary["active"])
      dropped = dropped || a["check"] == control::nic_port_dropped_check;
    CAF_CHECK(dropped);
  }
  // The port comes back: the drop's record goes with the port's.
  post({port_state("node-1", true, 0)});
  CAF_CHECK(!cordoned("node-1"));
}

namespace {

// A report of the port with the agent's time, as the NIC monitor sends it.
health_event port_report(control_fixture& f, bool up, int n) {
  auto e = port_state("node-1", up, n);
  e.generated = f.time->wall_now();
  return e;
}

// The port's link_downed counter rose while it stays DOWN: a recovery try.
health_event link_downed_rise(control_fixture& f) {
  auto e = port_report(f, false, 100);
  e.id = "node-1-mlx5_0-1-link-downed";
  e.check_name = "InfiniBandDegradationCheck";
  e.error_codes = {"link_downed"};
  e.metadata = {{"previous", "4"}, {"current", "5"}};
  return e;
}

bool has_drop_record(control_fixture& f) {
  auto summary = f.node_summary("node-1"); // a named copy: the check keeps references
  for (const auto& a : summary["active"])
    if (a["check"] == control::nic_port_dropped_check)
      return true;
  return false;
}

} // namespace

// seed 002 §6.2 in event time: the drop happened at 4 minutes; a recovery try
// at 10 minutes does not undo it, live or replayed. A restart rebuilds the
// drop without journaling it again or patching the Node.
CAF_TEST(a_restart_rebuilds_a_drop_as_it_happened) {
  start();
  post({port_report(*this, false, 0)});
  advance(std::chrono::minutes{4});
  CAF_CHECK(has_drop_record(*this));
  advance(std::chrono::minutes{6});
  post({link_downed_rise(*this)});
  CAF_CHECK(has_drop_record(*this));
  const auto node_before = node("node-1");
  restart();
  CAF_CHECK(has_drop_record(*this));
  CAF_CHECK_EQUAL(node("node-1").dump(), node_before.dump());
  const auto patches = node_summary("node-1")["patches"].get<int>();
  CAF_CHECK_EQUAL(patches, 0);
  CAF_CHECK_EQUAL(journal_rows(correlation_row), 1u);
  CAF_CHECK_EQUAL(events_posted("CorrelationRuleFired", "node-1"), 1u);
}

// A port that came back after its drop stays released through a restart: the
// replayed history brings it back after the drop, not before.
CAF_TEST(a_restart_keeps_a_port_back_from_its_drop_released) {
  start();
  post({port_report(*this, false, 0)});
  advance(std::chrono::minutes{5});
  CAF_CHECK(has_drop_record(*this));
  post({port_report(*this, true, 0)});
  CAF_CHECK(!cordoned("node-1"));
  const auto node_before = node("node-1");
  restart();
  CAF_CHECK(!has_drop_record(*this));
  CAF_CHECK(!cordoned("node-1"));
  CAF_CHECK_EQUAL(node("node-1").dump(), node_before.dump());
  CAF_CHECK_EQUAL(journal_rows(correlation_row), 1u);
}

// A port still DOWN when the control plane went away: the drop falls due
// after the restart's replay, at its deadline, once.
CAF_TEST(a_drop_due_while_the_control_plane_was_away_is_found_after_the_replay) {
  start();
  post({port_report(*this, false, 0)});
  advance(std::chrono::minutes{1});
  restart();
  CAF_CHECK(!has_drop_record(*this));
  advance(std::chrono::minutes{3});
  CAF_CHECK(has_drop_record(*this));
  CAF_CHECK_EQUAL(journal_rows(correlation_row), 1u);
  restart();
  CAF_CHECK(has_drop_record(*this));
  CAF_CHECK_EQUAL(journal_rows(correlation_row), 1u);
  CAF_CHECK_EQUAL(events_posted("CorrelationRuleFired", "node-1"), 1u);
}

CAF_TEST_FIXTURE_SCOPE_END()
