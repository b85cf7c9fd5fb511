#include "messages/health_event.hpp"

#include <gtest/gtest.h>

namespace vigil {
namespace {

// The unhealthy event of seed 000 §1.1 as NVSentinel stores it in MongoDB
// (all-lowercase keys, Long values written as numbers, null sub-objects).
constexpr const char* seed_000_unhealthy = R"({
  "version": 1,
  "agent": "syslog-health-monitor",
  "componentclass": "GPU",
  "checkname": "SysLogsXIDError",
  "isfatal": true,
  "ishealthy": false,
  "message": "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR",
  "recommendedaction": 2,
  "errorcode": ["48"],
  "entitiesimpacted": [
    {"entitytype": "PCI", "entityvalue": "0000:03:00"},
    {"entitytype": "GPU_UUID", "entityvalue": "GPU-455d8f70-2051-db6c-0430-ffc457bff834"}
  ],
  "metadata": null,
  "generatedtimestamp": {"seconds": 1761219482, "nanos": 207323127},
  "nodename": "node1",
  "quarantineoverrides": null,
  "drainoverrides": null
})";

health_event sample_event() {
  health_event e;
  e.id = "evt-1";
  e.agent = "vigil-agent";
  e.component_class = "GPU";
  e.check_name = "SysLogsXIDError";
  e.is_fatal = true;
  e.message = "Xid 79: GPU has fallen off the bus";
  e.action = recommended_action::restart_bm;
  e.error_codes = {"79"};
  e.entities = {{"PCI", "0000:b3:00"}, {"GPU_UUID", "GPU-1"}};
  e.metadata = {{"count", "3"}, {"serial", "1324023049334"}};
  e.generated = from_unix(1761219482, 207323127);
  e.node_name = "gpu-node-7";
  e.quarantine_overrides = stage_override{true, false};
  e.drain_overrides = stage_override{false, true};
  e.strategy = processing_strategy::store_and_analyse;
  return e;
}

// Decodes `json` and expects a failure naming `where` with `what` in it.
void expect_failure(const std::string& json, const std::string& where,
                    const std::string& what, const decode_limits& limits = {}) {
  auto decoded = decode_health_event(json, limits);
  ASSERT_FALSE(decoded.has_value()) << json;
  EXPECT_EQ(decoded.error().where, where) << decoded.error().to_string();
  EXPECT_NE(decoded.error().what.find(what), std::string::npos)
    << decoded.error().to_string();
}

std::string minimal(const std::string& extra = "") {
  return R"({"agent":"a","componentClass":"GPU","checkName":"c","nodeName":"n")" + extra
         + "}";
}

TEST(health_event, seed_000_example_decodes) {
  auto e = decode_health_event(seed_000_unhealthy);
  ASSERT_TRUE(e.has_value()) << e.error().to_string();
  EXPECT_EQ(e->agent, "syslog-health-monitor");
  EXPECT_EQ(e->component_class, "GPU");
  EXPECT_EQ(e->check_name, "SysLogsXIDError");
  EXPECT_TRUE(e->is_fatal);
  EXPECT_FALSE(e->is_healthy);
  EXPECT_EQ(e->action, recommended_action::component_reset);
  EXPECT_EQ(e->error_codes, std::vector<std::string>{"48"});
  ASSERT_EQ(e->entities.size(), 2u);
  EXPECT_EQ(e->entities[1].type, "GPU_UUID");
  EXPECT_EQ(e->entities[1].value, "GPU-455d8f70-2051-db6c-0430-ffc457bff834");
  EXPECT_EQ(format_rfc3339(*e->generated), "2025-10-23T11:38:02.207323127Z");
  EXPECT_EQ(e->node_name, "node1");
  EXPECT_FALSE(e->quarantine_overrides.has_value());
  EXPECT_EQ(e->strategy, processing_strategy::execute_remediation);
}

TEST(health_event, round_trip_is_exact) {
  const auto e = sample_event();
  auto decoded = decode_health_event(encode_health_event(e));
  ASSERT_TRUE(decoded.has_value()) << decoded.error().to_string();
  EXPECT_EQ(*decoded, e);
  EXPECT_EQ(encode_health_event(*decoded), encode_health_event(e));
}

TEST(health_event, round_trip_of_minimal_event) {
  auto e = decode_health_event(minimal());
  ASSERT_TRUE(e.has_value());
  auto again = decode_health_event(encode_health_event(*e));
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(*again, *e);
  EXPECT_FALSE(again->generated.has_value());
}

TEST(health_event, writes_camel_case_and_action_name) {
  const auto text = encode_health_event(sample_event());
  for (const char* key :
       {"\"componentClass\"", "\"checkName\"", "\"isFatal\"", "\"isHealthy\"",
        "\"recommendedAction\":\"RESTART_BM\"", "\"errorCode\"", "\"entitiesImpacted\"",
        "\"entityType\"", "\"generatedTimestamp\":\"2025-10-23T11:38:02.207323127Z\"",
        "\"nodeName\"", "\"quarantineOverrides\"", "\"drainOverrides\"",
        "\"processingStrategy\":\"STORE_AND_ANALYSE\""})
    EXPECT_NE(text.find(key), std::string::npos) << key << " in " << text;
}

TEST(health_event, actions_by_name_and_number) {
  const std::pair<const char*, recommended_action> cases[] = {
    {"0", recommended_action::none},
    {"2", recommended_action::component_reset},
    {"5", recommended_action::contact_support},
    {"6", recommended_action::run_fielddiag},
    {"15", recommended_action::restart_vm},
    {"24", recommended_action::restart_bm},
    {"25", recommended_action::replace_vm},
    {"26", recommended_action::run_dcgmeud},
    {"27", recommended_action::custom},
    {"99", recommended_action::unknown},
  };
  for (const auto& [number, action] : cases) {
    auto by_number =
      decode_health_event(minimal(R"(,"recommendedAction":)" + std::string(number)));
    ASSERT_TRUE(by_number.has_value()) << number;
    EXPECT_EQ(by_number->action, action);
    auto by_name = decode_health_event(
      minimal(R"(,"recommendedAction":")" + std::string(to_string(action)) + "\""));
    ASSERT_TRUE(by_name.has_value()) << to_string(action);
    EXPECT_EQ(by_name->action, action);
  }
}

TEST(health_event, timestamp_forms) {
  auto rfc = decode_health_event(
    minimal(R"(,"generatedTimestamp":"2025-10-23T13:38:02.5+02:00")"));
  ASSERT_TRUE(rfc.has_value()) << rfc.error().to_string();
  EXPECT_EQ(format_rfc3339(*rfc->generated), "2025-10-23T11:38:02.500Z");
  // protobuf's JSON mapping writes int64 seconds as a string
  auto proto = decode_health_event(
    minimal(R"(,"generatedTimestamp":{"seconds":"1761219482","nanos":0})"));
  ASSERT_TRUE(proto.has_value()) << proto.error().to_string();
  EXPECT_EQ(unix_seconds(*proto->generated), 1761219482);
}

TEST(health_event, snake_case_keys_are_accepted) {
  auto e = decode_health_event(
    R"({"agent":"a","component_class":"NIC","check_name":"c","node_name":"n","is_fatal":true})");
  ASSERT_TRUE(e.has_value()) << e.error().to_string();
  EXPECT_EQ(e->component_class, "NIC");
  EXPECT_TRUE(e->is_fatal);
}

TEST(health_event, missing_required_fields_are_named) {
  expect_failure(R"({"agent":"a","componentClass":"GPU","checkName":"c"})", "nodeName",
                 "missing");
  expect_failure(R"({"agent":"a","componentClass":"GPU","checkName":"c","nodeName":""})",
                 "nodeName", "missing or empty");
  expect_failure(R"({"componentClass":"GPU","checkName":"c","nodeName":"n"})", "agent",
                 "missing");
  expect_failure(R"({"agent":"a","checkName":"c","nodeName":"n"})", "componentClass",
                 "missing");
  expect_failure(R"({"agent":"a","componentClass":"GPU","nodeName":"n"})", "checkName",
                 "missing");
}

TEST(health_event, wrong_types_are_named) {
  expect_failure(minimal(R"(,"isFatal":"yes")"), "isFatal",
                 "expected a boolean, got a string");
  expect_failure(R"({"agent":"a","componentClass":"GPU","checkName":"c","nodeName":7})",
                 "nodeName", "expected a string, got a number");
  expect_failure(minimal(R"(,"errorCode":"48")"), "errorCode", "expected an array");
  expect_failure(minimal(R"(,"errorCode":[48])"), "errorCode[0]", "expected a string");
  expect_failure(minimal(R"(,"entitiesImpacted":[{"entityType":"GPU"}])"),
                 "entitiesImpacted[0].entityValue", "missing");
  expect_failure(minimal(R"(,"entitiesImpacted":["GPU"])"), "entitiesImpacted[0]",
                 "expected an object");
  expect_failure(minimal(R"(,"metadata":{"k":1})"), "metadata.k", "expected a string");
  expect_failure(minimal(R"(,"generatedTimestamp":true)"), "generatedTimestamp",
                 "expected an RFC 3339 string");
  expect_failure(minimal(R"(,"generatedTimestamp":{"seconds":1,"nanos":1000000000})"),
                 "generatedTimestamp.nanos", "must be in");
  expect_failure(minimal(R"(,"generatedTimestamp":"2025-13-01T00:00:00Z")"),
                 "generatedTimestamp", "date out of range");
  expect_failure(minimal(R"(,"quarantineOverrides":{"force":1})"),
                 "quarantineOverrides.force", "expected a boolean");
  expect_failure(minimal(R"(,"drainOverrides":{"force":true,"skip":true})"),
                 "drainOverrides", "both set");
  expect_failure("[1,2]", "", "expected a JSON object, got an array");
}

TEST(health_event, unknown_values_and_fields_are_named) {
  expect_failure(minimal(R"(,"recommendedAction":"REBOOT_PLEASE")"), "recommendedAction",
                 "unknown action \"REBOOT_PLEASE\"");
  expect_failure(minimal(R"(,"recommendedAction":3)"), "recommendedAction",
                 "unknown action 3");
  expect_failure(minimal(R"(,"recommendedAction":true)"), "recommendedAction",
                 "expected an action name or number");
  expect_failure(minimal(R"(,"processingStrategy":"STORE_EVERYTHING")"),
                 "processingStrategy", "unknown processing strategy");
  expect_failure(minimal(R"(,"nodeNmae":"typo")"), "nodeNmae", "unknown field");
}

TEST(health_event, size_limits) {
  decode_limits limits;
  limits.max_message_bytes = 16;
  limits.max_entities = 2;
  limits.max_error_codes = 1;
  limits.max_metadata_entries = 1;
  expect_failure(minimal(R"(,"message":"this message is too long")"), "message",
                 "over the limit of 16", limits);
  expect_failure(minimal(R"(,"entitiesImpacted":[{"entityType":"a","entityValue":"1"},)"
                         R"({"entityType":"a","entityValue":"2"},)"
                         R"({"entityType":"a","entityValue":"3"}])"),
                 "entitiesImpacted", "3 entities, over the limit of 2", limits);
  expect_failure(minimal(R"(,"errorCode":["1","2"])"), "errorCode", "over the limit",
                 limits);
  expect_failure(minimal(R"(,"metadata":{"a":"1","b":"2"})"), "metadata",
                 "over the limit", limits);
  limits = {};
  limits.max_event_bytes = 64;
  expect_failure(minimal(R"(,"message":"padding padding padding padding")"), "",
                 "over the limit of 64", limits);
}

TEST(health_event, duplicate_keys_are_refused) {
  expect_failure(minimal(R"(,"nodeName":"other")"), "nodeName", "duplicate key");
  expect_failure(minimal(R"(,"node_name":"other")"), "node_name", "duplicate key");
  expect_failure(minimal(R"(,"metadata":{"a":"1","a":"2"})"), "a", "duplicate key");
}

TEST(health_event, garbage_never_crashes) {
  for (const char* garbage :
       {"", "{", "}", "null", "\"text\"", "{\"agent\":", "{\"agent\":\"a\",}",
        "\xff\xfe{}", "{\"agent\":\"\xc3\x28\"}", "[[[[[[[[[[[[[[[[[[[[",
        "{\"a\":1e999999}", "{\"nodeName\":\"n\"}garbage"}) {
    auto e = decode_health_event(garbage);
    EXPECT_FALSE(e.has_value()) << garbage;
  }
  expect_failure("{", "", "invalid JSON");
}

TEST(health_event, fit_to_limits_makes_any_event_decodable) {
  health_event e;
  e.agent = "fabric-monitor";
  e.component_class = "GPU";
  e.check_name = "GPUFabricHealth";
  e.node_name = "node-1";
  e.message = std::string(5000, 'x');
  e.entities.push_back({"GPU_UUID", std::string(2000, 'u')});
  e.error_codes.assign(80, "code");
  for (int i = 0; i < 70; ++i)
    e.metadata["k" + std::to_string(i)] = std::string(1500, 'm');
  e.metadata["bytes"] = "\xff\xfe not UTF-8 \xe2\x82"; // replaced by U+FFFD when encoded
  ASSERT_FALSE(decode_health_event(encode_health_event(e)).has_value());
  auto fitted = fit_to_limits(e);
  auto decoded = decode_health_event(encode_health_event(fitted));
  ASSERT_TRUE(decoded.has_value()) << decoded.error().to_string();
  EXPECT_EQ(fitted.message.size(), 4096u);
  EXPECT_EQ(fitted.message.substr(4090), "xxx\xE2\x80\xA6"); // ends with "…"
  EXPECT_EQ(fitted.error_codes.size(), 64u);
  EXPECT_LE(fitted.metadata.size(), 64u);
  // A multi-byte character is never cut in half.
  health_event accents = e;
  accents.message.clear();
  for (int i = 0; i < 3000; ++i)
    accents.message += "\xC3\xA9"; // é
  auto cut = fit_to_limits(accents).message;
  EXPECT_LE(cut.size(), 4096u);
  EXPECT_EQ(cut.substr(cut.size() - 5), "\xC3\xA9\xE2\x80\xA6");
  // Within the limits: unchanged.
  health_event small;
  small.agent = "a";
  small.component_class = "GPU";
  small.check_name = "c";
  small.node_name = "n";
  small.message = "fine";
  EXPECT_EQ(fit_to_limits(small), small);
}

} // namespace
} // namespace vigil
