#include "actors/agent/xid/kernel_log_line.hpp"

#include <gtest/gtest.h>

namespace vigil::agent {
namespace {

constexpr std::string_view xid48 =
  "NVRM: Xid (PCI:0000:03:00): 48, pid=91237, name=nv-hostengine, Ch 00000076";

TEST(kernel_log_line, bare_message_is_its_own_message) {
  auto line = split_kernel_log_line(xid48);
  EXPECT_EQ(line.message, xid48);
  EXPECT_FALSE(line.kernel_time_us);
  EXPECT_TRUE(line.syslog_timestamp.empty());
}

TEST(kernel_log_line, dmesg_stamp_with_padding) {
  auto line = split_kernel_log_line("[  123.456789] NVRM: Xid (PCI:0000:03:00): 48");
  EXPECT_EQ(line.message, "NVRM: Xid (PCI:0000:03:00): 48");
  ASSERT_TRUE(line.kernel_time_us);
  EXPECT_EQ(*line.kernel_time_us, 123456789);
}

TEST(kernel_log_line, dmesg_stamp_odd_spacing_and_short_fraction) {
  auto line = split_kernel_log_line("[ 5.5]   NVRM: hello");
  EXPECT_EQ(line.message, "NVRM: hello");
  ASSERT_TRUE(line.kernel_time_us);
  EXPECT_EQ(*line.kernel_time_us, 5500000);
  auto tight = split_kernel_log_line("[171167.620236]NVRM: x");
  EXPECT_EQ(tight.message, "NVRM: x");
  EXPECT_EQ(*tight.kernel_time_us, 171167620236);
}

TEST(kernel_log_line, dmesg_continuation_line_is_trimmed) {
  auto line = split_kernel_log_line(
    "               NVRM: (PCI ID: 10de:2330) installed in this system has");
  EXPECT_EQ(line.message, "NVRM: (PCI ID: 10de:2330) installed in this system has");
  EXPECT_FALSE(line.kernel_time_us);
}

TEST(kernel_log_line, dmesg_human_timestamp) {
  auto line = split_kernel_log_line("[Thu Oct 23 11:38:02 2025] NVRM: x");
  EXPECT_EQ(line.message, "NVRM: x");
  EXPECT_EQ(line.syslog_timestamp, "[Thu Oct 23 11:38:02 2025]");
  EXPECT_FALSE(line.kernel_time_us);
}

TEST(kernel_log_line, kmsg_record) {
  auto line = split_kernel_log_line("4,1234,1843308145,-;NVRM: Xid (PCI:0000:03:00): 79");
  EXPECT_EQ(line.message, "NVRM: Xid (PCI:0000:03:00): 79");
  ASSERT_TRUE(line.kernel_time_us);
  EXPECT_EQ(*line.kernel_time_us, 1843308145);
  auto with_flags = split_kernel_log_line("6,99,42,c,more;text");
  EXPECT_EQ(with_flags.message, "text");
}

TEST(kernel_log_line, journald_short) {
  auto line = split_kernel_log_line("Oct 23 11:38:02 node1 kernel: NVRM: x");
  EXPECT_EQ(line.message, "NVRM: x");
  EXPECT_EQ(line.syslog_timestamp, "Oct 23 11:38:02");
  EXPECT_EQ(line.tag, "kernel");
}

TEST(kernel_log_line, journald_short_precise_single_digit_day) {
  auto line = split_kernel_log_line("Oct  3 11:38:02.207323 node1 kernel: NVRM: x");
  EXPECT_EQ(line.message, "NVRM: x");
  EXPECT_EQ(line.syslog_timestamp, "Oct  3 11:38:02.207323");
}

TEST(kernel_log_line, journald_short_iso) {
  auto line = split_kernel_log_line("2025-10-23T11:38:02+0000 gb200-n1 kernel: NVRM: x");
  EXPECT_EQ(line.message, "NVRM: x");
  EXPECT_EQ(line.syslog_timestamp, "2025-10-23T11:38:02+0000");
}

TEST(kernel_log_line, rfc3164_with_priority_and_dmesg_stamp) {
  auto line =
    split_kernel_log_line("<4>Oct 23 11:38:02 node1 kernel: [  202.207323] NVRM: x");
  EXPECT_EQ(line.message, "NVRM: x");
  EXPECT_EQ(line.syslog_timestamp, "Oct 23 11:38:02");
  ASSERT_TRUE(line.kernel_time_us);
  EXPECT_EQ(*line.kernel_time_us, 202207323);
}

TEST(kernel_log_line, syslog_tag_with_pid) {
  auto line = split_kernel_log_line(
    "Oct 23 11:50:00 node1 gpu-reset[7781]: GPU reset occurred: GPU-455d8f70");
  EXPECT_EQ(line.tag, "gpu-reset[7781]");
  EXPECT_EQ(line.message, "GPU reset occurred: GPU-455d8f70");
}

TEST(kernel_log_line, truncated_prefixes_do_not_crash) {
  for (std::string_view text :
       {"", "[", "[ 12.", "[ 12.3", "<4", "<4>", "Oct 23 11:3", "Oct 23 11:38:02",
        "Oct 23 11:38:02 node1", "4,12,", "4,12,34", "2025-10-23T11:38:02"}) {
    auto line = split_kernel_log_line(text);
    EXPECT_LE(line.message.size(), text.size()) << text;
  }
}

TEST(kernel_log_line, syslog_wall_time_bsd_uses_the_given_year) {
  auto t = syslog_wall_time("Oct 23 11:38:02.207323", 2025);
  ASSERT_TRUE(t);
  EXPECT_EQ(format_rfc3339(*t), "2025-10-23T11:38:02.207323Z");
  auto padded = syslog_wall_time("Mar  1 00:00:00", 2024);
  ASSERT_TRUE(padded);
  EXPECT_EQ(format_rfc3339(*padded), "2024-03-01T00:00:00Z");
}

TEST(kernel_log_line, syslog_wall_time_iso_and_unknown) {
  auto t = syslog_wall_time("2025-10-23T11:38:02.5+00:00", 1970);
  ASSERT_TRUE(t);
  EXPECT_EQ(format_rfc3339(*t), "2025-10-23T11:38:02.500Z");
  EXPECT_FALSE(syslog_wall_time("[Thu Oct 23 11:38:02 2025]", 2025));
  EXPECT_FALSE(syslog_wall_time("", 2025));
}

} // namespace
} // namespace vigil::agent
