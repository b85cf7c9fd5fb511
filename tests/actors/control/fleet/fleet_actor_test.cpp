// The fleet actor: it restarts a crashed node actor from the journal,
// notices silent agents, and turns NIC ports down on many nodes into one
// fabric incident instead of a mass quarantine.
#define CAF_SUITE control_fleet
#include <caf/test/dsl.hpp>

#include "actors/control/fleet/fleet_actor_internal.hpp"
#include "actors/control/leader/shard_assignment.hpp"
#include "tests/actors/control/control_fixture.hpp"

using namespace caf;
using namespace vigil;
using namespace vigil::test;
using nlohmann::json;

CAF_TEST_FIXTURE_SCOPE(control_fleet_tests, control_fixture)

CAF_TEST(a_crashed_node_actor_is_restarted_with_its_events_from_the_journal) {
  start();
  post({xid("node-1", "GPU-a"), xid("node-1", "GPU-b")});
  CAF_CHECK(cordoned("node-1"));
  // Find node-1's actor and kill it.
  auto& st = deref<fleet_actor>(fleet).state;
  CAF_REQUIRE_EQUAL(st.nodes.count("node-1"), 1u);
  anon_send_exit(st.nodes["node-1"], exit_reason::kill);
  sched.run();
  CAF_CHECK_EQUAL(st.stats.restarts, 1u);
  // One GPU recovers: still quarantined (the restarted actor remembers GPU-b).
  post({xid("node-1", "GPU-a", true)});
  CAF_CHECK(cordoned("node-1"));
  post({xid("node-1", "GPU-b", true)});
  CAF_CHECK(!cordoned("node-1"));
}

// A GPU node whose agent went quiet: a condition and an Event, never a
// cordon; a heartbeat (or an event) sets it right again.
CAF_TEST(a_silent_agent_is_noticed_and_its_return_too) {
  settings->agent_silence = std::chrono::seconds{300};
  jobs_only = true;
  start();
  auto agent_condition = [&](const std::string& name) {
    return condition_status(name, control::agent_condition_type);
  };
  advance(std::chrono::seconds{200});
  self->send(fleet, agent_heard_atom::value, std::string{"node-1"});
  advance(std::chrono::seconds{160}); // 360 s: node-1 heard at 200 s
  CAF_CHECK_EQUAL(agent_condition("node-1"), "");
  CAF_CHECK_EQUAL(agent_condition("node-2"), "False");
  CAF_CHECK(!cordoned("node-2"));
  CAF_CHECK_EQUAL(events_posted("AgentSilent", "node-2"), 1u);
  advance(std::chrono::seconds{600});
  CAF_CHECK_EQUAL(events_posted("AgentSilent", "node-2"), 1u); // once
  self->send(fleet, agent_heard_atom::value, std::string{"node-2"});
  run();
  CAF_CHECK_EQUAL(agent_condition("node-2"), "True");
  CAF_CHECK_EQUAL(events_posted("AgentReporting", "node-2"), 1u);
}

CAF_TEST(nic_ports_down_on_many_nodes_are_one_fabric_incident_not_a_mass_quarantine) {
  start();
  post({port_state("node-1", false, 0)});
  post({port_state("node-2", false, 0)});
  CAF_CHECK(cordoned("node-1"));
  CAF_CHECK(cordoned("node-2"));
  post({port_state("node-3", false, 0)}); // the third node within 5 min: the fabric
  CAF_CHECK_EQUAL(journal_rows(fabric_row), 1u);
  CAF_CHECK(!cordoned("node-1"));
  CAF_CHECK(!cordoned("node-2"));
  CAF_CHECK(!cordoned("node-3"));
  post({port_state("node-4", false, 0)}); // joins the open incident
  CAF_CHECK(!cordoned("node-4"));
  // Ports still down after the drop rule's time: the fabric explains them.
  advance(std::chrono::minutes{5});
  CAF_CHECK(!cordoned("node-1"));
  CAF_CHECK(!cordoned("node-4"));
  CAF_CHECK_EQUAL(journal_rows(correlation_row), 0u);
  CAF_CHECK_EQUAL(journal_rows("event"), 4u); // every event is still journaled
  CAF_CHECK_EQUAL(journal_rows(breaker_row::tripped), 0u);
  // Schedulable, but new pods had better go elsewhere until the ports are up.
  for (const char* n : {"node-1", "node-2", "node-3", "node-4"}) {
    CAF_CHECK_EQUAL(condition_status(n, control::fabric_condition_type), "False");
    CAF_CHECK_EQUAL(taint_effect_of(n, control::fabric_taint_key), "PreferNoSchedule");
  }
  post({port_state("node-1", true, 1)});
  CAF_CHECK_EQUAL(condition_status("node-1", control::fabric_condition_type), "True");
  CAF_CHECK_EQUAL(taint_effect_of("node-1", control::fabric_taint_key), "");
  CAF_CHECK_EQUAL(taint_effect_of("node-2", control::fabric_taint_key),
                  "PreferNoSchedule");
  // A restart replays the port-downs and, where the journal has it, the
  // incident that covered them: still no quarantine.
  restart();
  advance(std::chrono::minutes{5});
  for (const char* n : {"node-1", "node-2", "node-3", "node-4"})
    CAF_CHECK(!cordoned(n));
}

// The fabric window survives a restart: a port-down just after it joins the
// two its peers reported just before, and the three are one incident.
CAF_TEST(a_fabric_incident_forms_across_a_restart) {
  start();
  post({port_state("node-1", false, 0)});
  post({port_state("node-2", false, 0)});
  CAF_CHECK(cordoned("node-2"));
  restart();
  advance(std::chrono::minutes{1});
  post({port_state("node-3", false, 0)});
  CAF_CHECK_EQUAL(journal_rows(fabric_row), 1u);
  for (const char* n : {"node-1", "node-2", "node-3"})
    CAF_CHECK(!cordoned(n));
}

// The NIC monitor's link_downed rise comes with each DOWN; with the fabric
// hold, the first nodes of an incident are never cordoned at all.
CAF_TEST(a_held_link_down_is_claimed_by_the_fabric_incident_that_forms) {
  settings->correlation.fabric_hold = std::chrono::seconds{30};
  start();
  auto rise = [](const std::string& node) {
    auto e = port_state(node, false, 0);
    e.id += "-link_downed";
    e.check_name = "InfiniBandDegradationCheck";
    e.error_codes = {"link_downed"};
    e.action = recommended_action::replace_vm;
    e.metadata = {{"previous", "0"}, {"current", "1"}};
    return e;
  };
  // A lone link down quarantines its node once the hold is over.
  post({port_state("node-4", false, 0), rise("node-4")});
  advance(std::chrono::seconds{29});
  CAF_CHECK(!cordoned("node-4"));
  advance(std::chrono::seconds{2});
  CAF_CHECK(cordoned("node-4"));
  // Later, outside that one's window, three nodes at once: the incident
  // claims every report before it reaches a node.
  advance(std::chrono::minutes{10});
  post({port_state("node-1", false, 0), rise("node-1")});
  post({port_state("node-2", false, 0), rise("node-2")});
  advance(std::chrono::seconds{10});
  CAF_CHECK(!cordoned("node-1"));
  post({port_state("node-3", false, 0), rise("node-3")});
  CAF_CHECK_EQUAL(journal_rows(fabric_row), 1u);
  advance(std::chrono::minutes{1});
  for (const char* n : {"node-1", "node-2", "node-3"}) {
    CAF_CHECK(!cordoned(n));
    CAF_CHECK_EQUAL(events_posted("FabricIncident", n), 1u);
  }
  CAF_CHECK_EQUAL(events_posted("FabricIncident", "node-4"), 0u);
  CAF_CHECK_EQUAL(drain_rows("started"), 1u); // node-4's only
}

// The Node list comes page by page (the gateway hands each on as the API
// server gives it): a page's Nodes get their actors at once, and the GPU-node
// count goes to the breaker when the last page is in, without the GPU nodes
// the list no longer shows.
CAF_TEST(a_node_list_in_pages_is_counted_when_its_last_page_is_in) {
  start();
  auto gpu_nodes = [](const std::string& summary) {
    return json::parse(summary)["gpuNodes"].get<std::size_t>();
  };
  const auto all = gpu_nodes(ask(fleet, summary_atom::value));
  CAF_REQUIRE_GREATER_OR_EQUAL(all, 3u);
  CAF_CHECK_EQUAL(gpu_nodes(ask(breaker, summary_atom::value)), all);
  // A relist in which the next-to-last Node is gone.
  const auto items = (*store->list(*nodes(), "", {}).value)["items"];
  json first = json::array();
  for (std::size_t i = 0; i + 2 < items.size(); ++i)
    first.push_back(items[i]);
  auto page = [&](json part, std::size_t number, bool last) {
    auto list = std::make_shared<const json>(json{
      {"kind", "NodeList"}, {"metadata", json::object()}, {"items", std::move(part)}});
    self->send(fleet, kube_watch_event{1, "LISTED", std::move(list), "", number, last});
    run();
  };
  page(first, 0, false);
  CAF_CHECK_EQUAL(gpu_nodes(ask(breaker, summary_atom::value)), all);
  page(json::array({items.back()}), 1, true);
  CAF_CHECK_EQUAL(gpu_nodes(ask(fleet, summary_atom::value)), all - 1);
  CAF_CHECK_EQUAL(gpu_nodes(ask(breaker, summary_atom::value)), all - 1);
}

// Issue 22's three-replica test, under load: a replica gained two shards a
// few milliseconds apart; the second was gained while the first's history
// was read, its node actors came up with the new Node list and one
// uncordoned a node whose reboot was in flight (in the history not yet
// read), which then rebooted uncordoned. A node is not to act while its
// shard waits for its read, nor while its shard is read.
CAF_TEST(a_node_waits_for_its_shards_history_while_another_shard_is_read) {
  const std::uint32_t k = 6;
  auto sharded = std::make_shared<node_settings>(*settings);
  sharded->shards = k;
  fleet_state st;
  st.settings = sharded;
  std::string first_shard_node, second_shard_node, owned_before;
  for (int i = 1;
       first_shard_node.empty() || second_shard_node.empty() || owned_before.empty();
       ++i) {
    const auto name = "node-" + std::to_string(i);
    const auto shard = control::shard_of(name, k);
    (shard == 5   ? first_shard_node
     : shard == 3 ? second_shard_node
                  : owned_before) = name;
  }
  st.rebuilt = true;
  st.owned = {0, 1, 2, 4};
  CAF_CHECK(!fleet_detail::history_pending(st, owned_before));
  // Shard 5 gained: its history is read.
  st.owned.insert(5);
  st.rebuilt = false;
  st.rebuilding = {5};
  CAF_CHECK(fleet_detail::history_pending(st, first_shard_node));
  CAF_CHECK(!fleet_detail::history_pending(st, owned_before));
  // Shard 3 gained meanwhile: it waits for the next read.
  st.owned.insert(3);
  st.pending_gain = {3};
  CAF_CHECK(fleet_detail::history_pending(st, second_shard_node));
  // Shard 5's read is over; shard 3's has not begun (a tail read is out).
  st.rebuilt = true;
  st.rebuilding.clear();
  CAF_CHECK(!fleet_detail::history_pending(st, first_shard_node));
  CAF_CHECK(fleet_detail::history_pending(st, second_shard_node));
  // Its read begins, then ends.
  st.pending_gain.clear();
  st.rebuilt = false;
  st.rebuilding = {3};
  CAF_CHECK(fleet_detail::history_pending(st, second_shard_node));
  st.rebuilt = true;
  st.rebuilding.clear();
  CAF_CHECK(!fleet_detail::history_pending(st, second_shard_node));
}

CAF_TEST_FIXTURE_SCOPE_END()
