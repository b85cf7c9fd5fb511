// The ingest actor: an event is acknowledged once journaled, duplicates and
// invalid items are answered without being acted on, and a journal outage
// is answered 503 with Retry-After.
#define CAF_SUITE control_ingest
#include <caf/test/dsl.hpp>

#include "tests/actors/control/control_fixture.hpp"

using namespace caf;
using namespace vigil;
using namespace vigil::test;
using nlohmann::json;

CAF_TEST_FIXTURE_SCOPE(control_ingest_tests, control_fixture)

CAF_TEST(a_duplicate_event_is_acknowledged_and_not_processed_again) {
  start();
  post({xid("node-1", "GPU-a")});
  post({xid("node-1", "GPU-a", true)});
  CAF_CHECK(!cordoned("node-1"));
  // The unhealthy copy arrives again (an agent resending): stored once, ignored.
  post({xid("node-1", "GPU-a")});
  CAF_REQUIRE_EQUAL(replies.size(), 3u);
  CAF_CHECK_EQUAL(replies[2].http_status, 200);
  CAF_CHECK(replies[2].body.find("\"duplicate\"") != std::string::npos);
  CAF_CHECK(!cordoned("node-1"));
  CAF_CHECK_EQUAL(journal_rows("event"), 2u);
}

// An event without generatedTimestamp is journaled with the time it came,
// so a replay judges it then, as the live node actor did.
CAF_TEST(an_event_without_its_senders_time_is_journaled_with_its_arrival) {
  start();
  advance(std::chrono::minutes{3});
  const auto arrived = time->wall_now();
  auto event = xid("node-1", "GPU-a");
  CAF_REQUIRE(!event.generated);
  post({event});
  auto rows = journal_db->read({});
  CAF_REQUIRE(rows.has_value());
  std::size_t stamped = 0;
  for (const auto& row : *rows)
    if (row.kind == "event") {
      auto stored = decode_health_event(row.body);
      CAF_REQUIRE(stored.has_value());
      stamped += stored->generated == arrived ? 1 : 0;
    }
  CAF_CHECK_EQUAL(stamped, 1u);
}

CAF_TEST(invalid_items_are_rejected_and_valid_ones_of_the_same_request_accepted) {
  start();
  ingest_request request;
  request.items.push_back({1, xid("node-3", "GPU-a"), {}});
  request.items.push_back({2, std::nullopt, "line 2: nodeName: missing or empty"});
  request.reply = [this](control::ingest_reply r) { replies.push_back(std::move(r)); };
  self->send(ingest, ingest_atom::value, std::move(request));
  sched.run();
  CAF_REQUIRE_EQUAL(replies.size(), 1u);
  CAF_CHECK_EQUAL(replies[0].http_status, 200);
  CAF_CHECK(replies[0].body.find("nodeName") != std::string::npos);
  CAF_CHECK(cordoned("node-3"));
}

// Journal first (ARCHITECTURE.md §2): while the database refuses appends no
// event is acknowledged; the request is answered 503 with Retry-After at the
// ingest deadline, nothing is acted on, and the agent's resend is accepted
// once the journal is back.
CAF_TEST(ingest_answers_503_with_retry_after_while_the_journal_is_down) {
  start();
  journal_db->failures = 1000;
  post({xid("node-1", "GPU-a")});
  CAF_CHECK(replies.empty()); // nothing claimed stored
  advance(std::chrono::seconds{5});
  CAF_REQUIRE_EQUAL(replies.size(), 1u);
  CAF_CHECK_EQUAL(replies[0].http_status, 503);
  CAF_CHECK(replies[0].retry_after_seconds.has_value());
  CAF_CHECK(!cordoned("node-1"));
  CAF_CHECK_EQUAL(journal_rows("event"), 0u);
  journal_db->failures = 0;
  advance(std::chrono::seconds{30}); // the journal's reconnect backoff
  post({xid("node-1", "GPU-a")});    // the agent resends
  CAF_CHECK_EQUAL(replies.back().http_status, 200);
  CAF_CHECK_EQUAL(journal_rows("event"), 1u);
  CAF_CHECK(cordoned("node-1"));
}

// An agent resends the events of a request answered 503 while their appends
// are still queued (the database is slow, not down): the journal's queue
// gets no second copy; the resend waits on the first append and both learn
// its outcome. Without this, every resend during an outage added a copy of
// every event to the queue until it was full.
CAF_TEST(a_resent_event_waits_on_its_append_in_flight_instead_of_queueing_a_copy) {
  start();
  journal_db->failures = 1000;
  post({xid("node-1", "GPU-a")});
  advance(std::chrono::seconds{5});
  CAF_REQUIRE_EQUAL(replies.size(), 1u);
  CAF_CHECK_EQUAL(replies[0].http_status, 503);
  post({xid("node-1", "GPU-a")}); // resent while the first append still waits
  CAF_CHECK_EQUAL(ingest_figures().value("coalesced", -1), 1);
  CAF_CHECK_EQUAL(ingest_figures().value("appendsInFlight", -1), 1);
  CAF_CHECK_EQUAL(journal_figures().queue_depth + journal_figures().in_flight, 1u);
  journal_db->failures = 0;
  advance(std::chrono::seconds{30}); // the journal's reconnect backoff
  CAF_CHECK_EQUAL(journal_rows("event"), 1u);
  CAF_CHECK_EQUAL(ingest_figures().value("appendsInFlight", -1), 0);
  CAF_CHECK(cordoned("node-1"));  // acted on once, from the stored copy
  post({xid("node-1", "GPU-a")}); // and a later resend is a duplicate
  CAF_CHECK_EQUAL(replies.back().http_status, 200);
  CAF_CHECK(replies.back().body.find("\"duplicate\"") != std::string::npos);
}

// An event stored after its request was answered 503 comes back with the
// agent's resend of the whole request: ingest answers it "duplicate" itself,
// from the journal's own word, and the journal does no second append; an
// event acknowledged in time that is sent again still goes to the journal.
CAF_TEST(a_resend_of_an_event_stored_after_its_503_is_answered_without_the_journal) {
  start();
  post({xid("node-2", "GPU-b")}); // acknowledged in time
  CAF_CHECK_EQUAL(replies.back().http_status, 200);
  journal_db->failures = 1000;
  post({xid("node-1", "GPU-a")});
  advance(std::chrono::seconds{5});
  CAF_CHECK_EQUAL(replies.back().http_status, 503);
  journal_db->failures = 0;
  advance(std::chrono::seconds{30}); // the journal is back: stored after the 503
  CAF_CHECK_EQUAL(journal_rows("event"), 2u);
  const auto appended = journal_figures().committed;
  post({xid("node-1", "GPU-a")}); // the resend
  CAF_CHECK_EQUAL(replies.back().http_status, 200);
  CAF_CHECK(replies.back().body.find("\"duplicate\"") != std::string::npos);
  CAF_CHECK_EQUAL(journal_figures().committed, appended); // no second append
  auto figures = ingest_figures();
  CAF_CHECK_EQUAL(figures.value("resentStored", -1), 1);
  CAF_CHECK_EQUAL(figures.value("duplicates", -1), 1);
  post({xid("node-2", "GPU-b")}); // not answered 503: the journal says
  CAF_CHECK(replies.back().body.find("\"duplicate\"") != std::string::npos);
  CAF_CHECK_EQUAL(journal_figures().committed, appended + 1);
  figures = ingest_figures();
  CAF_CHECK_EQUAL(figures.value("resentStored", -1), 1);
  CAF_CHECK_EQUAL(figures.value("duplicates", -1), 2);
  CAF_CHECK_EQUAL(journal_rows("event"), 2u);
}

// Admission: with ingest.max_pending_events appends in flight, a request
// with new events is answered 503 + Retry-After at once and appends nothing,
// so a slow database cannot grow the queue; a resend of events in flight
// still waits on them, and requests are admitted again as appends commit.
CAF_TEST(a_request_past_the_pending_limit_is_shed_at_once_with_nothing_appended) {
  ingest_options.admission.max_in_flight = 2;
  ingest_options.admission.max_oldest_age = std::chrono::hours{1};
  auto gate = std::make_shared<ingest_gate>();
  ingest_options.gate = gate;
  start();
  journal_db->failures = 1000;
  CAF_CHECK(!gate->shedding);
  post({xid("node-1", "GPU-a"), xid("node-2", "GPU-b")});
  CAF_CHECK(replies.empty()); // waiting on the journal
  CAF_CHECK(gate->shedding);  // the HTTP handler now refuses before parsing
  post({xid("node-3", "GPU-c")});
  CAF_REQUIRE_EQUAL(replies.size(), 1u); // at once, before any deadline
  CAF_CHECK_EQUAL(replies[0].http_status, 503);
  CAF_CHECK(replies[0].retry_after_seconds.has_value());
  CAF_CHECK(replies[0].body.find("journal is behind") != std::string::npos);
  CAF_CHECK_EQUAL(ingest_figures().value("shed", -1), 1);
  CAF_CHECK_EQUAL(ingest_figures().value("appendsInFlight", -1), 2);
  post({xid("node-1", "GPU-a")}); // a resend of an event in flight is admitted
  CAF_CHECK_EQUAL(ingest_figures().value("shed", -1), 1);
  journal_db->failures = 0;
  advance(std::chrono::seconds{30});
  CAF_CHECK_EQUAL(journal_rows("event"), 2u);
  CAF_CHECK(!gate->shedding);
  post({xid("node-3", "GPU-c")}); // room again
  CAF_CHECK_EQUAL(replies.back().http_status, 200);
  CAF_CHECK_EQUAL(journal_rows("event"), 3u);
}

// Admission by age: once the oldest append in flight has waited half the
// deadline, appends started now would not commit in time, so a request with
// new events is shed at once rather than answered 503 after the work.
CAF_TEST(a_request_is_shed_while_the_oldest_append_has_waited_half_the_deadline) {
  ingest_options.admission.max_oldest_age = std::chrono::milliseconds{2500};
  start();
  journal_db->failures = 1000;
  post({xid("node-1", "GPU-a")});
  advance(std::chrono::seconds{2});
  post({xid("node-2", "GPU-b")}); // the oldest has waited 2 s: admitted
  CAF_CHECK_EQUAL(ingest_figures().value("shed", -1), 0);
  advance(std::chrono::seconds{1});
  post({xid("node-3", "GPU-c")}); // 3 s: shed
  CAF_CHECK_EQUAL(ingest_figures().value("shed", -1), 1);
  CAF_CHECK_EQUAL(ingest_figures().value("appendsInFlight", -1), 2);
  journal_db->failures = 0;
  advance(std::chrono::seconds{30});
  post({xid("node-3", "GPU-c")});
  CAF_CHECK_EQUAL(replies.back().http_status, 200);
  CAF_CHECK_EQUAL(journal_rows("event"), 3u);
}

// The gate judges the age as well: the first request that finds the oldest
// append past the limit is shed by ingest, and the HTTP handler refuses the
// next ones before reading them, until the journal catches up.
CAF_TEST(past_the_age_limit_the_gate_refuses_before_parsing) {
  ingest_options.admission.max_oldest_age = std::chrono::milliseconds{2500};
  auto gate = std::make_shared<ingest_gate>();
  ingest_options.gate = gate;
  start();
  journal_db->failures = 1000;
  post({xid("node-1", "GPU-a")});
  CAF_CHECK(!gate->shedding); // one append, just started
  advance(std::chrono::seconds{3});
  post({xid("node-2", "GPU-b")});
  CAF_CHECK_EQUAL(ingest_figures().value("shed", -1), 1);
  CAF_CHECK(gate->shedding);
  journal_db->failures = 0;
  advance(std::chrono::seconds{30});
  CAF_CHECK(!gate->shedding);
  post({xid("node-2", "GPU-b")});
  CAF_CHECK_EQUAL(replies.back().http_status, 200);
  CAF_CHECK_EQUAL(journal_rows("event"), 2u);
}

CAF_TEST_FIXTURE_SCOPE_END()
