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

CAF_TEST_FIXTURE_SCOPE_END()
