// The fleet's rebuild snapshot (issue 22): which rows it keeps, and that a
// restart from a snapshot and the rows after it reaches the same state as a
// restart from the whole journal, over random histories, through the
// production fleet and node actors.
#define CAF_SUITE control_fleet_snapshot
#include <caf/test/dsl.hpp>

#include <algorithm>
#include <random>
#include <set>

#include "actors/control/fleet/fleet_snapshot.hpp"
#include "tests/actors/control/control_fixture.hpp"

using namespace caf;
using namespace vigil;
using namespace vigil::test;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

wall_time at(std::int64_t minutes) {
  return from_unix(1'800'000'000 + minutes * 60, 0);
}

// One journal row of an event, journaled (and generated) `minutes` in.
journal_record event_row(std::int64_t seq, health_event e, std::int64_t minutes) {
  e.generated = at(minutes);
  journal_record row;
  row.seq = seq;
  row.recorded_at = at(minutes);
  row.node = e.node_name;
  row.kind = "event";
  row.idempotency_key = "k" + std::to_string(seq);
  row.body = encode_health_event(e);
  return row;
}

journal_record row_of(std::int64_t seq, const std::string& node, const std::string& kind,
                      json body, std::int64_t minutes) {
  return {seq, at(minutes), node, kind, "k" + std::to_string(seq), body.dump()};
}

snapshot_builder builder() {
  return snapshot_builder(control::correlation_config{}, std::chrono::minutes(5),
                          {"PCI"});
}

} // namespace

CAF_TEST(a_node_at_rest_keeps_nothing_and_a_quarantined_one_its_episode) {
  auto b = builder();
  // node-1: a fault and its recovery, long ago.
  b.add(event_row(1, xid("node-1", "GPU-a"), 0));
  b.add(event_row(2, xid("node-1", "GPU-a", true), 10));
  // node-2: a recovered fault, then a fault still active.
  b.add(event_row(3, xid("node-2", "GPU-a"), 0));
  b.add(event_row(4, xid("node-2", "GPU-a", true), 10));
  b.add(event_row(5, xid("node-2", "GPU-b"), 3 * 24 * 60));
  // Three days on: node-1 is at rest; node-2's first episode is over (its
  // fatal XID out of every window) and its second still holds it.
  auto kept = b.keep(at(3 * 24 * 60 + 60));
  CAF_CHECK_EQUAL(kept, (std::vector<std::int64_t>{5}));
}

CAF_TEST(a_fatal_xid_within_the_repeat_window_is_kept_though_recovered) {
  auto b = builder();
  b.add(event_row(1, xid("node-1", "GPU-a"), 0));
  b.add(event_row(2, xid("node-1", "GPU-a", true), 10));
  // Twelve hours on: its burst still counts towards the repeated-XID rule.
  CAF_CHECK_EQUAL(b.keep(at(12 * 60)), (std::vector<std::int64_t>{1, 2}));
  // Two days on it no longer does.
  CAF_CHECK(b.keep(at(48 * 60)).empty());
  CAF_CHECK_EQUAL(b.nodes(), 0u);
}

CAF_TEST(a_record_no_policy_tracks_still_holds_the_episode) {
  auto b = builder();
  // An unhealthy event no rule of this configuration acts on: another
  // configuration's could, so it is kept until it is cleared.
  auto warning = xid("node-1", "GPU-a");
  warning.is_fatal = false;
  warning.error_codes = {"13"};
  b.add(event_row(1, warning, 0));
  CAF_CHECK_EQUAL(b.keep(at(7 * 24 * 60)), (std::vector<std::int64_t>{1}));
}

CAF_TEST(an_open_remediation_is_kept_whatever_its_age_and_a_closed_one_for_its_window) {
  auto b = builder();
  b.add(row_of(1, "node-1", control::remediation_row,
               {{"phase", "created"}, {"action", "RESTART_VM"}, {"cr", "reboot-1"}}, 0));
  b.add(row_of(2, "node-2", control::remediation_row,
               {{"phase", "created"}, {"action", "RESTART_VM"}, {"cr", "reboot-2"}}, 0));
  b.add(row_of(3, "node-2", control::remediation_row,
               {{"phase", "succeeded"}, {"cr", "reboot-2"}}, 30));
  // A day on both count towards the repeat rule.
  CAF_CHECK_EQUAL(b.keep(at(24 * 60)), (std::vector<std::int64_t>{1, 2, 3}));
  // Past the 7-day window only the CR still running does.
  CAF_CHECK_EQUAL(b.keep(at(8 * 24 * 60)), (std::vector<std::int64_t>{1}));
}

// seed 003 "validate before return": a CR that succeeded is open again
// while its validation Job runs (a successor follows the Job), until the
// verdict; a verdict row from before it named the CR closes the attempt
// being validated. The rebuild and the snapshot read them alike.
CAF_TEST(a_validation_without_a_verdict_keeps_its_attempt_open) {
  std::vector<journal_record> rows = {
    row_of(1, "node-1", control::remediation_row,
           {{"phase", "created"}, {"action", "COMPONENT_RESET"}, {"cr", "reset-1"}}, 0),
    row_of(2, "node-1", control::remediation_row,
           {{"phase", "succeeded"}, {"cr", "reset-1"}}, 5),
    row_of(
      3, "node-1", control::remediation_row,
      {{"phase", "validating"}, {"cr", "reset-1"}, {"job", "vigil-validate-reset-1"}}, 5),
  };
  rebuild_batch batch;
  fold_rows(batch, rows);
  CAF_REQUIRE_EQUAL(batch.attempts["node-1"].size(), 1u);
  CAF_CHECK(batch.attempts["node-1"][0].open);
  CAF_CHECK(batch.attempts["node-1"][0].validating);
  CAF_CHECK_EQUAL(batch.attempts["node-1"][0].cr, "reset-1");
  auto b = builder();
  for (const auto& row : rows)
    b.add(row);
  // Kept past the remediation window: the validation may still run.
  CAF_CHECK_EQUAL(b.keep(at(8 * 24 * 60)), (std::vector<std::int64_t>{1, 2, 3}));
  for (json verdict : {json{{"phase", "validated"}, {"cr", "reset-1"}},
                       json{{"phase", "validation_failed"}}}) { // an older row: no cr
    rebuild_batch closed;
    auto all = rows;
    all.push_back(row_of(4, "node-1", control::remediation_row, verdict, 10));
    fold_rows(closed, all);
    CAF_CHECK(!closed.attempts["node-1"][0].open);
    CAF_CHECK(!closed.attempts["node-1"][0].validating);
    auto kept = builder();
    for (const auto& row : all)
      kept.add(row);
    CAF_CHECK_EQUAL(kept.keep(at(8 * 24 * 60)), (std::vector<std::int64_t>{}));
  }
}

CAF_TEST(the_breaker_keeps_its_latest_state_and_the_cordons_in_its_window) {
  auto b = builder();
  b.add(row_of(1, "", "breaker_tripped", {{"reason", "too many"}}, 0));
  b.add(row_of(2, "", "breaker_reset", json::object(), 5));
  b.add(row_of(3, "node-1", "quarantine", {{"cordon", true}}, 10));
  b.add(row_of(4, "node-2", "quarantine", {{"cordon", true}}, 20));
  b.add(row_of(5, "node-2", "quarantine", {{"cordon", false}}, 21));
  CAF_CHECK_EQUAL(b.keep(at(22)), (std::vector<std::int64_t>{2, 4}));
  CAF_CHECK_EQUAL(b.keep(at(30)), (std::vector<std::int64_t>{2}));
}

CAF_TEST(horizons_round_trip_and_longer_windows_are_not_covered) {
  auto h = horizons_of(control::correlation_config{}, std::chrono::minutes(5));
  auto back = snapshot_horizons::from_json(h.to_json());
  CAF_REQUIRE(back.has_value());
  CAF_CHECK(back->covers(h));
  auto longer = h;
  longer.gpu += std::chrono::hours(1);
  CAF_CHECK(!back->covers(longer));
  auto lower_flap = h;
  lower_flap.flap_threshold -= 1;
  CAF_CHECK(!back->covers(lower_flap));
  CAF_CHECK(!snapshot_horizons::from_json("[]").has_value());
}

namespace {

// What a restart must rebuild the same: each node actor's decisions and the
// Node as the cluster sees it.
json rebuilt_state(control_fixture& f) {
  json out;
  for (int i = 1; i <= 4; ++i) {
    const auto name = "node-" + std::to_string(i);
    auto summary = f.node_summary(name);
    json actor;
    for (const char* key : {"active", "draining", "fabricPortsDown", "remediation",
                            "drainedKey", "cordons", "uncordons", "patches", "held"})
      actor[key] = summary.value(key, json());
    auto node = f.node(name);
    out[name] = {
      {"actor", std::move(actor)},
      {"spec", node["spec"]},
      {"conditions",
       node.value("status", json::object()).value("conditions", json::array())}};
  }
  return out;
}

// A random stretch of history: faults and recoveries of two GPUs and a NIC
// port on four nodes, far apart and close together, through ingest.
void random_history(control_fixture& f, std::mt19937& rng, int steps, int& n) {
  static const caf::timespan gaps[] = {30s, 2min, 10min, 1h, 6h, 30h};
  for (int i = 0; i < steps; ++i, ++n) {
    f.advance(gaps[rng() % 6]);
    const auto node = "node-" + std::to_string(1 + rng() % 4);
    health_event e;
    switch (rng() % 7) {
      case 0: e = xid(node, "GPU-a"); break;
      case 1: e = xid(node, "GPU-a", true); break;
      case 2: e = xid(node, "GPU-b"); break;
      case 3: e = xid(node, "GPU-b", true); break;
      case 4: e = port_state(node, false, n); break;
      case 5: e = port_state(node, true, n); break;
      default: // an application XID no rule of this policy acts on
        e = xid(node, "GPU-b");
        e.is_fatal = false;
        e.error_codes = {"13"};
        break;
    }
    e.id += "-" + std::to_string(n);
    e.generated = f.time->wall_now();
    f.post({e});
  }
}

} // namespace

CAF_TEST_FIXTURE_SCOPE(control_fleet_snapshot_tests, control_fixture)

CAF_TEST(a_restart_from_a_snapshot_rebuilds_what_the_whole_journal_does) {
  std::size_t pruned_somewhere = 0;
  int n = 0;
  start();
  // Each seed's history goes on from the last one's.
  for (unsigned seed = 1; seed <= 8; ++seed) {
    CAF_MESSAGE("seed " << seed);
    std::mt19937 rng(seed);
    settings->breaker_window = std::chrono::minutes(5); // read at rebuilds only
    random_history(*this, rng, 40, n);
    snapshot_taker taker(snapshot_builder(settings->correlation, settings->breaker_window,
                                          settings->quarantine.alias_entity_types));
    auto snapshot = taker.take(*journal_db, time->wall_now());
    if (!snapshot)
      CAF_FAIL("no snapshot: " << snapshot.error().to_string());
    auto all = journal_db->read({});
    CAF_REQUIRE(all.has_value());
    pruned_somewhere += snapshot->rows.size() < all->size();
    // More history after the snapshot: the tail part of the rebuild.
    random_history(*this, rng, 10, n);
    // The live actors' state is what both restarts must rebuild.
    const auto live = rebuilt_state(*this);
    auto restart_from = [&](bool snapshot) {
      // Windows longer than the snapshot's: it is not used, the journal is.
      settings->breaker_window =
        snapshot ? std::chrono::minutes(5) : std::chrono::hours(10);
      restart();
      auto used = json::parse(ask(fleet, summary_atom::value))["snapshotId"];
      CAF_CHECK_EQUAL(used != 0, snapshot);
      return rebuilt_state(*this);
    };
    auto from_snapshot = restart_from(true);
    auto from_journal = restart_from(false);
    CAF_CHECK_EQUAL(from_snapshot.dump(1), from_journal.dump(1));
    // The same decisions and Nodes as live (the counters count what this
    // actor did, and a restarted one did less).
    auto decisions = [](json state) {
      for (auto& node : state)
        for (const char* counter : {"cordons", "uncordons", "patches", "held"})
          node["actor"].erase(counter);
      return state.dump(1);
    };
    CAF_CHECK_EQUAL(decisions(from_journal), decisions(live));
  }
  CAF_CHECK_GREATER(pruned_somewhere, 4u);
}

// Journal retention: with every row older than now deleted unless the
// snapshot names it, a restart from the snapshot rebuilds what the whole
// journal rebuilt before the deletion. The snapshot stored before it (the
// store keeps two; a rebuild begun earlier may be reading it) stays whole.
CAF_TEST(a_journal_pruned_to_its_snapshot_rebuilds_the_same_state) {
  int n = 0;
  start();
  std::mt19937 rng(7);
  random_history(*this, rng, 40, n);
  snapshot_taker taker(snapshot_builder(settings->correlation, settings->breaker_window,
                                        settings->quarantine.alias_entity_types));
  auto first = taker.take(*journal_db, time->wall_now());
  if (!first)
    CAF_FAIL("no snapshot: " << first.error().to_string());
  random_history(*this, rng, 30, n);
  auto snapshot = taker.take(*journal_db, time->wall_now());
  if (!snapshot)
    CAF_FAIL("no snapshot: " << snapshot.error().to_string());
  CAF_REQUIRE(taker.previous() != nullptr);
  CAF_CHECK_EQUAL(taker.previous()->position.seq, first->position.seq);
  random_history(*this, rng, 5, n); // rows after its position stay
  auto snapshot_used = [&] {        // a named copy: the check keeps references
    const auto id = json::parse(ask(fleet, summary_atom::value))["snapshotId"];
    return id.get<std::int64_t>() != 0;
  };
  // The reference: a restart from the whole journal before the deletion
  // (windows longer than the snapshot's).
  settings->breaker_window = std::chrono::hours(10);
  restart();
  CAF_CHECK(!snapshot_used());
  const auto reference = rebuilt_state(*this);
  auto before = journal_db->read({});
  CAF_REQUIRE(before.has_value());
  std::int64_t from = 0;
  auto deleted = prune_journal(*journal_db, *snapshot, taker.previous(), time->wall_now(),
                               1'000'000, from);
  CAF_REQUIRE(deleted.has_value());
  auto after = journal_db->read({});
  CAF_REQUIRE(after.has_value());
  CAF_CHECK_GREATER(*deleted, 0u);
  CAF_CHECK_EQUAL(after->size() + *deleted, before->size());
  // What is left: the two snapshots' rows, and the rows after the first's
  // position; every row the first names is still there.
  auto kept = snapshot->rows;
  kept.insert(kept.end(), first->rows.begin(), first->rows.end());
  std::sort(kept.begin(), kept.end());
  std::set<std::int64_t> left;
  for (const auto& row : *after) {
    left.insert(row.seq);
    CAF_CHECK(std::binary_search(kept.begin(), kept.end(), row.seq)
              || first->position < journal_position{0, row.seq});
  }
  for (auto seq : first->rows)
    CAF_CHECK(left.count(seq) == 1);
  settings->breaker_window = std::chrono::minutes(5);
  restart();
  CAF_CHECK(snapshot_used());
  CAF_CHECK_EQUAL(rebuilt_state(*this).dump(1), reference.dump(1));
}

// A snapshot naming a row the journal no longer has would rebuild a history
// with a hole: the whole journal is read instead.
CAF_TEST(a_snapshot_naming_a_missing_row_is_not_used) {
  start();
  post({xid("node-1", "GPU-a")});
  CAF_REQUIRE(cordoned("node-1"));
  fleet_snapshot broken;
  broken.taken_at = time->wall_now();
  broken.position = {0, 1'000'000};
  broken.horizons =
    horizons_of(settings->correlation, settings->breaker_window).to_json();
  broken.rows = {1'000'000};
  CAF_REQUIRE(journal_db->put_fleet_snapshot(broken).has_value());
  restart();
  const auto used = json::parse(ask(fleet, summary_atom::value))["snapshotId"];
  CAF_CHECK_EQUAL(used, 0);
  CAF_CHECK_EQUAL(node_summary("node-1")["active"].size(), 1u);
  CAF_CHECK(cordoned("node-1"));
}

CAF_TEST_FIXTURE_SCOPE_END()
