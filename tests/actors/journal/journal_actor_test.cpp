// The journal actor under CAF's test coordinator, writing to a real SQLite
// store through a wrapper that can fail on demand (a database outage).
#define CAF_SUITE journal
#include <caf/test/dsl.hpp>

#include "actors/journal/journal_actor.hpp"
#include "tests/support/flaky_journal_store.hpp"
#include "tests/support/test_databases.hpp"

using namespace caf;
using namespace vigil;

namespace {

using flaky_store = vigil::test::flaky_journal_store;

journal_record record(const std::string& key) {
  return {0, from_unix(1000, 0), "node-1", "event", key, R"({"k":")" + key + "\"}"};
}

struct fixture : test_coordinator_fixture<> {
  std::shared_ptr<flaky_store> store = std::make_shared<flaky_store>(
    make_sqlite_journal_store(vigil::test::fresh_directory() + "/journal.db"));
  journal_config config = [] {
    journal_config c;
    c.batch_max_events = 3;
    c.batch_max_delay_ms = 5;
    c.queue_capacity = 4;
    c.reconnect_initial_ms = 100;
    c.reconnect_max_ms = 250;
    return c;
  }();
  journal_writer_handle writer =
    sys.spawn(journal_writer, std::shared_ptr<journal_store>(store));
  journal_timers jrnl = sys.spawn(vigil::journal, config, writer);

  fixture() {
    CAF_REQUIRE(store->open().has_value());
    sched.run();
  }

  journal_state& state() { return deref<journal_actor>(jrnl).state; }
  size_t stored() { return store->read({})->size(); }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(journal_tests, fixture)

CAF_TEST(a_full_batch_is_written_at_once_and_each_caller_answered_after_commit) {
  self->send(jrnl, append_atom::value, record("a"));
  self->send(jrnl, append_atom::value, record("b"));
  sched.run();
  CAF_CHECK_EQUAL(stored(), 0u); // below the batch size: waiting, no one answered
  self->send(jrnl, append_atom::value, record("c"));
  expect((append_atom, journal_record), from(self).to(jrnl));
  expect((write_atom, std::vector<journal_record>), from(jrnl).to(writer));
  CAF_CHECK_EQUAL(stored(), 3u);
  expect((std::vector<append_outcome>), from(writer).to(jrnl));
  for (std::int64_t seq = 1; seq <= 3; ++seq)
    expect((append_outcome), from(jrnl).to(self).with(append_outcome{seq, false}));
}

CAF_TEST(a_partial_batch_waits_for_the_delay) {
  self->send(jrnl, append_atom::value, record("a"));
  sched.run();
  CAF_CHECK_EQUAL(stored(), 0u);
  advance_time(std::chrono::milliseconds{4});
  CAF_CHECK_EQUAL(stored(), 0u);
  advance_time(std::chrono::milliseconds{1});
  sched.run();
  CAF_CHECK_EQUAL(stored(), 1u);
  CAF_CHECK_EQUAL(state().stats.committed, 1u);
}

CAF_TEST(a_full_queue_refuses_with_overloaded) {
  store->failures = 1000; // the database is down: nothing drains
  for (auto key : {"a", "b", "c", "d"})
    self->send(jrnl, append_atom::value, record(key));
  sched.run();
  self->send(jrnl, append_atom::value, record("e"));
  expect((append_atom, journal_record), from(self).to(jrnl));
  auto refused = false;
  self->receive(
    [&](error& err) { refused = is_journal_error(err, journal_errc::overloaded); },
    [&](append_outcome&) {});
  CAF_CHECK(refused);
  CAF_CHECK_EQUAL(state().stats.refused, 1u);
  CAF_CHECK_EQUAL(stored(), 0u);
}

CAF_TEST(an_outage_is_retried_with_backoff_and_nothing_acknowledged_is_lost) {
  store->failures = 2;
  for (auto key : {"a", "b", "c"})
    self->send(jrnl, append_atom::value, record(key));
  sched.run();
  CAF_CHECK(!state().stats.available);
  CAF_CHECK_EQUAL(state().stats.write_failures, 1u);
  CAF_CHECK_EQUAL(state().in_flight.size(), 3u);
  advance_time(std::chrono::milliseconds{100}); // first backoff
  sched.run();
  CAF_CHECK_EQUAL(state().stats.write_failures, 2u);
  CAF_CHECK_EQUAL(stored(), 0u);
  advance_time(std::chrono::milliseconds{199});
  sched.run();
  CAF_CHECK_EQUAL(stored(), 0u); // the second backoff doubled to 200 ms
  CAF_CHECK_EQUAL(state().stats.memory_releases, 0u);
  advance_time(std::chrono::milliseconds{1});
  sched.run();
  CAF_CHECK_EQUAL(stored(), 3u);
  CAF_CHECK(state().stats.available);
  CAF_CHECK_EQUAL(state().stats.committed, 3u);
  // The backlog (this fixture's queue holds 4, so 1 waiting is one) is over:
  // its memory was handed back, once.
  CAF_CHECK_EQUAL(state().stats.memory_releases, 1u);
  size_t acked = 0;
  for (int i = 0; i < 3; ++i)
    self->receive([&](append_outcome&) { ++acked; }, [&](error&) {});
  CAF_CHECK_EQUAL(acked, 3u);
}

CAF_TEST(a_resent_fact_is_acknowledged_as_duplicate) {
  CAF_REQUIRE(store->append({record("a")}).has_value());
  for (auto key : {"a", "b", "c"})
    self->send(jrnl, append_atom::value, record(key));
  sched.run();
  std::vector<append_outcome> outcomes;
  for (int i = 0; i < 3; ++i)
    self->receive([&](append_outcome& o) { outcomes.push_back(o); }, [&](error&) {});
  CAF_REQUIRE_EQUAL(outcomes.size(), 3u);
  CAF_CHECK(outcomes[0].duplicate);
  CAF_CHECK_EQUAL(outcomes[0].seq, 1);
  CAF_CHECK(!outcomes[1].duplicate);
  CAF_CHECK_EQUAL(state().stats.duplicates, 1u);
}

CAF_TEST(stats_report_depth_and_lag_on_the_actor_clock) {
  store->failures = 1000;
  self->send(jrnl, append_atom::value, record("a"));
  sched.run();
  advance_time(std::chrono::milliseconds{5}); // flush → write fails → backoff
  sched.run();
  advance_time(std::chrono::milliseconds{50});
  self->send(jrnl, stats_atom::value);
  sched.run();
  self->receive([&](journal_stats& s) {
    CAF_CHECK_EQUAL(s.in_flight, 1u);
    CAF_CHECK_EQUAL(s.lag_ns,
                    std::chrono::nanoseconds{std::chrono::milliseconds{55}}.count());
    CAF_CHECK(!s.available);
  });
}

CAF_TEST_FIXTURE_SCOPE_END()

// The rule alone: a backlog begins at the high mark, ends at the low one,
// once; a queue that never reached the high mark is no backlog.
CAF_TEST(a_backlog_ends_once_below_its_low_mark) {
  backlog_release backlog{100, 10};
  backlog.note(99);
  CAF_CHECK(!backlog.ended(0));
  backlog.note(100);
  CAF_CHECK(!backlog.ended(60)); // draining, above the low mark
  backlog.note(80);              // growing again, still the same backlog
  CAF_CHECK(backlog.ended(10));
  CAF_CHECK(!backlog.ended(0)); // once
  CAF_CHECK(!backlog.ended(50));
  CAF_CHECK(backlog.ended(150) == false);
  CAF_CHECK(backlog.ended(0)); // a second backlog (150 waiting), over
}
