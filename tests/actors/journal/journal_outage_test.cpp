// Integration: the journal actor with a detached writer on a real PostgreSQL
// server that is stopped and started again in the middle of a stream. Every
// acknowledged append must be in the database afterwards. No sleeps: the test
// waits for replies (with a generous bound), never for time.
#include <functional>

#include <gtest/gtest.h>

#include <caf/all.hpp>

#include "actors/journal/journal_actor.hpp"
#include "tests/support/test_databases.hpp"

namespace vigil {
namespace {

journal_record record(int i) {
  return {0,       from_unix(1000 + i, 0),     "node-" + std::to_string(i % 7),
          "event", "key-" + std::to_string(i), R"({"i":)" + std::to_string(i) + "}"};
}

TEST(journal_outage, server_restart_mid_stream_loses_nothing_acknowledged) {
  const auto url = test::fresh_postgres_database();
  if (url.empty())
    GTEST_SKIP() << "no PostgreSQL server: run under scripts/with-postgres";
  auto made = make_journal_store(url);
  ASSERT_TRUE(made.has_value());
  std::shared_ptr<journal_store> store = std::move(*made);
  ASSERT_TRUE(store->open().has_value());

  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", size_t{2});
  caf::actor_system sys{cfg};
  journal_config config;
  config.batch_max_events = 16;
  config.batch_max_delay_ms = 1;
  config.reconnect_initial_ms = 20;
  config.reconnect_max_ms = 200;
  auto writer = sys.spawn<caf::detached>(journal_writer, store);
  auto jrnl = sys.spawn(journal, config, writer);

  std::set<std::int64_t> acknowledged;
  // Sends [from, to), runs `meanwhile`, then waits for every reply.
  auto append_all = [&](int from, int to, const std::function<void()>& meanwhile) {
    caf::scoped_actor self{sys};
    for (int i = from; i < to; ++i)
      self->send(jrnl, append_atom::value, record(i));
    meanwhile();
    for (int i = from; i < to; ++i)
      self->receive([&](const append_outcome& o) { acknowledged.insert(o.seq); },
                    [&](const caf::error& err) { ADD_FAILURE() << sys.render(err); },
                    caf::after(std::chrono::seconds{120}) >>
                      [&] { ADD_FAILURE() << "no reply"; });
  };
  const auto nothing = [] {};

  append_all(0, 100, nothing);
  ASSERT_EQ(acknowledged.size(), 100u);
  ASSERT_TRUE(test::run_postgres_control("VIGIL_TEST_PG_STOP"));
  // Appends during the outage are queued, not acknowledged, until the server is back.
  append_all(100, 200,
             [] { ASSERT_TRUE(test::run_postgres_control("VIGIL_TEST_PG_START")); });
  append_all(200, 250, nothing);
  EXPECT_EQ(acknowledged.size(), 250u);

  journal_query all;
  all.limit = 1000;
  auto rows = store->read(all);
  ASSERT_TRUE(rows.has_value()) << rows.error().to_string();
  std::set<std::int64_t> stored;
  for (const auto& r : *rows)
    stored.insert(r.seq);
  for (auto seq : acknowledged)
    EXPECT_EQ(stored.count(seq), 1u) << "acknowledged seq " << seq << " is missing";
  EXPECT_EQ(rows->size(), 250u);
  caf::anon_send_exit(jrnl, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(writer, caf::exit_reason::user_shutdown);
}

} // namespace
} // namespace vigil
