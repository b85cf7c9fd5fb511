// The node actor's quarantine: cordon, taint, condition and annotation on a
// fatal event, released only by the matching healthy events; a stale write
// re-read and converged, API failures retried, dry-run.
#define CAF_SUITE control_node
#include <caf/test/dsl.hpp>

#include "tests/actors/control/control_fixture.hpp"

using namespace caf;
using namespace vigil;
using namespace vigil::test;
using nlohmann::json;

CAF_TEST_FIXTURE_SCOPE(control_node_tests, control_fixture)

CAF_TEST(a_fatal_xid_quarantines_the_node_after_it_is_journaled) {
  start();
  post({xid("node-1", "GPU-a")});
  CAF_REQUIRE_EQUAL(replies.size(), 1u);
  CAF_CHECK_EQUAL(replies[0].http_status, 200);
  CAF_CHECK_EQUAL(journal_rows("event"), 1u);
  CAF_CHECK(cordoned("node-1"));
  auto n = node("node-1");
  CAF_CHECK_EQUAL(n["metadata"]["annotations"]["vigil.dev/cordoned"], "true");
  CAF_CHECK_EQUAL(n["spec"]["taints"].size(), 1u);
  CAF_CHECK_EQUAL(n["status"]["conditions"][0]["type"], "GPUHealthy");
  CAF_CHECK_EQUAL(n["status"]["conditions"][0]["status"], "False");
  CAF_CHECK_EQUAL(journal_rows(quarantine_row), 1u);
  CAF_CHECK_EQUAL(requests("POST"), 1u); // the Kubernetes Event
  CAF_CHECK(!cordoned("node-2"));
}

// issue 18 "Trace": the fleet hands the console's trace to the node actor,
// whose observed base reports its next messages (type, sender, time) and then
// ends it; the node's summary carries its mailbox figures.
CAF_TEST(a_trace_follows_a_node_actors_next_messages_then_ends) {
  start();
  self->send(fleet, trace_atom::value, std::string{"node-9"}, actor{self}, 5u, 60u);
  run();
  std::string why;
  self->receive([&](trace_end_atom, const std::string& s) { why = s; });
  CAF_CHECK_EQUAL(why, "no node actor for node-9");
  self->send(fleet, trace_atom::value, std::string{"node-1"}, actor{self}, 2u, 60u);
  run();
  post({xid("node-1", "GPU-a")});
  std::vector<json> lines;
  why.clear();
  for (int i = 0; i < 3; ++i)
    self->receive(
      [&](trace_line_atom, const std::string& s) { lines.push_back(json::parse(s)); },
      [&](trace_end_atom, const std::string& s) { why = s; });
  CAF_REQUIRE_EQUAL(lines.size(), 2u);
  CAF_CHECK_EQUAL(lines[0]["seq"], 1);
  CAF_CHECK_EQUAL(lines[1]["seq"], 2);
  for (const auto& l : lines) {
    CAF_CHECK(!l["type"].get<std::string>().empty());
    CAF_CHECK(l["micros"].get<double>() >= 0);
    CAF_CHECK(l.contains("sender"));
  }
  CAF_CHECK_EQUAL(why, "the trace's message count is reached");
  auto figures = node_summary("node-1")["messages"];
  CAF_CHECK(figures["handled"].get<std::uint64_t>() >= 2u);
  CAF_CHECK(!figures["types"].empty());
}

// An agent's batch for one node (after an outage: hundreds at once) is taken
// in order, one event at a time behind its GPU actor's answer; the rest wait
// in the node (its eventsWaiting), not in its mailbox, where each answer made
// CAF look at every one of them again (RELIABILITY.md "Load").
CAF_TEST(a_batch_for_one_node_is_taken_in_order_behind_each_correlation) {
  start();
  std::vector<health_event> batch;
  for (int n = 0; n < 5; ++n) { // five bursts within 24 h: the fifth escalates
    auto e = xid("node-1", "GPU-a");
    e.id += "-" + std::to_string(n);
    e.generated = time->wall_now() - std::chrono::minutes{10 * (5 - n)};
    batch.push_back(e);
  }
  auto recovered = xid("node-1", "GPU-a", true);
  recovered.generated = time->wall_now();
  batch.push_back(recovered);
  post(batch);
  CAF_REQUIRE_EQUAL(replies.size(), 1u);
  CAF_CHECK_EQUAL(replies[0].http_status, 200);
  // The deepest node backlog counts the events waiting behind a correlation:
  // the last one found the four between it and the first.
  CAF_CHECK_GREATER_OR_EQUAL(settings->counters->node_mailbox_high.load(),
                             batch.size() - 2);
  CAF_CHECK_EQUAL(journal_rows(correlation_row), 1u);
  auto summary = node_summary("node-1");
  CAF_CHECK_EQUAL(summary["events"], batch.size());
  CAF_CHECK_EQUAL(summary["eventsWaiting"], 0);
  CAF_CHECK_EQUAL(summary["ruleFirings"], 1);
  // The recovery came last, so it closed the faults before it.
  CAF_CHECK(!cordoned("node-1"));
}

CAF_TEST(a_healthy_event_for_another_gpu_does_not_uncordon) {
  start();
  post({xid("node-1", "GPU-a")});
  post({xid("node-1", "GPU-b", true)});
  CAF_CHECK(cordoned("node-1"));
  post({xid("node-1", "GPU-a", true)});
  CAF_CHECK(!cordoned("node-1"));
  auto n = node("node-1");
  CAF_CHECK(!n["metadata"].contains("annotations")
            || !n["metadata"]["annotations"].contains("vigil.dev/cordoned"));
  CAF_CHECK(!n["spec"].contains("taints") || n["spec"]["taints"].empty());
  CAF_CHECK_EQUAL(n["status"]["conditions"][0]["status"], "True");
}

// seed 003 (medik8s NodeHealthCheck's rule): a GPU node NotReady for
// control.not_ready_after gets vigil's own NodeNotReady event (journaled,
// RESTART_BM), which quarantines it; Ready again clears it. A node-problem-
// detector condition becomes an event of its type the same way.
CAF_TEST(a_gpu_node_that_stops_talking_gets_a_reboot_event_and_is_cleared_when_ready) {
  control::quarantine_rule node_rule;
  node_rule.name = "fatal-node";
  node_rule.match.component_classes = {"Node"};
  node_rule.match.is_fatal = true;
  settings->quarantine.rules.push_back(node_rule);
  start();
  auto conditions = [&](json list) {
    auto n = node("node-1");
    n["status"]["conditions"] = std::move(list);
    self->send(fleet,
               kube_watch_event{1, "MODIFIED", std::make_shared<const json>(n), ""});
    run();
  };
  auto ready = [&](const std::string& status) {
    return json{{"type", "Ready"},
                {"status", status},
                {"reason", status == "True" ? "KubeletReady" : "NodeStatusUnknown"},
                {"message", "Kubelet stopped posting node status."},
                {"lastTransitionTime", format_rfc3339(time->wall_now())}};
  };
  conditions(json::array({ready("Unknown")}));
  CAF_CHECK_EQUAL(journal_rows("event"), 0u); // not for 5 minutes yet
  advance(std::chrono::seconds{299});
  CAF_CHECK_EQUAL(journal_rows("event"), 0u);
  advance(std::chrono::seconds{1});
  CAF_REQUIRE_EQUAL(journal_rows("event"), 1u);
  CAF_CHECK(cordoned("node-1"));
  CAF_CHECK(node_summary("node-1").dump().find("NodeNotReady") != std::string::npos);
  auto rows = journal_db->read({});
  CAF_REQUIRE(rows.has_value());
  auto raised = json::parse(rows->front().body);
  CAF_CHECK_EQUAL(raised["checkName"], "NodeNotReady");
  CAF_CHECK_EQUAL(raised["recommendedAction"], "RESTART_BM");
  CAF_CHECK_EQUAL(raised["agent"], "vigil-control");
  // The same condition seen again raises nothing more.
  conditions(json::array({ready("Unknown")}));
  CAF_CHECK_EQUAL(journal_rows("event"), 1u);
  conditions(json::array({ready("True")}));
  CAF_CHECK_EQUAL(journal_rows("event"), 2u);
  CAF_CHECK(!cordoned("node-1"));

  conditions(json::array({ready("True"), json{{"type", "KernelDeadlock"},
                                              {"status", "True"},
                                              {"reason", "DockerHung"},
                                              {"message", "task docker:7 blocked"}}}));
  CAF_CHECK_EQUAL(journal_rows("event"), 3u);
  CAF_CHECK(cordoned("node-1"));
  conditions(json::array({ready("True"), json{{"type", "KernelDeadlock"},
                                              {"status", "False"},
                                              {"reason", "KernelHasNoDeadlock"}}}));
  CAF_CHECK_EQUAL(journal_rows("event"), 4u);
  CAF_CHECK(!cordoned("node-1"));
  // A Node that is not a GPU node is not vigil's to reboot.
  auto cpu = node("node-2");
  cpu["metadata"]["labels"] = json::object();
  cpu["status"]["conditions"] = json::array({ready("False")});
  self->send(fleet,
             kube_watch_event{1, "MODIFIED", std::make_shared<const json>(cpu), ""});
  advance(std::chrono::seconds{600});
  CAF_CHECK_EQUAL(journal_rows("event"), 4u);
}

CAF_TEST(a_node_cordoned_by_someone_else_is_never_uncordoned) {
  CAF_REQUIRE(store
                ->patch(*nodes(), "", "node-2", json{{"spec", {{"unschedulable", true}}}},
                        kube::patch_type::merge, false)
                .ok());
  start();
  post({xid("node-2", "GPU-a")});
  post({xid("node-2", "GPU-a", true)});
  CAF_CHECK(cordoned("node-2"));
  // vigil's taint and condition are gone: only what it added was released.
  auto n = node("node-2");
  CAF_CHECK(!n["spec"].contains("taints") || n["spec"]["taints"].empty());
}

CAF_TEST(a_node_changed_meanwhile_is_reread_and_converged) {
  start();
  // Someone labels node-1 after vigil observed it: vigil's PATCH is stale.
  CAF_REQUIRE(store
                ->patch(*nodes(), "", "node-1",
                        json{{"metadata", {{"labels", {{"team", "x"}}}}}},
                        kube::patch_type::merge, false)
                .ok());
  post({xid("node-1", "GPU-a")});
  CAF_CHECK(cordoned("node-1"));
  auto relabelled = node("node-1");
  CAF_CHECK_EQUAL(relabelled["metadata"]["labels"]["team"], "x");
  auto node_summary = json::parse(ask(fleet, summary_atom::value, std::string("node-1")));
  CAF_CHECK_EQUAL(node_summary["conflicts"], 1);
  auto summary = json::parse(ask(fleet, summary_atom::value));
  CAF_CHECK_EQUAL(summary["nodes"], 4);
}

CAF_TEST(api_failures_are_retried_with_backoff) {
  start();
  deref<fake_gateway_actor>(gateway).state.fail_next = {503, 503};
  post({xid("node-1", "GPU-a")});
  CAF_CHECK(!cordoned("node-1"));
  sched.trigger_timeouts(); // first retry: fails again
  sched.run();
  CAF_CHECK(!cordoned("node-1"));
  sched.trigger_timeouts();
  sched.run();
  CAF_CHECK(cordoned("node-1"));
}

CAF_TEST(dry_run_journals_decisions_and_writes_nothing) {
  settings->dry_run = true;
  start();
  auto patches_before = requests("PATCH");
  post({xid("node-1", "GPU-a")});
  CAF_CHECK(!cordoned("node-1"));
  CAF_CHECK_EQUAL(requests("PATCH"), patches_before);
  CAF_CHECK_EQUAL(journal_rows(quarantine_row), 1u);
}

CAF_TEST_FIXTURE_SCOPE_END()
