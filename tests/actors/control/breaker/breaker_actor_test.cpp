// The breaker actor: the fleet's cordon budget (its trip, reset and
// restart) and the per-pool budget of concurrent remediations.
#define CAF_SUITE control_breaker
#include <caf/test/dsl.hpp>

#include "tests/actors/control/control_fixture.hpp"

using namespace caf;
using namespace vigil;
using namespace vigil::test;
using nlohmann::json;

CAF_TEST_FIXTURE_SCOPE(control_breaker_tests, control_fixture)

CAF_TEST(the_breaker_trips_at_its_threshold_and_not_before) {
  control::breaker_config config;
  config.max_cordoned_percent = 50; // of 4 GPU nodes: 2 may be cordoned
  start(config);
  post({xid("node-1", "GPU-a")});
  post({xid("node-2", "GPU-a")});
  CAF_CHECK(cordoned("node-1"));
  CAF_CHECK(cordoned("node-2"));
  CAF_CHECK_EQUAL(journal_rows(breaker_row::tripped), 0u);
  post({xid("node-3", "GPU-a")});
  CAF_CHECK(!cordoned("node-3"));
  CAF_CHECK_EQUAL(journal_rows(breaker_row::tripped), 1u);
  CAF_CHECK_EQUAL(events_posted("QuarantineHeld", "node-3"), 1u);
  // The event is still journaled and the node still reports its condition.
  CAF_CHECK_EQUAL(journal_rows("event"), 3u);
  auto held = node("node-3"); // a named copy: the check keeps references
  CAF_CHECK_EQUAL(held["status"]["conditions"][0]["status"], "False");
  // Releasing is always allowed while tripped.
  post({xid("node-1", "GPU-a", true)});
  CAF_CHECK(!cordoned("node-1"));
  // After an explicit reset the held node is quarantined on its next trigger.
  CAF_CHECK_EQUAL(ask(breaker, reset_atom::value), "reset");
  CAF_CHECK_EQUAL(journal_rows(breaker_row::reset), 1u);
  list_nodes();
  CAF_CHECK(cordoned("node-3"));
}

// Before the fleet has listed the Nodes the percentage limit has no
// denominator: a new cordon waits, unanswered, for the count instead of going
// uncounted (or being refused).
CAF_TEST(cordons_wait_for_the_gpu_node_count) {
  auto fresh = sys.spawn(vigil::breaker, control::breaker_config{}, journal, time);
  run();
  self->send(fresh, admit_atom::value, std::string("node-1"));
  run();
  CAF_CHECK(self->mailbox().empty());
  anon_send(fresh, gpunodes_atom::value, std::uint64_t{4});
  run();
  std::string answer = "none";
  self->receive([&](const std::string& s) { answer = s; });
  CAF_CHECK_EQUAL(answer, "");
  anon_send_exit(fresh, exit_reason::user_shutdown);
  run();
}

CAF_TEST(a_tripped_breaker_survives_a_restart) {
  control::breaker_config config;
  config.max_cordoned_nodes = 1;
  start(config);
  post({xid("node-1", "GPU-a")});
  post({xid("node-2", "GPU-a")});
  CAF_CHECK(!cordoned("node-2"));
  restart(config); // a new control plane over the same journal
  auto summary = ask(breaker, summary_atom::value);
  CAF_CHECK(json::parse(summary)["tripped"].get<bool>());
  CAF_CHECK(!cordoned("node-2"));
  // The rebuilt node-1 still knows its fault: a recovery releases it.
  post({xid("node-1", "GPU-a", true)});
  CAF_CHECK(!cordoned("node-1"));
}

// The cordons counted in the window survive a restart too: a control plane
// restarted right after a cordon does not grant a fresh budget.
CAF_TEST(the_breakers_window_survives_a_restart) {
  control::breaker_config config;
  config.max_cordoned_nodes = 1;
  start(config);
  post({xid("node-1", "GPU-a")});
  CAF_CHECK(cordoned("node-1"));
  restart(config);
  auto summary = json::parse(ask(breaker, summary_atom::value)); // a named copy
  CAF_CHECK_EQUAL(summary["cordonsInWindow"], 1);
  post({xid("node-2", "GPU-a")});
  CAF_CHECK(!cordoned("node-2"));
  CAF_CHECK_EQUAL(journal_rows(breaker_row::tripped), 1u);
}

CAF_TEST(a_pool_runs_at_most_its_budget_of_remediations_at_once) {
  settings->remediation.enabled = true;
  jobs_only = true;
  control::breaker_config budget;
  budget.max_concurrent_per_pool = 1; // nodes without the rack label share pool ""
  start(budget);
  post({reset_needed("node-1", "GPU-a")});
  post({reset_needed("node-2", "GPU-b")});
  CAF_CHECK(cordoned("node-2"));
  CAF_REQUIRE_EQUAL(crs("gpuresets").size(), 1u); // node-2's waits for the budget
  auto phases = remediation_phases();
  CAF_CHECK(std::find(phases.begin(), phases.end(), "held reset-GPU-b") != phases.end());
  cr_phase("gpuresets", crs("gpuresets")[0]["metadata"]["name"].get<std::string>(),
           "Succeeded");
  advance(std::chrono::seconds{10}); // node-1's poll sees it done: the budget is free
  CAF_CHECK_EQUAL(crs("gpuresets").size(), 1u);
  advance(settings->retry_max); // node-2 asks again
  CAF_CHECK_EQUAL(crs("gpuresets").size(), 2u);
}

// A node actor that goes down holding a remediation slot (crash, lost
// leadership) gives the slot back: the breaker monitors whoever holds one.
CAF_TEST(a_slot_whose_holder_is_gone_returns_to_the_pool) {
  control::breaker_config budget;
  budget.max_concurrent_per_pool = 1;
  start(budget);
  auto holder = sys.spawn(
    [](event_based_actor* s, breaker_handle breaker) -> behavior {
      s->request(breaker, infinite, remedy_atom::value, std::string("node-1"),
                 std::string("rack-a"))
        .then([](const std::string& refusal) { CAF_CHECK_EQUAL(refusal, ""); });
      return {[](int) {}}; // stays up, holding its slot
    },
    breaker);
  run();
  CAF_CHECK_NOT_EQUAL(
    ask(breaker, remedy_atom::value, std::string("node-2"), std::string("rack-a")), "");
  anon_send_exit(holder, exit_reason::kill);
  run();
  CAF_CHECK_EQUAL(
    ask(breaker, remedy_atom::value, std::string("node-2"), std::string("rack-a")), "");
}

// Sharded, the journal's tail brings every replica's breaker rows back to
// every breaker, its own too: a reset it journaled itself is not applied a
// second time, which would forget the cordons counted since.
CAF_TEST(the_breakers_own_reset_from_the_tail_forgets_nothing) {
  auto fresh = sys.spawn(vigil::breaker, control::breaker_config{}, journal, time);
  anon_send(fresh, gpunodes_atom::value, std::uint64_t{100});
  run();
  CAF_CHECK_EQUAL(ask(fresh, reset_atom::value), "reset");
  self->send(fresh, admit_atom::value, std::string("node-1"));
  run();
  self->receive([](const std::string& refusal) { CAF_CHECK_EQUAL(refusal, ""); });
  auto rows = journal_db->read({});
  CAF_REQUIRE(rows.has_value());
  std::vector<journal_record> resets;
  for (const auto& row : *rows)
    if (row.kind == breaker_row::reset)
      resets.push_back(row);
  CAF_REQUIRE_EQUAL(resets.size(), 1u);
  anon_send(fresh, replay_atom::value, resets); // as the tail delivers it
  run();
  auto summary = json::parse(ask(fresh, summary_atom::value)); // a named copy
  CAF_CHECK_EQUAL(summary["cordonsInWindow"].get<int>(), 1);
  // Another replica's reset is applied.
  resets.front().idempotency_key = "breaker_reset/replica-b";
  anon_send(fresh, replay_atom::value, resets);
  run();
  summary = json::parse(ask(fresh, summary_atom::value));
  CAF_CHECK_EQUAL(summary["cordonsInWindow"].get<int>(), 0);
  anon_send_exit(fresh, exit_reason::user_shutdown);
  run();
}

// Sharded (issue 22), the pools' slots live in the journal's database: two
// replicas' breakers share one pool budget; a slot stays with its node when
// its holder goes (the shard's next owner carries on, and gives it back); a
// remediation found running takes a slot whatever the budget.
CAF_TEST(replicas_share_a_pool_budget_through_the_journal) {
  control::breaker_config config;
  config.max_concurrent_per_pool = 2;
  config.in_journal = true;
  auto a = sys.spawn(vigil::breaker, config, journal, time);
  auto b = sys.spawn(vigil::breaker, config, journal, time);
  run();
  auto remedy = [&](breaker_handle& breaker, const char* node) {
    return ask(breaker, remedy_atom::value, std::string(node), std::string("rack-a"));
  };
  CAF_CHECK_EQUAL(remedy(a, "node-1"), "");
  CAF_CHECK_EQUAL(remedy(b, "node-2"), "");
  auto refusal = remedy(a, "node-3");
  CAF_CHECK(refusal.find("2 remediations in flight across the replicas")
            != std::string::npos);
  CAF_CHECK_EQUAL(remedy(a, "node-2"), ""); // node-2 holds one: granted again
  anon_send(b, remedied_atom::value, std::string("node-2"));
  run();
  CAF_CHECK_EQUAL(remedy(a, "node-3"), "");
  // A CR found running after a handover counts too, over the budget.
  anon_send(b, occupy_atom::value, std::string("node-4"), std::string("rack-a"));
  run();
  anon_send(a, remedied_atom::value, std::string("node-1"));
  run();
  CAF_CHECK_NOT_EQUAL(remedy(b, "node-5"), ""); // node-3 and node-4 hold the two
  // The journal's database is down: no remediation starts on an unchecked
  // budget, and a release is tried again until it is stored.
  journal_db->failures = 1;
  refusal = remedy(b, "node-5");
  CAF_CHECK(refusal.find("could not be checked") != std::string::npos);
  journal_db->failures = 1;
  anon_send(a, remedied_atom::value, std::string("node-3"));
  run();
  CAF_CHECK_NOT_EQUAL(remedy(b, "node-5"), ""); // not given back yet
  advance(std::chrono::seconds{5});
  CAF_CHECK_EQUAL(remedy(b, "node-5"), "");
  // A failed release is not tried again once the node claimed anew: the
  // retry would free the new remediation's slot.
  journal_db->failures = 1;
  anon_send(b, remedied_atom::value, std::string("node-5"));
  run();
  CAF_CHECK_EQUAL(remedy(b, "node-5"), ""); // a new remediation, same slot
  advance(std::chrono::seconds{5});
  CAF_CHECK_NOT_EQUAL(remedy(a, "node-6"), ""); // node-4 and node-5 hold the two
  anon_send_exit(a, exit_reason::user_shutdown);
  anon_send_exit(b, exit_reason::user_shutdown);
  run();
}

// Sharded (issue 22), the cordon window is the fleet's, decided in the
// journal's database: with 10 % of 8 GPU nodes, the fleet's first cordon is
// granted and a second one on another replica trips the breaker (each
// replica counting its own window let one first cordon through per replica);
// the first replica finds the trip in the database before its tail brings
// the row; a reset on one replica frees the other once it reads the reset.
CAF_TEST(replicas_share_one_cordon_window_through_the_journal) {
  control::breaker_config config;
  config.max_cordoned_percent = 10;
  config.in_journal = true;
  auto a = sys.spawn(vigil::breaker, config, journal, time);
  auto b = sys.spawn(vigil::breaker, config, journal, time);
  for (auto* replica : {&a, &b}) // each owns half of the fleet's 8 GPU nodes
    anon_send(*replica, gpunodes_atom::value, std::uint64_t{4}, std::uint64_t{8});
  run();
  auto admit = [&](breaker_handle& breaker, const char* node) {
    return ask(breaker, admit_atom::value, std::string(node));
  };
  CAF_CHECK_EQUAL(admit(a, "node-1"), "");
  CAF_CHECK_EQUAL(admit(a, "node-1"), ""); // counted once
  auto refusal = admit(b, "node-5");
  CAF_CHECK(refusal.find("trips_now: 2 of 8 GPU nodes") == 0);
  CAF_CHECK_EQUAL(journal_rows(breaker_row::tripped), 1u);
  refusal = admit(a, "node-2"); // a has not read b's trip row
  CAF_CHECK(refusal.find("tripped: 2 of 8 GPU nodes") == 0);
  auto summary = json::parse(ask(a, summary_atom::value)); // a named copy
  CAF_CHECK(summary["tripped"].get<bool>());
  CAF_CHECK_EQUAL(summary["fleetCordonsInWindow"].get<int>(), 1);
  CAF_CHECK_EQUAL(journal_rows(breaker_row::tripped), 1u); // found, not tripped again
  // The database is down: the cordon is neither granted nor refused (the
  // node actor asks again later).
  CAF_CHECK_EQUAL(ask(a, reset_atom::value), "reset");
  advance(std::chrono::seconds{1});
  journal_db->failures = 1;
  self->send(a, admit_atom::value, std::string("node-2"));
  run();
  bool failed = false;
  self->receive([](const std::string&) {}, [&](const error&) { failed = true; });
  CAF_CHECK(failed);
  // After a's reset the fleet's window starts again: node-2 is its first.
  CAF_CHECK_EQUAL(admit(a, "node-2"), "");
  // b is still tripped until its tail brings a's reset.
  CAF_CHECK(admit(b, "node-6").find("tripped") == 0);
  auto rows = journal_db->read({});
  CAF_REQUIRE(rows.has_value());
  std::vector<journal_record> resets;
  for (const auto& row : *rows)
    if (row.kind == breaker_row::reset)
      resets.push_back(row);
  anon_send(b, replay_atom::value, resets);
  run();
  CAF_CHECK(admit(b, "node-6").find("trips_now") == 0); // node-2 counted: 2 of 8
  anon_send_exit(a, exit_reason::user_shutdown);
  anon_send_exit(b, exit_reason::user_shutdown);
  run();
}

// Sharded, an operator's reset closes the fleet's trip in the database at
// once: a replica that never tripped itself and has not read the reset row
// from its tail is granted its cordon (it found the old trip there before).
CAF_TEST(a_reset_frees_every_replica_in_the_database_at_once) {
  control::breaker_config config;
  config.max_cordoned_percent = 10;
  config.in_journal = true;
  auto a = sys.spawn(vigil::breaker, config, journal, time);
  auto b = sys.spawn(vigil::breaker, config, journal, time);
  auto c = sys.spawn(vigil::breaker, config, journal, time);
  for (auto* replica : {&a, &b, &c})
    anon_send(*replica, gpunodes_atom::value, std::uint64_t{3}, std::uint64_t{8});
  run();
  auto admit = [&](breaker_handle& breaker, const char* node) {
    return ask(breaker, admit_atom::value, std::string(node));
  };
  CAF_CHECK_EQUAL(admit(a, "node-1"), "");
  CAF_CHECK(admit(b, "node-4").find("trips_now") == 0);
  CAF_CHECK_EQUAL(ask(a, reset_atom::value), "reset");
  CAF_CHECK_EQUAL(admit(c, "node-7"), "");            // the fleet window's first again
  CAF_CHECK(admit(b, "node-5").find("tripped") == 0); // its own trip, until its tail
  for (auto* replica : {&a, &b, &c})
    anon_send_exit(*replica, exit_reason::user_shutdown);
  run();
}

// Sharded, /metrics' utilisation is the fleet's: each replica's window
// counts every replica's cordons (its own as decided, the others' from the
// journal's tail) against the fleet's limits, not its own share.
CAF_TEST(a_sharded_breakers_utilisation_is_the_fleets) {
  control::breaker_config config;
  config.max_cordoned_percent = 50; // of the fleet's 8 GPU nodes: 4
  config.in_journal = true;
  auto a = sys.spawn(vigil::breaker, config, journal, time);
  auto b = sys.spawn(vigil::breaker, config, journal, time);
  for (auto* replica : {&a, &b})
    anon_send(*replica, gpunodes_atom::value, std::uint64_t{4}, std::uint64_t{8});
  run();
  auto utilisation = [&](breaker_handle& breaker) {
    auto summary = json::parse(ask(breaker, summary_atom::value));
    return summary["utilisation"].get<double>();
  };
  for (const char* node : {"node-1", "node-2"})
    CAF_CHECK_EQUAL(ask(a, admit_atom::value, std::string(node)), "");
  CAF_CHECK_EQUAL(utilisation(a), 0.5); // 2 of 4, not 2 of its share's 2
  CAF_CHECK_EQUAL(utilisation(b), 0.0);
  // The node actors journal the quarantines; b's tail brings them.
  std::vector<journal_record> cordons;
  for (const char* node : {"node-1", "node-2"}) {
    journal_record row;
    row.node = node;
    row.kind = quarantine_row;
    row.body = R"({"cordon":true})";
    row.recorded_at = time->wall_now();
    cordons.push_back(row);
  }
  anon_send(b, replay_atom::value, cordons);
  run();
  CAF_CHECK_EQUAL(utilisation(b), 0.5);
  anon_send(a, replay_atom::value, cordons); // a's own, counted once
  run();
  CAF_CHECK_EQUAL(utilisation(a), 0.5);
  anon_send_exit(a, exit_reason::user_shutdown);
  anon_send_exit(b, exit_reason::user_shutdown);
  run();
}

CAF_TEST_FIXTURE_SCOPE_END()
