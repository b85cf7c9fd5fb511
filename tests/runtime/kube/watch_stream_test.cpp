// Watch stream framing and decoding: chunk borders anywhere, CRLF, empty
// lines, the line limit, and every malformed event named.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/kube/watch_stream.hpp"

namespace vigil::kube {
namespace {

std::vector<std::string> split_in_pieces(const std::string& body, std::size_t piece,
                                         std::size_t max_line = 1 << 20) {
  watch_line_splitter splitter(max_line);
  std::vector<std::string> lines;
  for (std::size_t at = 0; at < body.size(); at += piece)
    EXPECT_TRUE(
      splitter.feed(std::string_view(body).substr(at, piece), [&](std::string_view line) {
        lines.emplace_back(line);
        return true;
      }));
  return lines;
}

TEST(watch_line_splitter, lines_come_out_whole_wherever_the_chunks_end) {
  const std::string body = "{\"a\":1}\n\r\n{\"b\":2}\r\n\n{\"c\":3}\n{\"partial\"";
  for (std::size_t piece = 1; piece <= body.size(); ++piece) {
    auto lines = split_in_pieces(body, piece);
    ASSERT_EQ(lines.size(), 3u) << "piece " << piece;
    EXPECT_EQ(lines[0], "{\"a\":1}");
    EXPECT_EQ(lines[1], "{\"b\":2}");
    EXPECT_EQ(lines[2], "{\"c\":3}");
  }
}

TEST(watch_line_splitter, a_line_past_the_limit_ends_the_stream) {
  watch_line_splitter splitter(8);
  auto count = [](std::string_view) { return true; };
  EXPECT_TRUE(splitter.feed("12345", count));
  EXPECT_FALSE(splitter.feed("67890", count)); // unfinished, already 10 bytes
  EXPECT_EQ(splitter.pending_bytes(), 0u);
  watch_line_splitter whole(8);
  EXPECT_FALSE(whole.feed("123456789\n", count)); // one chunk, over the limit
}

TEST(watch_line_splitter, the_callback_stops_it) {
  watch_line_splitter splitter;
  int seen = 0;
  EXPECT_FALSE(
    splitter.feed("{}\n{}\n{}\n", [&](std::string_view) { return ++seen < 2; }));
  EXPECT_EQ(seen, 2);
}

TEST(decode_watch_line, reads_type_object_and_resource_version) {
  auto line = decode_watch_line(
    R"({"type":"MODIFIED","object":{"kind":"Node","metadata":{"name":"n1","resourceVersion":"42"}}})");
  ASSERT_TRUE(line) << line.error().to_string();
  EXPECT_EQ(line->type, "MODIFIED");
  EXPECT_EQ(line->resource_version, "42");
  EXPECT_EQ(line->object["metadata"]["name"], "n1");
  EXPECT_EQ(line->status_code, 0);
}

TEST(decode_watch_line, an_error_carries_its_status_code) {
  auto gone = decode_watch_line(
    R"({"type":"ERROR","object":{"kind":"Status","status":"Failure","reason":"Expired","code":410}})");
  ASSERT_TRUE(gone);
  EXPECT_EQ(gone->status_code, 410);
  // A code that is not an integer (or out of range) is no code, not a crash.
  auto odd = decode_watch_line(R"({"type":"ERROR","object":{"code":"410"}})");
  ASSERT_TRUE(odd);
  EXPECT_EQ(odd->status_code, 0);
  auto huge = decode_watch_line(R"({"type":"ERROR","object":{"code":99999999999}})");
  ASSERT_TRUE(huge);
  EXPECT_EQ(huge->status_code, 0);
}

TEST(decode_watch_line, malformed_lines_are_named) {
  struct bad {
    const char* line;
    const char* where;
  };
  for (auto [line, where] :
       {bad{"not json", "watch line"}, bad{"[1,2]", "watch line"},
        bad{R"({"object":{}})", "type"}, bad{R"({"type":7,"object":{}})", "type"},
        bad{R"({"type":"ADDED"})", "object"},
        bad{R"({"type":"ADDED","object":[]})", "object"},
        bad{R"({"type":"RENAMED","object":{}})", "type"}}) {
    auto decoded = decode_watch_line(line);
    ASSERT_FALSE(decoded) << line;
    EXPECT_EQ(decoded.error().where, where) << line;
  }
}

TEST(decode_watch_line, a_resource_version_that_is_not_a_string_is_ignored) {
  auto line =
    decode_watch_line(R"({"type":"ADDED","object":{"metadata":{"resourceVersion":42}}})");
  ASSERT_TRUE(line);
  EXPECT_EQ(line->resource_version, "");
  auto no_meta = decode_watch_line(R"({"type":"BOOKMARK","object":{"metadata":"x"}})");
  ASSERT_TRUE(no_meta);
}

} // namespace
} // namespace vigil::kube
