#include "runtime/logging.hpp"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

namespace vigil {
namespace {

TEST(logging, escapes_json) {
  std::string out;
  const std::string text = "a\"b\\c\nd\x01";
  append_json_escaped(out, text.data(), text.size());
  EXPECT_EQ(out, "a\\\"b\\\\c\\nd\\u0001");
  auto parsed = nlohmann::json::parse("\"" + out + "\"");
  EXPECT_EQ(parsed.get<std::string>(), text);
}

TEST(logging, json_lines_on_stderr) {
  setup_logging({log_format::json, "info"});
  testing::internal::CaptureStderr();
  component_logger("journal")->info("committed {} events \"ok\"", 3);
  component_logger("journal")->debug("not shown at info");
  const auto captured = testing::internal::GetCapturedStderr();
  auto line = nlohmann::json::parse(captured);
  EXPECT_EQ(line["component"], "journal");
  EXPECT_EQ(line["level"], "info");
  EXPECT_EQ(line["msg"], "committed 3 events \"ok\"");
  EXPECT_EQ(line["ts"].get<std::string>().back(), 'Z');
}

TEST(logging, text_format_for_people) {
  setup_logging({log_format::text, "debug"});
  testing::internal::CaptureStderr();
  component_logger("ingest")->debug("hello");
  const auto captured = testing::internal::GetCapturedStderr();
  EXPECT_NE(captured.find("[ingest] hello"), std::string::npos) << captured;
  setup_logging({});
}

} // namespace
} // namespace vigil
