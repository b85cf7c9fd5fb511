#include "actors/control/ingest/ingest_logic.hpp"

#include <fstream>
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include "tests/support/fresh_directory.hpp"

namespace vigil::control {
namespace {

using json = nlohmann::json;

// A valid event for `node`; `extra` is spliced in as more fields (",\"id\":\"x\"").
std::string event_json(const std::string& node, const std::string& extra = "") {
  return R"({"agent":"vigil-agent","componentClass":"GPU","checkName":"SysLogsXIDError",)"
         R"("isFatal":true,"errorCode":["79"],"nodeName":")"
         + node + "\"" + extra + "}";
}

std::vector<ingest_item> parse_ok(std::string_view body,
                                  std::string_view content_type = "application/x-ndjson",
                                  const ingest_limits& limits = {}) {
  auto items = parse_ingest_body(body, content_type, limits);
  EXPECT_TRUE(items.has_value()) << items.error().to_string();
  return items ? *items : std::vector<ingest_item>{};
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(parse_ingest_body, ndjson_keeps_valid_lines_and_names_the_invalid_ones) {
  const auto body = event_json("node-1") + "\n"
                    + R"({"agent":"a","componentClass":"GPU",)" + R"("checkName":"c"})"
                    + "\n" + event_json("node-3", R"(,"bogus":1)") + "\n"
                    + event_json("node-4") + "\n";
  auto items = parse_ok(body);
  ASSERT_EQ(items.size(), 4u);
  for (std::size_t i = 0; i < items.size(); ++i)
    EXPECT_EQ(items[i].line, i + 1);
  ASSERT_TRUE(items[0].event);
  EXPECT_EQ(items[0].event->node_name, "node-1");
  EXPECT_TRUE(items[0].error.empty());
  EXPECT_FALSE(items[1].event);
  EXPECT_EQ(items[1].error, "line 2: nodeName: missing or empty");
  EXPECT_FALSE(items[2].event);
  EXPECT_EQ(items[2].error, "line 3: bogus: unknown field");
  ASSERT_TRUE(items[3].event);
  EXPECT_EQ(items[3].event->node_name, "node-4");
}

TEST(parse_ingest_body, ndjson_invalid_json_is_a_per_line_error) {
  auto items = parse_ok(event_json("n1") + "\n{\"agent\": tru\n" + event_json("n3"));
  ASSERT_EQ(items.size(), 3u);
  EXPECT_TRUE(items[0].event);
  EXPECT_TRUE(contains(items[1].error, "line 2: invalid JSON")) << items[1].error;
  EXPECT_TRUE(items[2].event);
}

TEST(parse_ingest_body, ndjson_numbers_physical_lines_past_blank_lines_and_crlf) {
  const auto body = "\r\n" + event_json("n2") + "\r\n  \r\n\t\n" + event_json("n5")
                    + "\r\n{\"nodeName\":\"x\"}\r\n\r\n";
  auto items = parse_ok(body);
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(items[0].line, 2u);
  EXPECT_EQ(items[1].line, 5u);
  EXPECT_EQ(items[2].line, 6u);
  ASSERT_TRUE(items[0].event);
  EXPECT_EQ(items[0].event->node_name, "n2");
  ASSERT_TRUE(items[1].event);
  EXPECT_EQ(items[1].event->node_name, "n5");
  EXPECT_EQ(items[2].error, "line 6: agent: missing or empty");
}

TEST(parse_ingest_body, last_line_without_newline_counts) {
  auto items = parse_ok(event_json("n1") + "\n" + event_json("n2"));
  ASSERT_EQ(items.size(), 2u);
  EXPECT_TRUE(items[1].event);
}

TEST(parse_ingest_body, json_array_numbers_elements_and_keeps_valid_ones) {
  const auto body = "\n [ " + event_json("n1") + ",\n  {\"agent\":\"a\"} , "
                    + event_json("n3", R"(,"id":"evt-3")") + "\n]\n";
  auto items = parse_ok(body, "application/json");
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(items[0].line, 1u);
  EXPECT_EQ(items[1].line, 2u);
  EXPECT_EQ(items[2].line, 3u);
  ASSERT_TRUE(items[0].event);
  EXPECT_EQ(items[0].event->node_name, "n1");
  EXPECT_EQ(items[1].error, "element 2: nodeName: missing or empty");
  ASSERT_TRUE(items[2].event);
  EXPECT_EQ(items[2].event->id, "evt-3");
}

// `curl -H 'Content-Type: application/json' -d @event.json`: one object,
// pretty-printed, with NVSentinel's enums as protobuf numbers (Go's
// encoding/json writes them so) and its customRecommendedAction.
TEST(parse_ingest_body, one_pretty_printed_object_is_one_event) {
  const std::string body = R"({
  "version": 1,
  "agent": "gpu-health-monitor",
  "componentClass": "GPU",
  "checkName": "GpuMemWatch",
  "isFatal": true,
  "isHealthy": false,
  "recommendedAction": 27,
  "customRecommendedAction": "GPU_THERMAL_QUALIFICATION",
  "errorCode": [ "DCGM_FR_VOLATILE_DBE_DETECTED" ],
  "entitiesImpacted": [
    { "entityType": "GPU", "entityValue": "0" }
  ],
  "nodeName": "gpu-node-7",
  "processingStrategy": 2
}
)";
  auto items = parse_ok(body, "application/json");
  ASSERT_EQ(items.size(), 1u);
  ASSERT_TRUE(items[0].event) << items[0].error;
  const auto& e = *items[0].event;
  EXPECT_EQ(e.node_name, "gpu-node-7");
  EXPECT_EQ(e.action, recommended_action::custom);
  EXPECT_EQ(e.custom_action, "GPU_THERMAL_QUALIFICATION");
  EXPECT_EQ(e.strategy, processing_strategy::store_only);
  EXPECT_EQ(e.entities.size(), 1u);
  // A pretty object that is not valid JSON is read as NDJSON: its lines are
  // named one by one, nothing crashes.
  auto broken = parse_ok("{\n  \"agent\": \"a\",\n", "application/json");
  EXPECT_EQ(broken.size(), 2u);
  EXPECT_FALSE(broken[0].event);
}

TEST(parse_ingest_body, enums_as_numbers_or_names_in_either_form) {
  for (const auto& [field, expected] : std::vector<std::pair<std::string, std::string>>{
         {R"("processingStrategy":0)", "EXECUTE_REMEDIATION"},
         {R"("processingStrategy":1)", "EXECUTE_REMEDIATION"},
         {R"("processingStrategy":"2")", "STORE_ONLY"},
         {R"("processingStrategy":3)", "STORE_AND_ANALYSE"},
         {R"("processingStrategy":"STORE_ONLY")", "STORE_ONLY"},
         {R"("processingStrategy":"UNSPECIFIED")", "EXECUTE_REMEDIATION"}}) {
    auto items = parse_ok(event_json("n1", "," + field));
    ASSERT_TRUE(items[0].event) << field << ": " << items[0].error;
    EXPECT_EQ(to_string(items[0].event->strategy), expected) << field;
  }
  for (const auto& [field, expected] : std::vector<std::pair<std::string, std::string>>{
         {R"("recommendedAction":2)", "COMPONENT_RESET"},
         {R"("recommendedAction":"24")", "RESTART_BM"},
         {R"("recommendedAction":25)", "REPLACE_VM"},
         {R"("recommendedAction":"CONTACT_SUPPORT")", "CONTACT_SUPPORT"}}) {
    auto items = parse_ok(event_json("n1", "," + field));
    ASSERT_TRUE(items[0].event) << field << ": " << items[0].error;
    EXPECT_EQ(to_string(items[0].event->action), expected) << field;
  }
  auto bad = parse_ok(event_json("n1", R"(,"processingStrategy":7)") + "\n"
                      + event_json("n1", R"(,"processingStrategy":true)"));
  EXPECT_EQ(bad[0].error, "line 1: processingStrategy: unknown processing strategy 7");
  EXPECT_TRUE(contains(bad[1].error, "a strategy name or number")) << bad[1].error;
}

TEST(parse_ingest_body, array_elements_are_checked_as_sent) {
  // Strings holding brackets and commas, a non-object element, and duplicate
  // keys (which a DOM round trip would silently merge).
  const auto body = "[" + event_json("n,]}[{\\\"1") + ", 42, [1,2], "
                    + event_json("n4", R"(,"nodeName":"again")") + "]";
  auto items = parse_ok(body, "");
  ASSERT_EQ(items.size(), 4u);
  ASSERT_TRUE(items[0].event) << items[0].error;
  EXPECT_EQ(items[0].event->node_name, "n,]}[{\"1");
  EXPECT_EQ(items[1].error, "element 2: expected a JSON object, got a number");
  EXPECT_EQ(items[2].error, "element 3: expected a JSON object, got an array");
  EXPECT_TRUE(contains(items[3].error, "element 4: nodeName: duplicate key"))
    << items[3].error;
}

TEST(parse_ingest_body, array_that_is_not_valid_json_fails_the_request) {
  for (std::string body : {"[" + event_json("n1") + ",", "[" + event_json("n1") + "] x",
                           "[" + event_json("n1") + " " + event_json("n2") + "]",
                           "[" + event_json("n1") + ",]", std::string("[{\"a\":tru}]")}) {
    auto items = parse_ingest_body(body, "application/json", {});
    ASSERT_FALSE(items.has_value()) << body;
    EXPECT_EQ(items.error().where, body_where);
    EXPECT_TRUE(contains(items.error().what, "not a valid JSON array: parse error"))
      << items.error().what;
    EXPECT_EQ(request_failure_status(items.error()), 400);
  }
}

TEST(parse_ingest_body, a_leading_byte_order_mark_is_ignored) {
  auto items = parse_ok("\xEF\xBB\xBF[" + event_json("n1") + "]");
  ASSERT_EQ(items.size(), 1u);
  EXPECT_TRUE(items[0].event);
  items = parse_ok("\xEF\xBB\xBF" + event_json("n1") + "\n");
  ASSERT_EQ(items.size(), 1u);
  EXPECT_TRUE(items[0].event);
}

TEST(parse_ingest_body, body_over_the_limit_fails_with_413) {
  ingest_limits limits;
  const auto body = event_json("n1") + "\n" + event_json("n2") + "\n";
  limits.max_body_bytes = body.size();
  EXPECT_TRUE(parse_ingest_body(body, "", limits).has_value());
  limits.max_body_bytes = body.size() - 1;
  auto items = parse_ingest_body(body, "", limits);
  ASSERT_FALSE(items.has_value());
  EXPECT_EQ(items.error().where, body_size_where);
  EXPECT_TRUE(contains(items.error().what, std::to_string(body.size()) + " bytes"));
  EXPECT_EQ(request_failure_status(items.error()), 413);
}

TEST(parse_ingest_body, line_over_the_limit_is_a_per_item_error) {
  ingest_limits limits;
  const auto small = event_json("n1");
  const auto big = event_json("n2", R"(,"message":")" + std::string(200, 'x') + "\"");
  limits.max_line_bytes = small.size();
  auto items = parse_ok(small + "\r\n" + big + "\n" + small, "", limits);
  ASSERT_EQ(items.size(), 3u);
  EXPECT_TRUE(items[0].event);
  EXPECT_EQ(items[1].error, "line 2: " + std::to_string(big.size())
                              + " bytes, over the limit of "
                              + std::to_string(small.size()) + " bytes per line");
  EXPECT_TRUE(items[2].event);

  items = parse_ok("[" + small + "," + big + "]", "", limits);
  ASSERT_EQ(items.size(), 2u);
  EXPECT_TRUE(items[0].event);
  EXPECT_TRUE(contains(items[1].error, "element 2: " + std::to_string(big.size())
                                         + " bytes, over the limit"));
}

TEST(parse_ingest_body, event_limits_from_config_apply_per_line) {
  ingest_limits limits;
  limits.event.max_message_bytes = 10;
  auto items =
    parse_ok(event_json("n1", R"(,"message":"far too long a message")"), "", limits);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_TRUE(contains(items[0].error, "line 1: message: is 22 bytes, over the limit"))
    << items[0].error;
}

TEST(parse_ingest_body, too_many_events_fail_with_413) {
  ingest_limits limits;
  limits.max_events_per_request = 3;
  std::string ndjson;
  std::string array = "[";
  for (int i = 0; i < 3; ++i) {
    ndjson += event_json("n" + std::to_string(i)) + "\n\n";
    array += (i > 0 ? "," : "") + event_json("n" + std::to_string(i));
  }
  EXPECT_EQ(parse_ok(ndjson, "", limits).size(), 3u);
  EXPECT_EQ(parse_ok(array + "]", "", limits).size(), 3u);
  for (const auto& body : {ndjson + "garbage\n", array + ",1]"}) {
    auto items = parse_ingest_body(body, "", limits);
    ASSERT_FALSE(items.has_value()) << body;
    EXPECT_EQ(items.error().to_string(),
              "event count: over the limit of 3 events per request");
    EXPECT_EQ(request_failure_status(items.error()), 413);
  }
}

TEST(parse_ingest_body, a_body_without_events_fails_with_400) {
  for (std::string_view body : {"", "\n\r\n  \t\n", "[]", " [ \n ] "}) {
    auto items = parse_ingest_body(body, "", {});
    ASSERT_FALSE(items.has_value()) << body;
    EXPECT_EQ(items.error().to_string(), "body: no events");
    EXPECT_EQ(request_failure_status(items.error()), 400);
  }
}

TEST(parse_ingest_body, content_types) {
  const auto body = event_json("n1");
  for (std::string_view type :
       {"", "application/json", "application/x-ndjson", "application/jsonl",
        "Application/JSON; charset=utf-8", " application/x-ndjson ;charset=UTF-8"})
    EXPECT_TRUE(parse_ingest_body(body, type, {}).has_value()) << type;
  for (std::string_view type : {"text/plain", "application/xml", "application/json-seq",
                                "multipart/form-data; boundary=x"}) {
    auto items = parse_ingest_body(body, type, {});
    ASSERT_FALSE(items.has_value()) << type;
    EXPECT_EQ(items.error().where, content_type_where);
    EXPECT_EQ(request_failure_status(items.error()), 415);
  }
  EXPECT_EQ(parse_ingest_body(body, "text/plain; charset=utf-8", {}).error().to_string(),
            "Content-Type: unsupported media type \"text/plain\"; send "
            "application/x-ndjson or application/json");
}

TEST(derive_event_id, stable_distinct_and_independent_of_key_spelling) {
  auto a = parse_ok(event_json("n1"));
  auto a_again = parse_ok(event_json("n1"));
  auto b = parse_ok(event_json("n2"));
  auto snake = parse_ok(R"({"node_name":"n1","error_code":["79"],"is_fatal":true,)"
                        R"("check_name":"SysLogsXIDError","component_class":"GPU",)"
                        R"("agent":"vigil-agent"})");
  ASSERT_TRUE(a[0].event && a_again[0].event && b[0].event && snake[0].event);
  const auto& id = a[0].event->id;
  ASSERT_EQ(id.size(), 23u) << id;
  EXPECT_EQ(id.rfind("ingest-", 0), 0u) << id;
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef", 7), std::string::npos) << id;
  EXPECT_EQ(a_again[0].event->id, id);
  EXPECT_EQ(snake[0].event->id, id);
  EXPECT_NE(b[0].event->id, id);
  EXPECT_EQ(derive_event_id(*a[0].event), id); // the assigned id is left out of the hash

  health_event e = *a[0].event;
  e.is_healthy = true;
  EXPECT_NE(derive_event_id(e), id);
  e = *a[0].event;
  e.message = "more";
  EXPECT_NE(derive_event_id(e), id);
}

TEST(derive_event_id, an_explicit_id_is_kept) {
  auto items = parse_ok(event_json("n1", R"(,"id":"agent-0123")"));
  ASSERT_TRUE(items[0].event);
  EXPECT_EQ(items[0].event->id, "agent-0123");
}

TEST(bearer_token_matches, checks_scheme_and_token) {
  const std::string token = "s3cr3t-token.value";
  EXPECT_TRUE(bearer_token_matches("Bearer s3cr3t-token.value", token));
  EXPECT_TRUE(bearer_token_matches("bearer s3cr3t-token.value", token));
  EXPECT_TRUE(bearer_token_matches("BEARER  s3cr3t-token.value ", token));
  EXPECT_FALSE(bearer_token_matches("Bearer s3cr3t-token.valuf", token)); // same length
  EXPECT_FALSE(bearer_token_matches("Bearer s3cr3t-token.valu", token));  // shorter
  EXPECT_FALSE(bearer_token_matches("Bearer s3cr3t-token.value2", token));
  EXPECT_FALSE(
    bearer_token_matches("Bearer s3cr3t-token.values3cr3t-token.value", token));
  EXPECT_FALSE(bearer_token_matches("", token));
  EXPECT_FALSE(bearer_token_matches("Bearer", token));
  EXPECT_FALSE(bearer_token_matches("Bearer ", token));
  EXPECT_FALSE(bearer_token_matches("Bearers3cr3t-token.value", token));
  EXPECT_FALSE(bearer_token_matches("Basic s3cr3t-token.value", token));
  EXPECT_FALSE(bearer_token_matches("s3cr3t-token.value", token));
  EXPECT_FALSE(
    bearer_token_matches(std::string_view("Bearer s3cr3t-token.value\0", 26), token));
}

TEST(bearer_token_matches, an_empty_expected_token_disables_authentication) {
  EXPECT_TRUE(bearer_token_matches("", ""));
  EXPECT_TRUE(bearer_token_matches("Bearer anything", ""));
  EXPECT_TRUE(bearer_token_matches("Basic Zm9vOmJhcg==", ""));
}

item_result result(std::size_t line, item_status status, std::string id = "",
                   std::string error = "") {
  return item_result{line, std::move(id), status, std::move(error)};
}

TEST(build_ingest_reply, all_accepted_is_200_with_counts_and_results) {
  auto reply = build_ingest_reply(
    {result(1, item_status::accepted, "a"), result(2, item_status::duplicate, "b")}, 5);
  EXPECT_EQ(reply.http_status, 200);
  EXPECT_FALSE(reply.retry_after_seconds);
  EXPECT_EQ(reply.body, R"({"accepted":1,"duplicates":1,"rejected":0,"unavailable":0,)"
                        R"("results":[{"line":1,"id":"a","status":"accepted"},)"
                        R"({"line":2,"id":"b","status":"duplicate"}]})");
}

TEST(build_ingest_reply, mixed_valid_and_invalid_is_200_with_per_line_reasons) {
  auto reply = build_ingest_reply(
    {result(1, item_status::accepted, "a"),
     result(3, item_status::rejected, "", "line 3: nodeName: missing or empty")},
    5);
  EXPECT_EQ(reply.http_status, 200);
  auto body = json::parse(reply.body);
  EXPECT_EQ(body["accepted"], 1);
  EXPECT_EQ(body["rejected"], 1);
  ASSERT_EQ(body["results"].size(), 2u);
  EXPECT_EQ(body["results"][1],
            json::parse(R"({"line":3,"status":"rejected",)"
                        R"("error":"line 3: nodeName: missing or empty"})"));
}

TEST(build_ingest_reply, only_rejected_is_400_and_duplicates_alone_are_200) {
  EXPECT_EQ(build_ingest_reply({result(1, item_status::rejected, "", "x"),
                                result(2, item_status::rejected, "", "y")},
                               5)
              .http_status,
            400);
  EXPECT_EQ(build_ingest_reply({}, 5).http_status, 400);
  EXPECT_EQ(build_ingest_reply({result(1, item_status::rejected, "", "x"),
                                result(2, item_status::duplicate, "d")},
                               5)
              .http_status,
            200);
}

TEST(build_ingest_reply, any_unavailable_is_503_with_retry_after) {
  auto reply = build_ingest_reply({result(1, item_status::accepted, "a"),
                                   result(2, item_status::unavailable, "b"),
                                   result(3, item_status::rejected, "", "x")},
                                  7);
  EXPECT_EQ(reply.http_status, 503);
  EXPECT_EQ(reply.retry_after_seconds, 7);
  auto body = json::parse(reply.body);
  EXPECT_EQ(body["accepted"], 1);
  EXPECT_EQ(body["unavailable"], 1);
  EXPECT_EQ(body["rejected"], 1);
  EXPECT_EQ(body["results"][1]["status"], "unavailable");
  EXPECT_EQ(
    build_ingest_reply({result(1, item_status::unavailable, "a")}, 0).retry_after_seconds,
    1);
}

TEST(error_reply, is_an_error_object_with_the_status) {
  auto reply = error_reply(401, "missing or wrong bearer token");
  EXPECT_EQ(reply.http_status, 401);
  EXPECT_EQ(reply.body, R"({"error":"missing or wrong bearer token"})");
  reply = request_failure_reply(failure{std::string(body_size_where), "9 bytes"});
  EXPECT_EQ(reply.http_status, 413);
  EXPECT_EQ(reply.body, R"({"error":"body size: 9 bytes"})");
  reply = error_reply(400, std::string_view("bad \xff\xfe \0 \"", 9));
  EXPECT_TRUE(json::accept(reply.body));
}

std::string write_file(const std::string& dir, const std::string& name,
                       const std::string& text) {
  const auto path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(load_token_file, trims_surrounding_whitespace) {
  const auto dir = test::fresh_directory();
  auto token = load_token_file(write_file(dir, "token", "abc.DEF-123\n"));
  ASSERT_TRUE(token.has_value()) << token.error().to_string();
  EXPECT_EQ(*token, "abc.DEF-123");
  token = load_token_file(write_file(dir, "token2", "  abc \r\n\n"));
  ASSERT_TRUE(token.has_value());
  EXPECT_EQ(*token, "abc");
}

TEST(load_token_file, fails_naming_the_path) {
  const auto dir = test::fresh_directory();
  const auto expect_failure = [](const std::string& path, const std::string& what) {
    auto token = load_token_file(path);
    ASSERT_FALSE(token.has_value()) << path;
    EXPECT_EQ(token.error().where, path);
    EXPECT_TRUE(contains(token.error().what, what)) << token.error().what;
  };
  expect_failure(dir + "/missing", "cannot read the token");
  expect_failure(dir, "cannot read the token"); // a directory
  expect_failure(write_file(dir, "empty", ""), "empty token");
  expect_failure(write_file(dir, "blank", " \n\r\n"), "empty token");
  expect_failure(write_file(dir, "two", "abc\ndef\n"), "whitespace or control");
  expect_failure(write_file(dir, "huge", std::string(70000, 'a')), "not a token");
}

// Every item is either an event or an error, and the reply built from them is
// valid JSON, whatever the body was.
void expect_graceful(std::string_view body, const ingest_limits& limits = {}) {
  expected<std::vector<ingest_item>> items = failure{};
  ASSERT_NO_THROW(items = parse_ingest_body(body, "", limits));
  std::vector<item_result> results;
  if (items) {
    for (const auto& item : *items) {
      EXPECT_NE(item.event.has_value(), !item.error.empty());
      EXPECT_LE(item.error.size(), 600u);
      results.push_back(item.event
                          ? result(item.line, item_status::accepted, item.event->id)
                          : result(item.line, item_status::rejected, "", item.error));
    }
  } else {
    results.push_back(result(0, item_status::rejected, "", items.error().to_string()));
  }
  ingest_reply reply;
  ASSERT_NO_THROW(reply = build_ingest_reply(results, 1));
  EXPECT_TRUE(json::accept(reply.body));
  if (!items) {
    EXPECT_TRUE(json::accept(request_failure_reply(items.error()).body));
  }
}

TEST(parse_ingest_body, random_bytes_never_throw) {
  std::mt19937 random(7);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<int> length(0, 300);
  const std::string alphabet =
    "{}[]\",:\\ \n\r\tae0-1.E+nulltrue" + std::string(1, '\0') + "\xff\xc3";
  std::uniform_int_distribution<std::size_t> pick(0, alphabet.size() - 1);
  for (int round = 0; round < 3000; ++round) {
    std::string body(static_cast<std::size_t>(length(random)), '\0');
    for (auto& c : body)
      c = static_cast<char>(round % 2 == 0 ? byte(random) : alphabet[pick(random)]);
    if (round % 3 == 0)
      body.insert(0, "[");
    SCOPED_TRACE(round);
    expect_graceful(body);
  }
}

TEST(parse_ingest_body, truncated_and_mutated_documents_never_throw) {
  const auto valid =
    event_json("n1", R"(,"entitiesImpacted":[{"entityType":"PCI","entityValue":"0:3"}],)"
                     R"("generatedTimestamp":{"seconds":"1761219482","nanos":5},)"
                     R"("metadata":{"k":"v"},"drainOverrides":{"skip":true})");
  const std::string ndjson = valid + "\n" + valid + "\n";
  const std::string array = "[" + valid + "," + valid + "]";
  for (const auto* body : {&ndjson, &array}) {
    for (std::size_t n = 0; n <= body->size(); ++n)
      expect_graceful(std::string_view(*body).substr(0, n));
    std::mt19937 random(11);
    for (int round = 0; round < 500; ++round) {
      auto mutated = *body;
      mutated[random() % mutated.size()] = static_cast<char>(random() % 256);
      expect_graceful(mutated);
    }
  }
}

TEST(parse_ingest_body, deep_nesting_never_overflows_the_stack) {
  const std::size_t depth = 1'000'000;
  expect_graceful(std::string(depth, '['));
  expect_graceful(std::string(depth, '[') + std::string(depth, ']'));
  expect_graceful("{\"metadata\":" + std::string(depth, '[') + "\n");
  ingest_limits unlimited;
  unlimited.max_line_bytes = unlimited.event.max_event_bytes = 1 << 22;
  const std::size_t inner = 200'000;
  const auto deep = std::string(inner, '[') + std::string(inner, ']');
  expect_graceful("[" + deep + "]", unlimited);
  expect_graceful(R"({"metadata":)" + deep + "}\n", unlimited);
  expect_graceful("[{\"a\":" + deep + "}]", unlimited);
  auto items = parse_ok("[" + event_json("n1") + "," + deep + "]", "", unlimited);
  ASSERT_EQ(items.size(), 2u);
  EXPECT_TRUE(items[0].event);
  EXPECT_EQ(items[1].error, "element 2: expected a JSON object, got an array");
}

TEST(parse_ingest_body, huge_numbers_nul_bytes_and_invalid_utf8_are_per_item_errors) {
  const std::string nul("\0", 1);
  const std::vector<std::string> lines = {
    event_json("n1", R"(,"version":1e999999)"),
    event_json("n1", R"(,"recommendedAction":123456789012345678901234567890)"),
    event_json("n1", R"(,"generatedTimestamp":{"seconds":99999999999999999999})"),
    event_json("n1", R"(,"generatedTimestamp":{"seconds":-1e308,"nanos":1})"),
    event_json("n1" + nul),
    event_json("n1") + nul,
    event_json("n1\xff\xfe"),
    event_json("n1", ",\"message\":\"\xc3\x28\""),
    event_json("n1", R"(,"message":"\ud800")"),
  };
  std::string body;
  for (const auto& line : lines)
    body += line + "\n";
  expect_graceful(body);
  auto items = parse_ok(body);
  ASSERT_EQ(items.size(), lines.size());
  for (const auto& item : items)
    EXPECT_FALSE(item.event) << "line " << item.line << " was accepted";
  EXPECT_TRUE(contains(items[0].error, "line 1: invalid JSON: number overflow"))
    << items[0].error;
  EXPECT_EQ(items[4].error, "line 5: invalid JSON: NUL byte at offset "
                              + std::to_string(event_json("n1").size() - 2));
  EXPECT_EQ(items[5].error, "line 6: invalid JSON: NUL byte at offset "
                              + std::to_string(event_json("n1").size()));
  EXPECT_TRUE(contains(items[1].error, "line 2: recommendedAction")) << items[1].error;
}

TEST(parse_ingest_body, a_nul_byte_after_an_array_fails_the_request) {
  // nlohmann's parser would stop at the NUL and accept the array.
  auto items = parse_ingest_body(
    "[" + event_json("n1") + "]" + std::string(1, '\0') + "junk", "", {});
  ASSERT_FALSE(items.has_value());
  EXPECT_TRUE(
    contains(items.error().to_string(), "body: not a valid JSON array: NUL byte"))
    << items.error().to_string();
}

TEST(parse_ingest_body, a_long_bad_token_gives_a_bounded_error) {
  const auto body = "{\"agent\":\"" + std::string(60000, 'x') + "\n";
  auto items = parse_ok(body);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_TRUE(contains(items[0].error, "line 1: invalid JSON"));
  EXPECT_LE(items[0].error.size(), 515u);
}

TEST(admit_request, sheds_new_appends_past_either_limit_only) {
  using std::chrono::milliseconds;
  admission_limits limits{100, milliseconds{2500}};
  auto pressure = [](std::size_t n, int age_ms) {
    return append_pressure{n, milliseconds{age_ms}};
  };
  EXPECT_TRUE(admit_request(pressure(0, 0), 10, limits));
  EXPECT_TRUE(admit_request(pressure(90, 100), 10, limits));  // exactly at the limit
  EXPECT_FALSE(admit_request(pressure(91, 100), 10, limits)); // past it
  EXPECT_TRUE(
    admit_request(pressure(5, 2500), 10, limits)); // the oldest at the age limit
  EXPECT_FALSE(admit_request(pressure(5, 2501), 10, limits)); // waited too long
  EXPECT_TRUE(admit_request(pressure(500, 9000), 0, limits)); // resends start no append
  EXPECT_TRUE(admit_request(pressure(0, 0), 5000, limits));   // nothing in flight
  EXPECT_FALSE(admit_request(pressure(1, 0), 5000, limits));
}

TEST(resent_ids, keeps_the_newest_ids_and_forgets_the_oldest_first) {
  resent_ids ids{3};
  for (const char* id : {"a", "b", "c", "b"})
    ids.remember(id);
  EXPECT_EQ(ids.size(), 3u);
  ids.remember("d"); // "a" goes: the oldest remembered
  EXPECT_FALSE(ids.contains("a"));
  for (const char* id : {"b", "c", "d"})
    EXPECT_TRUE(ids.contains(id)) << id;
  resent_ids none{0};
  none.remember("a");
  EXPECT_FALSE(none.contains("a"));
}

} // namespace
} // namespace vigil::control
