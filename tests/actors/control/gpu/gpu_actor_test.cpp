// The gpu actors: one per GPU a node's events name, holding its XID history.
#define CAF_SUITE control_gpu
#include <caf/test/dsl.hpp>

#include "tests/actors/control/control_fixture.hpp"

using namespace caf;
using namespace vigil;
using namespace vigil::test;
using nlohmann::json;

CAF_TEST_FIXTURE_SCOPE(control_gpu_tests, control_fixture)

// ARCHITECTURE.md §3: each GPU's XID history lives in its own gpu actor (each
// NIC port's in a nic_port actor), spawned by the node actor on the first event
// that names it; a restarted node rebuilds them from the journal, so the
// repeated-XID rule still counts the bursts before it.
CAF_TEST(repeated_fatal_xids_on_one_gpu_escalate_in_its_gpu_actor_across_a_restart) {
  start();
  {
    auto idle = node_summary("node-1");
    CAF_CHECK_EQUAL(idle.value("gpuActors", -1), 0);
  }
  auto burst = [&](int n) {
    auto e = xid("node-1", "GPU-a");
    e.id += "-" + std::to_string(n);
    e.generated = time->wall_now();
    post({e});
    advance(std::chrono::minutes{10}); // each one its own burst
  };
  for (int n = 0; n < 4; ++n)
    burst(n);
  CAF_CHECK_EQUAL(journal_rows(correlation_row), 0u);
  burst(4); // the fifth burst within 24 h
  CAF_CHECK_EQUAL(journal_rows(correlation_row), 1u);
  {
    auto summary = node_summary("node-1");
    CAF_CHECK_EQUAL(summary.value("gpuActors", -1), 1);
    CAF_CHECK_EQUAL(summary.value("nicPortActors", -1), 0);
  }
  auto& st = deref<fleet_actor>(fleet).state;
  anon_send_exit(st.nodes["node-1"], exit_reason::kill);
  sched.run();
  CAF_CHECK_EQUAL(st.stats.restarts, 1u);
  // The rebuilt gpu actor holds the five bursts: a sixth still escalates
  // (a fresh history would count one).
  burst(5);
  CAF_CHECK_EQUAL(journal_rows(correlation_row), 2u);
  post({port_state("node-1", false, 0)});
  auto summary = node_summary("node-1");
  CAF_CHECK_EQUAL(summary.value("gpuActors", -1), 1);
  CAF_CHECK_EQUAL(summary.value("nicPortActors", -1), 1);
}

CAF_TEST_FIXTURE_SCOPE_END()
