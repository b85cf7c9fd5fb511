#include "actors/agent/logsource/journald_source.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/fresh_directory.hpp"

namespace vigil::agent {
namespace {

// Only what runs without a journal daemon: journal directories made by the
// test. The machine's own journal, if any, is never opened.

log_source_options options_for(const std::string& dir) {
  log_source_options options;
  options.path = dir;
  options.boot_id = "0f3a6c52-7d7e-4c1b-9f1e-2b8a8d1c0e11";
  options.now = from_unix(1'761'219'482, 0);
  return options;
}

TEST(journald_source, an_empty_journal_directory_has_no_entries) {
  journald_source source(options_for(test::fresh_directory()));
  std::vector<log_line> lines;
  EXPECT_EQ(source.poll(lines, 100), 0u);
  EXPECT_EQ(source.poll(lines, 100), 0u);
  EXPECT_TRUE(lines.empty());
  EXPECT_EQ(source.diagnostics().errors, 0u)
    << source.diagnostics().last_error->to_string();
  EXPECT_EQ(source.start(), log_start::fresh);
  EXPECT_EQ(source.position().kind, log_source_kind::journald);
  EXPECT_TRUE(source.position().journal_cursor.empty());
}

TEST(journald_source, a_missing_directory_is_an_error_not_a_crash) {
  const auto dir = test::fresh_directory() + "/absent";
  journald_source source(options_for(dir));
  std::vector<log_line> lines;
  EXPECT_EQ(source.poll(lines, 100), 0u);
  EXPECT_EQ(source.diagnostics().errors, 1u);
  ASSERT_TRUE(source.diagnostics().last_error.has_value());
  EXPECT_EQ(source.diagnostics().last_error->where, dir);
}

TEST(journald_source, a_bad_saved_cursor_falls_back_and_is_kept_until_replaced) {
  auto options = options_for(test::fresh_directory());
  log_position saved;
  saved.kind = log_source_kind::journald;
  saved.boot_id = options.boot_id;
  saved.journal_cursor = "not-a-cursor";
  options.saved = saved;
  journald_source source(options);
  EXPECT_EQ(source.start(), log_start::resumed);
  std::vector<log_line> lines;
  EXPECT_EQ(source.poll(lines, 100), 0u);
  EXPECT_EQ(source.position().journal_cursor, "not-a-cursor");
  EXPECT_LE(source.diagnostics().errors, 1u);
}

TEST(journald_source, boot_ids_lose_their_dashes) {
  EXPECT_EQ(journal_boot_id("0f3a6c52-7d7e-4c1b-9f1e-2b8a8d1c0e11"),
            "0f3a6c527d7e4c1b9f1e2b8a8d1c0e11");
}

} // namespace
} // namespace vigil::agent
