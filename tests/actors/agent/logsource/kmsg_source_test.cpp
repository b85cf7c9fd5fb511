#include "actors/agent/logsource/kmsg_source.hpp"

#include <cerrno>
#include <fstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/support/fresh_directory.hpp"

namespace vigil::agent {
namespace {

using std::chrono::hours;
using std::chrono::microseconds;

constexpr std::int64_t hour_us = 3'600'000'000;

void append_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::app) << text;
}

std::string record(std::uint64_t seq, std::int64_t usec, const std::string& message) {
  return "6," + std::to_string(seq) + "," + std::to_string(usec) + ",-;" + message + "\n";
}

log_source_options options_for(const std::string& path) {
  log_source_options options;
  options.path = path;
  options.boot_id = "boot-a";
  options.since_boot = hours{1}; // lookback of 2 h covers the whole boot
  return options;
}

log_position saved_kmsg(std::uint64_t seq, const std::string& boot = "boot-a") {
  log_position p;
  p.kind = log_source_kind::kmsg;
  p.boot_id = boot;
  p.kmsg_seq = seq;
  return p;
}

std::vector<std::string> texts(const std::vector<log_line>& lines) {
  std::vector<std::string> out;
  for (const auto& l : lines)
    out.push_back(l.text);
  return out;
}

std::vector<log_line> poll_all(kmsg_source& source) {
  std::vector<log_line> lines;
  source.poll(lines, 1000);
  return lines;
}

TEST(kmsg_source, parses_the_record_header) {
  auto r = parse_kmsg_record("6,1234,5678,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->priority, 6);
  EXPECT_EQ(r->seq, 1234u);
  EXPECT_EQ(r->usec, 5678);
  EXPECT_EQ(r->flags, '-');
  EXPECT_EQ(r->message, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1");
  auto with_caller = parse_kmsg_record("4,339,5140900,c,caller=T1;usb 1-1: new; device");
  ASSERT_TRUE(with_caller.has_value());
  EXPECT_EQ(with_caller->flags, 'c');
  EXPECT_EQ(with_caller->message, "usb 1-1: new; device");
  for (const char* bad : {"no header", "6,1;x", "6,x,1,-;m", "6,1,2,;m", " DEVICE=+pci"})
    EXPECT_FALSE(parse_kmsg_record(bad).has_value()) << bad;
}

TEST(kmsg_source, delivers_messages_and_skips_dictionary_lines) {
  const auto path = test::fresh_directory() + "/kmsg";
  append_file(path, record(1, 100, "first")
                      + " SUBSYSTEM=pci\n DEVICE=+pci:0000:3b:00.0\n"
                      + record(2, 200, "second"));
  kmsg_source source(options_for(path));
  auto lines = poll_all(source);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].text, "first");
  EXPECT_EQ(lines[0].kernel_usec_since_boot, 100);
  EXPECT_EQ(lines[0].seq, 1u);
  EXPECT_FALSE(lines[0].realtime.has_value());
  EXPECT_EQ(lines[1].text, "second");
  EXPECT_EQ(source.position().kmsg_seq, 2u);
  EXPECT_EQ(source.position().boot_id, "boot-a");
  EXPECT_EQ(source.start(), log_start::fresh);
  EXPECT_EQ(source.diagnostics().errors, 0u);
}

TEST(kmsg_source, polls_return_only_what_is_new) {
  const auto path = test::fresh_directory() + "/kmsg";
  append_file(path, record(1, 1, "a"));
  kmsg_source source(options_for(path));
  EXPECT_EQ(texts(poll_all(source)), std::vector<std::string>{"a"});
  EXPECT_TRUE(poll_all(source).empty());
  append_file(path, record(2, 2, "b") + "6,3,3,-;partial");
  EXPECT_EQ(texts(poll_all(source)), std::vector<std::string>{"b"});
  append_file(path, " record\n");
  EXPECT_EQ(texts(poll_all(source)), std::vector<std::string>{"partial record"});
}

TEST(kmsg_source, max_lines_leaves_the_rest_for_the_next_poll) {
  const auto path = test::fresh_directory() + "/kmsg";
  append_file(path, record(1, 1, "a") + record(2, 2, "b") + record(3, 3, "c"));
  kmsg_source source(options_for(path));
  std::vector<log_line> lines;
  EXPECT_EQ(source.poll(lines, 2), 2u);
  EXPECT_EQ(source.position().kmsg_seq, 2u);
  EXPECT_EQ(source.poll(lines, 2), 1u);
  EXPECT_EQ(texts(lines), (std::vector<std::string>{"a", "b", "c"}));
}

TEST(kmsg_source, a_restart_on_the_same_boot_neither_misses_nor_replays) {
  const auto path = test::fresh_directory() + "/kmsg";
  append_file(path, record(1, 1, "a") + record(2, 2, "b") + record(3, 3, "c"));
  auto options = options_for(path);
  options.saved = saved_kmsg(2);
  kmsg_source source(options);
  EXPECT_EQ(source.start(), log_start::resumed);
  EXPECT_FALSE(source.rebooted());
  EXPECT_EQ(source.position().kmsg_seq, 2u);
  EXPECT_EQ(texts(poll_all(source)), std::vector<std::string>{"c"});
  EXPECT_EQ(source.diagnostics().lost_lines, 0u);
}

TEST(kmsg_source, overwritten_records_count_as_lost) {
  const auto path = test::fresh_directory() + "/kmsg";
  append_file(path, record(5, 5, "e") + record(6, 6, "f") + record(9, 9, "i"));
  auto options = options_for(path);
  options.saved = saved_kmsg(2);
  kmsg_source source(options);
  EXPECT_EQ(texts(poll_all(source)), (std::vector<std::string>{"e", "f", "i"}));
  EXPECT_EQ(source.diagnostics().lost_lines, 2u + 2u);
}

TEST(kmsg_source, an_overrun_is_counted_and_reading_goes_on) {
  const auto path = test::fresh_directory() + "/kmsg";
  append_file(path, record(1, 1, "a") + record(4, 4, "d"));
  bool failed_once = false;
  auto read = [&](int fd, char* buffer, std::size_t size) -> long {
    if (!failed_once) {
      failed_once = true;
      errno = EPIPE;
      return -1;
    }
    return ::read(fd, buffer, size);
  };
  kmsg_source source(options_for(path), read);
  EXPECT_EQ(texts(poll_all(source)), (std::vector<std::string>{"a", "d"}));
  EXPECT_EQ(source.diagnostics().overruns, 1u);
  EXPECT_EQ(source.diagnostics().lost_lines, 2u);
  EXPECT_EQ(source.diagnostics().errors, 0u);
}

TEST(kmsg_source, after_a_reboot_only_the_lookback_window_is_read) {
  const auto path = test::fresh_directory() + "/kmsg";
  append_file(path, record(1, hour_us / 2, "boot noise")
                      + record(2, 2 * hour_us, "recent") + record(3, 3 * hour_us, "now"));
  auto options = options_for(path);
  options.saved = saved_kmsg(77, "boot-old");
  options.since_boot = hours{3};
  kmsg_source source(options);
  EXPECT_TRUE(source.rebooted());
  EXPECT_EQ(texts(poll_all(source)), (std::vector<std::string>{"recent", "now"}));
  EXPECT_EQ(source.diagnostics().skipped_old, 1u);
  EXPECT_EQ(source.position().kmsg_seq, 3u);
  EXPECT_EQ(source.position().boot_id, "boot-a");
}

TEST(kmsg_source, reads_a_fifo_without_blocking) {
  const auto path = test::fresh_directory() + "/kmsg.fifo";
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  kmsg_source source(options_for(path));
  EXPECT_TRUE(poll_all(source).empty()); // opens the reading end, no writer yet
  int writer = ::open(path.c_str(), O_WRONLY | O_NONBLOCK);
  ASSERT_GE(writer, 0);
  EXPECT_TRUE(poll_all(source).empty()); // writer, no data: EAGAIN
  const auto text = record(1, 1, "from fifo");
  ASSERT_EQ(::write(writer, text.data(), text.size()), static_cast<long>(text.size()));
  EXPECT_EQ(texts(poll_all(source)), std::vector<std::string>{"from fifo"});
  ::close(writer);
  EXPECT_EQ(source.diagnostics().errors, 0u);
}

TEST(kmsg_source, a_missing_device_is_an_error_not_a_crash) {
  const auto path = test::fresh_directory() + "/absent";
  kmsg_source source(options_for(path));
  EXPECT_TRUE(poll_all(source).empty());
  EXPECT_EQ(source.diagnostics().errors, 1u);
  ASSERT_TRUE(source.diagnostics().last_error.has_value());
  EXPECT_EQ(source.diagnostics().last_error->where, path);
  EXPECT_FALSE(source.position().kmsg_seq.has_value());
}

TEST(kmsg_source, a_malformed_record_is_skipped_with_a_diagnostic) {
  const auto path = test::fresh_directory() + "/kmsg";
  append_file(path, "garbage line\n" + record(1, 1, "ok"));
  kmsg_source source(options_for(path));
  EXPECT_EQ(texts(poll_all(source)), std::vector<std::string>{"ok"});
  EXPECT_EQ(source.diagnostics().errors, 1u);
}

} // namespace
} // namespace vigil::agent
