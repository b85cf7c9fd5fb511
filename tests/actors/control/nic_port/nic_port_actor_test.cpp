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

CAF_TEST_FIXTURE_SCOPE_END()
