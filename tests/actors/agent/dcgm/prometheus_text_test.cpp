#include "actors/agent/dcgm/prometheus_text.hpp"

#include <cmath>
#include <random>

#include <gtest/gtest.h>

namespace vigil::agent {
namespace {

metric_sample only_sample(std::string_view text) {
  auto page = parse_prometheus_text(text);
  EXPECT_EQ(page.samples.size(), 1u) << text;
  EXPECT_EQ(page.skipped_lines, 0u)
    << (page.problems.empty() ? "" : page.problems[0].what);
  return page.samples.empty() ? metric_sample{} : page.samples.front();
}

std::string problem_of(std::string_view line) {
  auto page = parse_prometheus_text(line);
  EXPECT_TRUE(page.samples.empty()) << line;
  return page.problems.empty() ? "" : page.problems.front().what;
}

// dcgm-exporter's own shape: labels in its order, %f decimals, no timestamp.
TEST(prometheus_text, reads_a_dcgm_exporter_sample) {
  auto s = only_sample(
    "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"GPU-927d7444-b45a-7c49-8402-5e686e46a026\","
    "pci_bus_id=\"00000000:00:09.0\",device=\"nvidia0\",modelName=\"NVIDIA H100 80GB "
    "HBM3\",Hostname=\"node-1\",DCGM_FI_DRIVER_VERSION=\"535.183.01\"} 41.000000\n");
  EXPECT_EQ(s.name, "DCGM_FI_DEV_GPU_TEMP");
  EXPECT_EQ(s.labels.size(), 7u);
  ASSERT_NE(s.label("UUID"), nullptr);
  EXPECT_EQ(*s.label("UUID"), "GPU-927d7444-b45a-7c49-8402-5e686e46a026");
  EXPECT_EQ(*s.label("modelName"), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(s.label("pod"), nullptr);
  EXPECT_EQ(s.value, 41.0);
  EXPECT_FALSE(s.timestamp_ms);
}

// What the exposition format allows (prometheus/common's text parser cases):
// spaces around = and , and before {, a trailing comma, an empty label set,
// escapes, special values, timestamps, CRLF.
TEST(prometheus_text, accepts_every_form_the_format_allows) {
  EXPECT_EQ(only_sample("name2{ labelname = \"val1\" , }-Inf\n").value, -INFINITY);
  EXPECT_EQ(only_sample("no_labels{} 3").value, 3);
  EXPECT_EQ(only_sample("spaced {a=\"b\"}   7  \r\n").value, 7);
  EXPECT_TRUE(std::isnan(only_sample("x NaN").value));
  EXPECT_TRUE(std::isnan(only_sample("x Nan").value)); // prometheus-cpp writes Nan
  EXPECT_EQ(only_sample("x +Inf").value, INFINITY);
  EXPECT_EQ(only_sample("x 1.7560473e+07").value, 1.7560473e+07);
  EXPECT_EQ(only_sample("x -3e3").value, -3000);
  EXPECT_EQ(only_sample("x 08").value, 8);
  auto ts = only_sample("x{a=\"1\"} 2 -3982045");
  ASSERT_TRUE(ts.timestamp_ms);
  EXPECT_EQ(*ts.timestamp_ms, -3982045);
  auto esc = only_sample(R"(x{msg="a \"quoted\" \\ back\nslash"} 1)");
  EXPECT_EQ(*esc.label("msg"), "a \"quoted\" \\ back\nslash");
  // Old exporters put a space after each comma.
  auto old = only_sample("DCGM_FI_DEV_POWER_USAGE{gpu=\"0\", UUID=\"GPU-4063\", "
                         "device=\"nvidia0\"} 15.539000");
  EXPECT_EQ(*old.label("device"), "nvidia0");
  // dcgm-exporter's err_msg label carries spaces, parentheses, colons.
  auto xid =
    only_sample("DCGM_FI_DEV_XID_ERRORS{gpu=\"1\",UUID=\"GPU-1\",err_code=\"79\","
                "err_msg=\"GPU has fallen off the bus: (see dmesg) -- x/y\"} 79");
  EXPECT_EQ(*xid.label("err_msg"), "GPU has fallen off the bus: (see dmesg) -- x/y");
}

TEST(prometheus_text, keeps_types_and_skips_comments_and_blank_lines) {
  auto page =
    parse_prometheus_text("# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID.\n"
                          "# TYPE DCGM_FI_DEV_XID_ERRORS gauge\n"
                          "\n"
                          "   # a comment\n"
                          "#TYPE c counter\n"
                          "DCGM_FI_DEV_XID_ERRORS{gpu=\"0\"} 0\n"
                          "c 1");
  EXPECT_EQ(page.samples.size(), 2u);
  EXPECT_EQ(page.skipped_lines, 0u);
  EXPECT_EQ(page.type_of("DCGM_FI_DEV_XID_ERRORS"), "gauge");
  EXPECT_EQ(page.type_of("c"), "counter");
  EXPECT_EQ(page.type_of("nothing"), "");
}

// Each bad line is skipped with its number and what is wrong; the good lines
// around it are kept.
TEST(prometheus_text, names_what_is_wrong_with_a_bad_line) {
  EXPECT_EQ(problem_of("9bad 1"), "no metric name");
  EXPECT_EQ(problem_of("x{a=\"1\" 2"), "labels must be separated by ,");
  EXPECT_EQ(problem_of("x{a=\"1\",a=\"2\"} 2"), "label a appears twice");
  EXPECT_EQ(problem_of("x{a=\"unterminated} 2"), "label value is not terminated");
  EXPECT_EQ(problem_of("x{a=\"bad \\t escape\"} 2"),
            "label value has an unknown escape \\t");
  EXPECT_EQ(problem_of("x{a=1} 2"), "label a has no quoted value");
  EXPECT_EQ(problem_of("x{a} 2"), "label a has no =");
  EXPECT_EQ(problem_of("x{1a=\"b\"} 2"), "bad label name");
  EXPECT_EQ(problem_of("x{a=\"b\""), "label set is not closed with }");
  EXPECT_EQ(problem_of("x"), "x has no value");
  EXPECT_EQ(problem_of("x twelve"), "x: value 'twelve' is not a number");
  EXPECT_EQ(problem_of("x ++1"), "x: value '++1' is not a number");
  EXPECT_EQ(problem_of("x 1 soon"), "x: timestamp 'soon' is not an integer");
  EXPECT_EQ(problem_of("x 1 2 3"), "x: unexpected text after the value");

  auto page = parse_prometheus_text("good 1\nbad{ 2\nalso_good 3\n");
  EXPECT_EQ(page.samples.size(), 2u);
  ASSERT_EQ(page.problems.size(), 1u);
  EXPECT_EQ(page.problems[0].line, 2u);
  EXPECT_EQ(page.problems[0].to_string(), "line 2: bad label name");
}

TEST(prometheus_text, bounds_lines_labels_and_kept_problems) {
  metric_text_limits limits;
  limits.max_line_bytes = 32;
  limits.max_labels = 2;
  limits.max_problems = 1;
  auto page = parse_prometheus_text(
    "x{a=\"1\",b=\"2\",c=\"3\"} 1\n" + std::string(40, 'y') + " 1\nok 1\n", limits);
  EXPECT_EQ(page.samples.size(), 1u);
  EXPECT_EQ(page.skipped_lines, 2u);
  ASSERT_EQ(page.problems.size(), 1u); // only the first is kept
  EXPECT_EQ(page.problems[0].what, "more than 2 labels");
}

TEST(prometheus_text, splits_concatenated_scrapes_where_a_series_repeats) {
  auto page = parse_prometheus_text("a{g=\"0\"} 1\na{g=\"1\"} 1\nb 1\n"
                                    "a{g=\"0\"} 2\na{g=\"1\"} 2\nb 2\n"
                                    "a{g=\"0\"} 3\n");
  auto pages = split_concatenated_pages(std::move(page));
  ASSERT_EQ(pages.size(), 3u);
  EXPECT_EQ(pages[0].samples.size(), 3u);
  EXPECT_EQ(pages[1].samples.size(), 3u);
  EXPECT_EQ(pages[1].samples[0].value, 2);
  EXPECT_EQ(pages[2].samples.size(), 1u);
  // Labels in another order are the same series.
  auto reordered = split_concatenated_pages(
    parse_prometheus_text("a{x=\"1\",y=\"2\"} 1\na{y=\"2\",x=\"1\"} 2\n"));
  EXPECT_EQ(reordered.size(), 2u);
}

// Garbage never crashes the reader: random bytes, and every prefix of a
// real line.
TEST(prometheus_text, survives_garbage_and_truncation) {
  std::mt19937 random(7);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int round = 0; round < 200; ++round) {
    std::string text(static_cast<std::size_t>(random() % 300), '\0');
    for (auto& c : text)
      c = static_cast<char>(byte(random));
    auto page = parse_prometheus_text(text);
    EXPECT_LE(page.problems.size(), metric_text_limits{}.max_problems);
  }
  const std::string line =
    "DCGM_FI_DEV_XID_ERRORS{gpu=\"0\",UUID=\"GPU-1\",err_msg=\"a \\\"b\\\"\"} 79 123\n";
  for (std::size_t n = 0; n <= line.size(); ++n)
    parse_prometheus_text(line.substr(0, n));
}

} // namespace
} // namespace vigil::agent
