// The heartbeat's wire format and its bookkeeping: one out at a time, a
// failure counted (and reported once per run of failures), never queued.
#include "actors/agent/forwarder/heartbeat.hpp"

#include <gtest/gtest.h>
#include <tuple>

namespace vigil::agent {
namespace {

heartbeat_options options(std::chrono::milliseconds interval) {
  heartbeat_options o;
  o.interval = interval;
  o.node_name = "gpu-node-1";
  o.agent_version = "0.1.0";
  o.boot_id = "7c3e-boot";
  return o;
}

post_result answered(long status) {
  post_result r;
  r.http_status = status;
  std::tie(r.outcome, r.failure_class) = classify_reply(status, false);
  return r;
}

const wall_time t0 = from_unix(1'761'219'482, 0);

TEST(heartbeat, the_body_is_the_documented_json) {
  EXPECT_EQ(encode_heartbeat(options(std::chrono::seconds{60}), t0),
            R"({"agentVersion":"0.1.0","bootId":"7c3e-boot","intervalSeconds":60,)"
            R"("nodeName":"gpu-node-1","sentAt":"2025-10-23T11:38:02Z"})");
  auto fraction = encode_heartbeat(options(std::chrono::milliseconds{1500}), t0);
  EXPECT_NE(fraction.find(R"("intervalSeconds":1.5)"), std::string::npos) << fraction;
  auto with_gpus = options(std::chrono::seconds{60});
  with_gpus.gpus = agent_gpu_facts{"NVIDIA A100-SXM4-80GB", 8, 6, "575.57.08"};
  EXPECT_NE(encode_heartbeat(with_gpus, t0)
              .find(R"("gpus":{"count":8,"driverVersion":"575.57.08",)"
                    R"("nvswitches":6,"product":"NVIDIA A100-SXM4-80GB"})"),
            std::string::npos);
  with_gpus.gpus = agent_gpu_facts{}; // metadata without NVLinks: unknowns left out
  EXPECT_NE(encode_heartbeat(with_gpus, t0).find(R"("gpus":{})"), std::string::npos);
}

TEST(heartbeat, one_is_out_at_a_time_and_a_late_one_is_skipped) {
  heartbeat_sender sender(options(std::chrono::seconds{60}));
  ASSERT_TRUE(sender.start(t0).has_value());
  EXPECT_TRUE(sender.in_flight());
  EXPECT_FALSE(sender.start(t0).has_value()); // the control plane is slow
  EXPECT_EQ(sender.stats().skipped, 1u);
  EXPECT_EQ(sender.stats().sent, 1u);
  EXPECT_EQ(sender.complete(answered(204), t0), heartbeat_news::none);
  EXPECT_EQ(sender.stats().accepted, 1u);
  EXPECT_EQ(sender.stats().last_accepted, t0);
  EXPECT_TRUE(sender.start(t0).has_value());
}

TEST(heartbeat, failures_are_counted_and_reported_once_per_run) {
  heartbeat_sender sender(options(std::chrono::seconds{60}));
  auto beat = [&](long status) {
    EXPECT_TRUE(sender.start(t0).has_value());
    return sender.complete(answered(status), t0);
  };
  EXPECT_EQ(beat(404), heartbeat_news::failing); // no such route yet
  EXPECT_EQ(beat(0), heartbeat_news::none);      // no answer at all
  EXPECT_EQ(beat(503), heartbeat_news::none);
  EXPECT_EQ(sender.consecutive_failures(), 3u);
  EXPECT_EQ(beat(200), heartbeat_news::recovered);
  EXPECT_EQ(beat(200), heartbeat_news::none);
  EXPECT_EQ(sender.stats().failed, 3u);
  EXPECT_EQ(sender.stats().accepted, 2u);
  EXPECT_EQ(sender.consecutive_failures(), 0u);
}

TEST(heartbeat, an_interval_of_zero_turns_it_off) {
  heartbeat_sender sender(options(std::chrono::milliseconds{0}));
  EXPECT_FALSE(sender.enabled());
  EXPECT_FALSE(sender.start(t0).has_value());
  EXPECT_EQ(sender.stats().sent, 0u);
}

} // namespace
} // namespace vigil::agent
