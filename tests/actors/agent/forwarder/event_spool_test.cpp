#include "actors/agent/forwarder/event_spool.hpp"

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/support/fresh_directory.hpp"

namespace vigil::agent {
namespace {

spool_options options_in(const std::string& dir) {
  spool_options options;
  options.directory = dir + "/spool";
  return options;
}

std::vector<std::string> payloads(const event_spool& spool) {
  auto events = spool.peek(spool.size() + 1);
  EXPECT_TRUE(events.has_value()) << events.error().to_string();
  std::vector<std::string> out;
  if (events)
    for (const auto& e : *events)
      out.push_back(e.encoded);
  return out;
}

void open_or_fail(event_spool& spool) {
  auto st = spool.open();
  ASSERT_TRUE(st.has_value()) << st.error().to_string();
}

void append_ok(event_spool& spool, const std::string& text, bool fatal = false) {
  auto r = spool.append({text, fatal});
  ASSERT_EQ(r.status, spool_append_status::appended)
    << (r.error ? r.error->to_string() : "");
}

off_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(event_spool, crc32_matches_the_ieee_check_value) {
  EXPECT_EQ(crc32_update(0, "123456789", 9), 0xCBF43926u);
}

TEST(event_spool, events_come_back_in_order_after_reopen) {
  const auto options = options_in(test::fresh_directory());
  {
    event_spool spool(options);
    open_or_fail(spool);
    append_ok(spool, "a");
    append_ok(spool, "b", true);
    append_ok(spool, "c");
    EXPECT_EQ(payloads(spool), (std::vector<std::string>{"a", "b", "c"}));
  }
  event_spool reopened(options);
  open_or_fail(reopened);
  EXPECT_EQ(payloads(reopened), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(reopened.fatal_count(), 1u);
  EXPECT_FALSE(reopened.recovery_problem().has_value());
}

TEST(event_spool, acknowledged_events_stay_gone_after_reopen) {
  const auto options = options_in(test::fresh_directory());
  {
    event_spool spool(options);
    open_or_fail(spool);
    for (auto text : {"a", "b", "c", "d"})
      append_ok(spool, text);
    ASSERT_TRUE(spool.pop_front(2).has_value());
    EXPECT_EQ(payloads(spool), (std::vector<std::string>{"c", "d"}));
  }
  event_spool reopened(options);
  open_or_fail(reopened);
  EXPECT_EQ(payloads(reopened), (std::vector<std::string>{"c", "d"}));
  append_ok(reopened, "e");
  EXPECT_EQ(payloads(reopened), (std::vector<std::string>{"c", "d", "e"}));
}

TEST(event_spool, full_by_count_drops_the_oldest_non_fatal_first) {
  auto options = options_in(test::fresh_directory());
  options.max_events = 3;
  event_spool spool(options);
  open_or_fail(spool);
  append_ok(spool, "fatal-1", true);
  append_ok(spool, "warn-1");
  append_ok(spool, "warn-2");
  auto r = spool.append({"warn-3", false});
  EXPECT_EQ(r.status, spool_append_status::appended);
  EXPECT_EQ(r.dropped, 1u);
  EXPECT_EQ(payloads(spool), (std::vector<std::string>{"fatal-1", "warn-2", "warn-3"}));
  EXPECT_EQ(spool.stats().dropped_non_fatal, 1u);

  event_spool reopened(options);
  open_or_fail(reopened);
  EXPECT_EQ(payloads(reopened),
            (std::vector<std::string>{"fatal-1", "warn-2", "warn-3"}));
}

TEST(event_spool, full_by_bytes_drops_as_many_as_needed) {
  auto options = options_in(test::fresh_directory());
  options.max_bytes = 3 * (10 + 4); // three 4-byte payloads with headers
  event_spool spool(options);
  open_or_fail(spool);
  append_ok(spool, "aaaa");
  append_ok(spool, "bbbb", true);
  append_ok(spool, "cccc");
  // 29 bytes: would not fit even with both non-fatal events dropped.
  auto r = spool.append({std::string(19, 'd'), false});
  EXPECT_EQ(r.status, spool_append_status::refused_full);
  EXPECT_EQ(r.dropped, 0u);
  EXPECT_EQ(payloads(spool), (std::vector<std::string>{"aaaa", "bbbb", "cccc"}));
  r = spool.append({"dddddddddddddd", false}); // 24 bytes: drops aaaa and cccc
  EXPECT_EQ(r.status, spool_append_status::appended);
  EXPECT_EQ(r.dropped, 2u);
  EXPECT_EQ(payloads(spool), (std::vector<std::string>{"bbbb", "dddddddddddddd"}));
  EXPECT_EQ(spool.live_bytes(), 38u);
}

TEST(event_spool, full_of_fatal_events_refuses_and_drops_nothing) {
  auto options = options_in(test::fresh_directory());
  options.max_events = 2;
  event_spool spool(options);
  open_or_fail(spool);
  append_ok(spool, "fatal-1", true);
  append_ok(spool, "fatal-2", true);
  EXPECT_EQ(spool.append({"fatal-3", true}).status, spool_append_status::refused_full);
  EXPECT_EQ(spool.append({"warn", false}).status, spool_append_status::refused_full);
  EXPECT_EQ(spool.stats().refused, 2u);
  EXPECT_EQ(spool.stats().dropped_non_fatal, 0u);
  EXPECT_EQ(payloads(spool), (std::vector<std::string>{"fatal-1", "fatal-2"}));
}

TEST(event_spool, a_record_larger_than_the_spool_is_refused) {
  auto options = options_in(test::fresh_directory());
  options.max_bytes = 20;
  event_spool spool(options);
  open_or_fail(spool);
  EXPECT_EQ(spool.append({std::string(11, 'x'), true}).status,
            spool_append_status::too_large);
  EXPECT_EQ(spool.stats().refused, 1u);
  EXPECT_TRUE(spool.empty());
}

TEST(event_spool, append_all_keeps_order_and_reports_each) {
  auto options = options_in(test::fresh_directory());
  options.max_events = 2;
  event_spool spool(options);
  open_or_fail(spool);
  auto results = spool.append_all({{"f1", true}, {"f2", true}, {"w", false}});
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0].status, spool_append_status::appended);
  EXPECT_EQ(results[1].status, spool_append_status::appended);
  EXPECT_EQ(results[2].status, spool_append_status::refused_full);
  EXPECT_EQ(payloads(spool), (std::vector<std::string>{"f1", "f2"}));
}

TEST(event_spool, pop_through_ignores_events_dropped_since_the_peek) {
  auto options = options_in(test::fresh_directory());
  options.max_events = 3;
  event_spool spool(options);
  open_or_fail(spool);
  append_ok(spool, "w1");
  append_ok(spool, "w2");
  auto batch = spool.peek(2);
  ASSERT_TRUE(batch.has_value());
  append_ok(spool, "w3");
  append_ok(spool, "w4"); // drops w1, which is in the batch
  ASSERT_TRUE(spool.pop_through(batch->back().id).has_value());
  EXPECT_EQ(payloads(spool), (std::vector<std::string>{"w3", "w4"}));
}

TEST(event_spool, a_torn_last_record_is_discarded_with_a_diagnostic) {
  const auto options = options_in(test::fresh_directory());
  std::string path;
  {
    event_spool spool(options);
    open_or_fail(spool);
    append_ok(spool, "first");
    append_ok(spool, "second");
    append_ok(spool, "third-event");
    path = spool.file_path();
  }
  ASSERT_EQ(::truncate(path.c_str(), file_size(path) - 3), 0);
  event_spool reopened(options);
  open_or_fail(reopened);
  EXPECT_EQ(payloads(reopened), (std::vector<std::string>{"first", "second"}));
  ASSERT_TRUE(reopened.recovery_problem().has_value());
  EXPECT_EQ(reopened.recovery_problem()->where, path);
  EXPECT_NE(reopened.recovery_problem()->what.find("cut short"), std::string::npos);
  EXPECT_EQ(reopened.stats().discarded_bytes, 10u + 11u - 3u);
  append_ok(reopened, "fourth");
  event_spool again(options);
  open_or_fail(again);
  EXPECT_EQ(payloads(again), (std::vector<std::string>{"first", "second", "fourth"}));
  EXPECT_FALSE(again.recovery_problem().has_value());
}

TEST(event_spool, a_half_written_header_is_discarded) {
  const auto options = options_in(test::fresh_directory());
  std::string path;
  {
    event_spool spool(options);
    open_or_fail(spool);
    append_ok(spool, "kept");
    path = spool.file_path();
  }
  write_file(path, read_file(path) + std::string("\x05\x00\x00", 3));
  event_spool reopened(options);
  open_or_fail(reopened);
  EXPECT_EQ(payloads(reopened), (std::vector<std::string>{"kept"}));
  EXPECT_TRUE(reopened.recovery_problem().has_value());
  EXPECT_EQ(file_size(path), 8 + 10 + 4);
}

TEST(event_spool, a_checksum_mismatch_ends_the_valid_part) {
  const auto options = options_in(test::fresh_directory());
  std::string path;
  {
    event_spool spool(options);
    open_or_fail(spool);
    append_ok(spool, "good");
    append_ok(spool, "flipped");
    path = spool.file_path();
  }
  auto bytes = read_file(path);
  bytes.back() ^= 0x01;
  write_file(path, bytes);
  event_spool reopened(options);
  open_or_fail(reopened);
  EXPECT_EQ(payloads(reopened), (std::vector<std::string>{"good"}));
  ASSERT_TRUE(reopened.recovery_problem().has_value());
  EXPECT_NE(reopened.recovery_problem()->what.find("checksum"), std::string::npos);
}

TEST(event_spool, a_foreign_file_is_not_overwritten) {
  const auto options = options_in(test::fresh_directory());
  ASSERT_EQ(::mkdir(options.directory.c_str(), 0700), 0);
  const auto path = options.directory + "/spool.log";
  write_file(path, "not a spool at all");
  event_spool spool(options);
  auto st = spool.open();
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().where, path);
  EXPECT_EQ(read_file(path), "not a spool at all");
}

TEST(event_spool, a_drained_spool_shrinks_to_its_magic) {
  const auto options = options_in(test::fresh_directory());
  event_spool spool(options);
  open_or_fail(spool);
  append_ok(spool, "a");
  append_ok(spool, "b");
  ASSERT_TRUE(spool.pop_front(5).has_value());
  EXPECT_TRUE(spool.empty());
  EXPECT_EQ(file_size(spool.file_path()), 8);
  EXPECT_EQ(spool.stats().acknowledged, 2u);
}

TEST(event_spool, compaction_keeps_live_events_in_order) {
  auto options = options_in(test::fresh_directory());
  options.compact_min_dead_bytes = 40;
  {
    event_spool spool(options);
    open_or_fail(spool);
    for (int i = 0; i < 10; ++i)
      append_ok(spool, "event-" + std::to_string(i), i == 3);
    ASSERT_TRUE(spool.pop_front(6).has_value());
    EXPECT_EQ(spool.stats().compactions, 1u);
    EXPECT_EQ(file_size(spool.file_path()), static_cast<off_t>(8 + 4 * (10 + 7)));
    append_ok(spool, "event-10");
    ASSERT_TRUE(spool.pop_front(1).has_value());
  }
  event_spool reopened(options);
  open_or_fail(reopened);
  EXPECT_EQ(payloads(reopened),
            (std::vector<std::string>{"event-7", "event-8", "event-9", "event-10"}));
  EXPECT_FALSE(reopened.recovery_problem().has_value());
}

TEST(event_spool, calls_before_open_fail_cleanly) {
  event_spool spool(options_in(test::fresh_directory()));
  auto r = spool.append({"x", true});
  EXPECT_EQ(r.status, spool_append_status::io_error);
  ASSERT_TRUE(r.error.has_value());
  EXPECT_FALSE(spool.peek(1).has_value());
  EXPECT_FALSE(spool.pop_front(1).has_value());
}

} // namespace
} // namespace vigil::agent
