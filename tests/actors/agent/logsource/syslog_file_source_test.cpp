#include "actors/agent/logsource/syslog_file_source.hpp"

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/support/fresh_directory.hpp"

namespace vigil::agent {
namespace {

wall_time at(const char* rfc3339) {
  return *parse_rfc3339(rfc3339);
}

const wall_time now = at("2025-10-23T12:00:00Z");

void append_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::app) << text;
}

std::uint64_t inode_of(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_ino) : 0;
}

log_source_options options_for(const std::string& path) {
  log_source_options options;
  options.path = path;
  options.boot_id = "boot-a";
  options.now = now;
  return options;
}

log_position saved_file(std::uint64_t inode, std::uint64_t offset,
                        const std::string& boot = "boot-a") {
  log_position p;
  p.kind = log_source_kind::syslog_file;
  p.boot_id = boot;
  p.file_inode = inode;
  p.file_offset = offset;
  return p;
}

std::vector<std::string> poll_texts(syslog_file_source& source, std::size_t max = 1000) {
  std::vector<log_line> lines;
  source.poll(lines, max);
  std::vector<std::string> out;
  for (const auto& l : lines)
    out.push_back(l.text);
  return out;
}

using texts = std::vector<std::string>;

TEST(syslog_file_source, line_timestamps_parse_in_both_syslog_forms) {
  EXPECT_EQ(syslog_line_time("2025-10-23T11:38:02.5+00:00 gpu1 kernel: x", now),
            at("2025-10-23T11:38:02.5Z"));
  EXPECT_EQ(syslog_line_time("Oct 23 11:38:02 gpu1 kernel: x", now),
            at("2025-10-23T11:38:02Z"));
  EXPECT_EQ(syslog_line_time("Oct  3 01:02:03 gpu1 kernel: x", now),
            at("2025-10-03T01:02:03Z"));
  EXPECT_EQ(
    syslog_line_time("Dec 31 23:59:59 gpu1 kernel: x", at("2026-01-01T00:10:00Z")),
    at("2025-12-31T23:59:59Z"));
  for (const char* line :
       {"", "[  12.345] NVRM: Xid", "Foo 23 11:38:02 x", "Oct 23 1:38"})
    EXPECT_FALSE(syslog_line_time(line, now).has_value()) << line;
}

TEST(syslog_file_source, delivers_whole_lines_with_their_offsets) {
  const auto path = test::fresh_directory() + "/kern.log";
  append_file(path,
              "Oct 23 11:59:00 h kernel: one\nno stamp two\nOct 23 11:59:01 h k: par");
  syslog_file_source source(options_for(path));
  std::vector<log_line> lines;
  EXPECT_EQ(source.poll(lines, 10), 2u);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].text, "Oct 23 11:59:00 h kernel: one");
  EXPECT_EQ(lines[0].seq, 0u);
  EXPECT_EQ(lines[0].realtime, at("2025-10-23T11:59:00Z"));
  EXPECT_EQ(lines[1].text, "no stamp two");
  EXPECT_EQ(lines[1].seq, 30u);
  EXPECT_FALSE(lines[1].realtime.has_value());
  EXPECT_FALSE(lines[1].kernel_usec_since_boot.has_value());
  EXPECT_EQ(source.position().file_offset, 43u);
  EXPECT_EQ(source.position().file_inode, inode_of(path));
  append_file(path, "tial\r\n");
  EXPECT_EQ(poll_texts(source), texts{"Oct 23 11:59:01 h k: partial"});
}

TEST(syslog_file_source, max_lines_keeps_the_position_exact) {
  const auto path = test::fresh_directory() + "/kern.log";
  append_file(path, "a\nb\nc\n");
  syslog_file_source source(options_for(path));
  EXPECT_EQ(poll_texts(source, 2), (texts{"a", "b"}));
  EXPECT_EQ(source.position().file_offset, 4u);
  EXPECT_EQ(poll_texts(source, 2), (texts{"c"}));
}

TEST(syslog_file_source, follows_rotation_after_draining_the_old_file) {
  const auto dir = test::fresh_directory();
  const auto path = dir + "/kern.log";
  append_file(path, "old 1\n");
  syslog_file_source source(options_for(path));
  EXPECT_EQ(poll_texts(source), texts{"old 1"});
  append_file(path, "old 2\n");
  ASSERT_EQ(std::rename(path.c_str(), (path + ".1").c_str()), 0);
  append_file(path, "new 1\n");
  EXPECT_EQ(poll_texts(source), (texts{"old 2", "new 1"}));
  EXPECT_EQ(source.diagnostics().rotations, 1u);
  EXPECT_EQ(source.position().file_inode, inode_of(path));
  EXPECT_EQ(source.position().file_offset, 6u);
}

TEST(syslog_file_source, follows_truncation) {
  const auto path = test::fresh_directory() + "/kern.log";
  append_file(path, "before one\nbefore two\n");
  syslog_file_source source(options_for(path));
  EXPECT_EQ(poll_texts(source).size(), 2u);
  ASSERT_EQ(::truncate(path.c_str(), 0), 0);
  append_file(path, "after\n");
  EXPECT_EQ(poll_texts(source), texts{"after"});
  EXPECT_EQ(source.diagnostics().truncations, 1u);
  EXPECT_EQ(source.position().file_offset, 6u);
}

TEST(syslog_file_source, a_restart_on_the_same_boot_neither_misses_nor_replays) {
  const auto path = test::fresh_directory() + "/kern.log";
  append_file(path, "Oct 20 00:00:00 h k: older than the lookback\nseen\nunseen\n");
  log_position saved;
  {
    syslog_file_source first(options_for(path));
    EXPECT_EQ(poll_texts(first, 1), texts{"seen"});
    saved = first.position();
  }
  append_file(path, "written while away\n");
  auto options = options_for(path);
  options.saved = saved;
  syslog_file_source source(options);
  EXPECT_EQ(source.start(), log_start::resumed);
  EXPECT_EQ(source.position(), saved);
  EXPECT_EQ(poll_texts(source), (texts{"unseen", "written while away"}));
}

TEST(syslog_file_source, a_rotation_while_away_finishes_the_old_file_first) {
  const auto path = test::fresh_directory() + "/kern.log";
  append_file(path, "read\nunread old\n");
  const auto saved = saved_file(inode_of(path), 5);
  ASSERT_EQ(std::rename(path.c_str(), (path + ".1").c_str()), 0);
  append_file(path, "new\n");
  auto options = options_for(path);
  options.saved = saved;
  syslog_file_source source(options);
  EXPECT_EQ(poll_texts(source), (texts{"unread old", "new"}));
  EXPECT_EQ(source.diagnostics().rotations, 1u);
}

TEST(syslog_file_source, a_saved_offset_past_the_end_restarts_the_file) {
  const auto path = test::fresh_directory() + "/kern.log";
  append_file(path, "short\n");
  auto options = options_for(path);
  options.saved = saved_file(inode_of(path), 1000);
  syslog_file_source source(options);
  EXPECT_EQ(poll_texts(source), texts{"short"});
  EXPECT_EQ(source.diagnostics().truncations, 1u);
}

TEST(syslog_file_source, after_a_reboot_old_stamped_lines_are_skipped) {
  const auto path = test::fresh_directory() + "/kern.log";
  append_file(path, "Oct 23 08:00:00 h kernel: NVRM: Xid 79 before\n"
                    "no stamp\n"
                    "Oct 23 11:00:00 h kernel: NVRM: Xid 48 recent\n");
  auto options = options_for(path);
  options.saved = saved_file(inode_of(path), 0, "boot-old");
  syslog_file_source source(options);
  EXPECT_TRUE(source.rebooted());
  EXPECT_EQ(poll_texts(source),
            (texts{"no stamp", "Oct 23 11:00:00 h kernel: NVRM: Xid 48 recent"}));
  EXPECT_EQ(source.diagnostics().skipped_old, 1u);
  EXPECT_EQ(source.position().boot_id, "boot-a");
  // Caught up: what is written from now on is new whatever its stamp says.
  append_file(path, "Oct 23 07:00:00 h kernel: clock skew\n");
  EXPECT_EQ(poll_texts(source), texts{"Oct 23 07:00:00 h kernel: clock skew"});
}

TEST(syslog_file_source, a_missing_file_is_an_error_until_it_appears) {
  const auto path = test::fresh_directory() + "/kern.log";
  syslog_file_source source(options_for(path));
  EXPECT_TRUE(poll_texts(source).empty());
  EXPECT_EQ(source.diagnostics().errors, 1u);
  EXPECT_FALSE(source.position().file_inode.has_value());
  append_file(path, "hello\n");
  EXPECT_EQ(poll_texts(source), texts{"hello"});
}

} // namespace
} // namespace vigil::agent
