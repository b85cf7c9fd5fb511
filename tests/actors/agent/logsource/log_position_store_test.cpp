#include "actors/agent/logsource/log_position_store.hpp"

#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "tests/support/fresh_directory.hpp"

namespace vigil::agent {
namespace {

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

log_position kmsg_at(std::uint64_t seq, std::string boot = "boot-a") {
  log_position p;
  p.kind = log_source_kind::kmsg;
  p.boot_id = std::move(boot);
  p.kmsg_seq = seq;
  return p;
}

TEST(log_position_store, every_kind_round_trips) {
  log_position journal;
  journal.kind = log_source_kind::journald;
  journal.boot_id = "b";
  journal.journal_cursor = "s=abc;i=12;b=def;m=1;t=2;x=3";
  log_position file;
  file.kind = log_source_kind::syslog_file;
  file.boot_id = "b";
  file.file_inode = 123456;
  file.file_offset = 789;
  for (const auto& p : {kmsg_at(42), journal, file}) {
    auto decoded = decode_log_position(encode_log_position(p));
    ASSERT_TRUE(decoded.has_value()) << decoded.error().to_string();
    EXPECT_EQ(*decoded, p) << encode_log_position(p);
  }
}

TEST(log_position_store, saved_position_loads_back) {
  log_position_store store(test::fresh_directory() + "/kmsg.position");
  ASSERT_TRUE(store.save(kmsg_at(7)).has_value());
  ASSERT_TRUE(store.save(kmsg_at(9)).has_value());
  auto loaded = store.load();
  EXPECT_FALSE(loaded.problem.has_value());
  ASSERT_TRUE(loaded.position.has_value());
  EXPECT_EQ(*loaded.position, kmsg_at(9));
  struct stat st {};
  EXPECT_NE(::stat((store.path() + ".tmp").c_str(), &st), 0);
}

TEST(log_position_store, missing_file_is_a_fresh_start_without_a_problem) {
  log_position_store store(test::fresh_directory() + "/none.position");
  auto loaded = store.load();
  EXPECT_FALSE(loaded.position.has_value());
  EXPECT_FALSE(loaded.problem.has_value());
}

TEST(log_position_store, corrupt_file_is_a_fresh_start_with_a_problem) {
  const auto path = test::fresh_directory() + "/bad.position";
  log_position_store store(path);
  for (const char* text :
       {"{not json", "[]", R"({"version":1,"source":"tape","boot_id":"x"})",
        R"({"version":2,"source":"kmsg","boot_id":"x"})",
        R"({"version":1,"source":"kmsg","boot_id":"x","kmsg_seq":"12"})"}) {
    write_file(path, text);
    auto loaded = store.load();
    EXPECT_FALSE(loaded.position.has_value()) << text;
    ASSERT_TRUE(loaded.problem.has_value()) << text;
    EXPECT_EQ(loaded.problem->where, path);
    EXPECT_NE(loaded.problem->what.find("starting fresh"), std::string::npos);
  }
}

TEST(log_position_store, decode_failures_name_the_field) {
  auto decoded =
    decode_log_position(R"({"version":1,"source":"kmsg","boot_id":"x","kmsg_seq":"1"})");
  ASSERT_FALSE(decoded.has_value());
  EXPECT_EQ(decoded.error().where, "kmsg_seq");
}

TEST(log_position_store, save_into_a_missing_directory_names_the_file) {
  const auto path = test::fresh_directory() + "/missing/kmsg.position";
  auto st = log_position_store(path).save(kmsg_at(1));
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().where, path);
}

TEST(log_position_store, start_kind_follows_boot_and_kind) {
  const auto k = log_source_kind::kmsg;
  EXPECT_EQ(decide_log_start(std::nullopt, k, "boot-a"), log_start::fresh);
  EXPECT_EQ(decide_log_start(kmsg_at(1), k, "boot-a"), log_start::resumed);
  EXPECT_EQ(decide_log_start(kmsg_at(1), k, "boot-b"), log_start::rebooted);
  EXPECT_EQ(decide_log_start(kmsg_at(1), log_source_kind::journald, "boot-a"),
            log_start::fresh);
  EXPECT_EQ(decide_log_start(kmsg_at(1), log_source_kind::journald, "boot-b"),
            log_start::rebooted);
  EXPECT_EQ(decide_log_start(kmsg_at(1), k, ""), log_start::fresh);
}

TEST(log_position_store, boot_id_is_read_and_trimmed) {
  const auto dir = test::fresh_directory();
  write_file(dir + "/boot_id", "0f3a6c52-7d7e-4c1b-9f1e-2b8a8d1c0e11\n");
  auto id = read_boot_id_file(dir + "/boot_id");
  ASSERT_TRUE(id.has_value()) << id.error().to_string();
  EXPECT_EQ(*id, "0f3a6c52-7d7e-4c1b-9f1e-2b8a8d1c0e11");
  write_file(dir + "/empty", "\n");
  EXPECT_FALSE(read_boot_id_file(dir + "/empty").has_value());
  auto missing = read_boot_id_file(dir + "/missing");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().where, dir + "/missing");
}

} // namespace
} // namespace vigil::agent
