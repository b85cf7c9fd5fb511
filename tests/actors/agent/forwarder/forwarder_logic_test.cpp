#include "actors/agent/forwarder/forwarder_logic.hpp"

#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/fresh_directory.hpp"

namespace vigil::agent {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

const steady_time t0 = steady_time{} + std::chrono::hours{1};

health_event make_event(const std::string& message, bool fatal = false) {
  health_event e;
  e.agent = "syslog-health-monitor";
  e.component_class = "GPU";
  e.check_name = "SysLogsXIDError";
  e.is_fatal = fatal;
  e.message = message;
  e.error_codes = {"79"};
  e.entities = {{"PCI", "0000:3b:00"}, {"GPU_UUID", "GPU-1"}};
  e.generated = from_unix(1'761'219'482, 207'323'127);
  e.node_name = "gpu-node-1";
  return e;
}

// The messages of a batch body, in line order.
std::vector<std::string> messages(const event_batch& batch) {
  std::vector<std::string> out;
  std::istringstream lines(batch.body);
  for (std::string line; std::getline(lines, line);) {
    auto e = decode_health_event(line);
    EXPECT_TRUE(e.has_value()) << line;
    if (e)
      out.push_back(e->message);
  }
  return out;
}

post_result accepted() {
  post_result r;
  r.outcome = post_outcome::accepted;
  r.http_status = 200;
  return r;
}

post_result unreachable() {
  post_result r;
  r.outcome = post_outcome::retryable;
  r.detail = "Connection refused";
  return r;
}

using texts = std::vector<std::string>;

class forwarder_logic_test : public ::testing::Test {
protected:
  forwarder_logic_test() : spool_(spool_options{test::fresh_directory() + "/spool"}) {
    EXPECT_TRUE(spool_.open().has_value());
    options_.batch_max_events = 3;
    options_.batch_max_delay = milliseconds{500};
    options_.backoff_initial = milliseconds{1000};
    options_.backoff_max = milliseconds{8000};
    options_.jitter = 0.2;
  }

  forwarder_logic make() {
    return forwarder_logic(options_, spool_, [this] { return jitter_unit_; });
  }

  void submit(forwarder_logic& f, const std::string& message, steady_time at = t0,
              bool fatal = false) {
    auto r = f.submit(make_event(message, fatal), at);
    EXPECT_NE(r.status, submit_status::refused) << message;
  }

  forwarder_options options_;
  event_spool spool_;
  double jitter_unit_ = 0.5; // factor 1.0
};

TEST(forwarder_ids, derived_ids_are_stable_and_distinguish_events) {
  const auto e = make_event("m");
  const auto id = derive_event_id(e);
  EXPECT_EQ(id.size(), 32u);
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(derive_event_id(e), id);
  auto reordered = e;
  std::swap(reordered.entities[0], reordered.entities[1]);
  EXPECT_EQ(derive_event_id(reordered), id);
  auto other_node = e;
  other_node.node_name = "gpu-node-2";
  EXPECT_NE(derive_event_id(other_node), id);
  auto later = e;
  later.generated = *later.generated + std::chrono::nanoseconds{1};
  EXPECT_NE(derive_event_id(later), id);
  auto healed = e;
  healed.is_healthy = true;
  EXPECT_NE(derive_event_id(healed), id);
}

TEST(forwarder_backoff, grows_exponentially_with_jitter_and_a_cap) {
  forwarder_options o;
  o.backoff_initial = milliseconds{500};
  o.backoff_max = milliseconds{4000};
  o.jitter = 0.2;
  EXPECT_EQ(backoff_delay(o, 1, 0.5), milliseconds{500});
  EXPECT_EQ(backoff_delay(o, 2, 0.5), milliseconds{1000});
  EXPECT_EQ(backoff_delay(o, 3, 0.0), milliseconds{1600});
  EXPECT_EQ(backoff_delay(o, 3, 0.75), milliseconds{2200});
  EXPECT_EQ(backoff_delay(o, 10, 0.5), milliseconds{4000});
  EXPECT_EQ(backoff_delay(o, 10, 0.99), milliseconds{4000});
  EXPECT_EQ(backoff_delay(o, 10, 0.0), milliseconds{3200});
}

// An overloaded answer's Retry-After sets the delay however many came before
// (spread upward by the jitter); other failures back off exponentially.
TEST(forwarder_backoff, an_overloaded_answers_retry_after_is_the_delay) {
  forwarder_options o;
  o.backoff_initial = milliseconds{500};
  o.backoff_max = milliseconds{60'000};
  o.jitter = 0.2;
  o.retry_after_max = milliseconds{30'000};
  const auto overloaded = post_failure::overloaded;
  EXPECT_EQ(retry_delay(o, 1, overloaded, seconds{2}, 0.0), milliseconds{2000});
  EXPECT_EQ(retry_delay(o, 12, overloaded, seconds{2}, 0.0), milliseconds{2000});
  EXPECT_EQ(retry_delay(o, 12, overloaded, seconds{2}, 0.5), milliseconds{2200});
  EXPECT_EQ(retry_delay(o, 12, overloaded, seconds{2}, 0.99), milliseconds{2396});
  EXPECT_EQ(retry_delay(o, 1, overloaded, seconds{3600}, 0.0), milliseconds{30'000});
  // Without a Retry-After: the exponential backoff.
  EXPECT_EQ(retry_delay(o, 12, overloaded, std::nullopt, 0.5), milliseconds{60'000});
  EXPECT_EQ(retry_delay(o, 3, post_failure::unreachable, std::nullopt, 0.5),
            milliseconds{2000});
  // A Retry-After on another failure is a floor under the backoff.
  EXPECT_EQ(retry_delay(o, 12, post_failure::endpoint, seconds{2}, 0.5),
            milliseconds{60'000});
  EXPECT_EQ(retry_delay(o, 1, post_failure::credentials, seconds{20}, 0.5),
            milliseconds{20'000});
}

TEST_F(forwarder_logic_test, an_event_keeps_its_id_or_gets_a_derived_one) {
  auto f = make();
  auto with_id = make_event("a");
  with_id.id = "given";
  EXPECT_EQ(f.submit(with_id, t0).id, "given");
  auto r = f.submit(make_event("b"), t0);
  EXPECT_EQ(r.status, submit_status::queued);
  EXPECT_EQ(r.id, derive_event_id(make_event("b")));
  auto batch = f.next_batch(t0 + milliseconds{500});
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch->ids, (texts{"given", r.id}));
  EXPECT_EQ(decode_health_event(batch->body.substr(0, batch->body.find('\n')))->id,
            "given");
}

TEST_F(forwarder_logic_test, a_batch_waits_for_count_or_delay) {
  auto f = make();
  submit(f, "a");
  EXPECT_FALSE(f.next_batch(t0 + milliseconds{499}).has_value());
  EXPECT_EQ(f.next_wakeup(t0), t0 + milliseconds{500});
  submit(f, "b", t0 + milliseconds{100});
  submit(f, "c", t0 + milliseconds{200});
  submit(f, "d", t0 + milliseconds{300});
  EXPECT_EQ(f.next_wakeup(t0 + milliseconds{300}), t0 + milliseconds{300});
  auto batch = f.next_batch(t0 + milliseconds{300});
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(messages(*batch), (texts{"a", "b", "c"}));
  EXPECT_FALSE(batch->from_spool);
  EXPECT_TRUE(f.in_flight());
  EXPECT_FALSE(f.next_batch(t0 + seconds{10}).has_value()); // one in flight at a time
  auto report = f.complete(accepted(), t0 + milliseconds{400});
  EXPECT_EQ(report.accepted, 3u);
  EXPECT_FALSE(report.retry_at.has_value());
  EXPECT_EQ(f.next_wakeup(t0 + milliseconds{400}), t0 + milliseconds{800});
  batch = f.next_batch(t0 + milliseconds{800});
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(messages(*batch), (texts{"d"}));
}

TEST_F(forwarder_logic_test, a_batch_is_cut_at_max_bytes) {
  auto sized = make_event("x");
  sized.id = derive_event_id(sized);
  const auto one = encode_health_event(sized).size() + 1;
  options_.batch_max_bytes = 2 * one;
  options_.batch_max_events = 100;
  auto f = make();
  submit(f, "a");
  EXPECT_FALSE(f.next_batch(t0).has_value());
  submit(f, "b");
  submit(f, "c");
  auto batch = f.next_batch(t0);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(messages(*batch), (texts{"a", "b"}));
}

TEST_F(forwarder_logic_test, an_outage_spools_and_the_spool_drains_first_in_order) {
  auto f = make();
  submit(f, "a");
  submit(f, "b");
  submit(f, "c");
  auto batch = f.next_batch(t0);
  ASSERT_TRUE(batch.has_value());
  submit(f, "d"); // queued while the batch is in flight
  auto report = f.complete(unreachable(), t0);
  EXPECT_EQ(report.retry_at, t0 + seconds{1});
  EXPECT_TRUE(report.spool_errors.empty());
  EXPECT_TRUE(f.spool_mode());
  EXPECT_EQ(spool_.size(), 4u);
  EXPECT_EQ(f.queued_in_memory(), 0u);

  EXPECT_EQ(f.submit(make_event("e"), t0 + milliseconds{10}).status,
            submit_status::spooled);
  EXPECT_FALSE(f.next_batch(t0 + milliseconds{999}).has_value());
  EXPECT_EQ(f.next_wakeup(t0 + milliseconds{10}), t0 + seconds{1});

  batch = f.next_batch(t0 + seconds{1});
  ASSERT_TRUE(batch.has_value());
  EXPECT_TRUE(batch->from_spool);
  EXPECT_EQ(messages(*batch), (texts{"a", "b", "c"}));
  EXPECT_EQ(batch->ids.front(), derive_event_id(make_event("a")));
  report = f.complete(unreachable(), t0 + seconds{1});
  EXPECT_EQ(report.retry_at, t0 + seconds{3}); // second failure: 2 s
  EXPECT_EQ(spool_.size(), 5u);

  batch = f.next_batch(t0 + seconds{3});
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(messages(*batch), (texts{"a", "b", "c"}));
  EXPECT_EQ(f.complete(accepted(), t0 + seconds{3}).accepted, 3u);
  EXPECT_EQ(spool_.size(), 2u);
  submit(f, "f", t0 + seconds{3}); // still spooled: the spool is not drained yet
  EXPECT_EQ(spool_.size(), 3u);

  EXPECT_EQ(f.next_wakeup(t0 + seconds{3}), t0 + seconds{3});
  batch = f.next_batch(t0 + seconds{3});
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(messages(*batch), (texts{"d", "e", "f"}));
  f.complete(accepted(), t0 + seconds{3});
  EXPECT_TRUE(spool_.empty());

  EXPECT_FALSE(f.next_batch(t0 + seconds{3}).has_value());
  EXPECT_FALSE(f.spool_mode());
  EXPECT_EQ(f.submit(make_event("g"), t0 + seconds{4}).status, submit_status::queued);
  EXPECT_EQ(f.stats().failures, 2u);
  EXPECT_EQ(f.stats().events_accepted, 6u);
}

TEST_F(forwarder_logic_test, retry_after_is_honoured_up_to_its_cap) {
  options_.retry_after_max = seconds{30};
  jitter_unit_ = 0.0; // the spread's low end: exactly what the server asked
  auto f = make();
  submit(f, "a");
  ASSERT_TRUE(f.next_batch(t0 + seconds{1}).has_value());
  auto busy = unreachable();
  busy.failure_class = post_failure::overloaded;
  busy.http_status = 503;
  busy.retry_after = seconds{7};
  EXPECT_EQ(f.complete(busy, t0).retry_at, t0 + seconds{7});
  ASSERT_TRUE(f.next_batch(t0 + seconds{7}).has_value());
  busy.retry_after = seconds{3600};
  EXPECT_EQ(f.complete(busy, t0 + seconds{7}).retry_at, t0 + seconds{37});
}

// Ingest sheds with 503 and Retry-After: 2 for as long as the journal is
// behind. However long that lasts, the agent comes back 2 s (plus jitter)
// after each refusal, not after a backoff grown to its cap; and it sends the
// spool once it is taken.
TEST_F(forwarder_logic_test, a_shedding_control_plane_is_retried_when_it_says) {
  options_.backoff_max = milliseconds{60'000};
  auto f = make();
  submit(f, "a");
  auto busy = unreachable();
  busy.failure_class = post_failure::overloaded;
  busy.http_status = 503;
  busy.retry_after = seconds{2};
  auto now = t0 + seconds{1};
  for (int refusal = 0; refusal < 12; ++refusal) {
    ASSERT_TRUE(f.next_batch(now).has_value()) << refusal;
    const auto report = f.complete(busy, now);
    ASSERT_TRUE(report.retry_at.has_value());
    EXPECT_EQ(*report.retry_at, now + milliseconds{2200}) << refusal;
    EXPECT_EQ(f.next_wakeup(now), report.retry_at);
    now = *report.retry_at;
  }
  EXPECT_TRUE(f.spool_mode());
  auto batch = f.next_batch(now);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(messages(*batch), (texts{"a"}));
  f.complete(accepted(), now);
  EXPECT_TRUE(spool_.empty());
  EXPECT_EQ(f.stats().failures, 12u);
  EXPECT_EQ(f.stats().failures_by[static_cast<std::size_t>(post_failure::overloaded)],
            12u);
}

TEST_F(forwarder_logic_test, jitter_scales_the_delay) {
  jitter_unit_ = 0.0;
  auto f = make();
  submit(f, "a");
  ASSERT_TRUE(f.next_batch(t0 + seconds{1}).has_value());
  EXPECT_EQ(f.complete(unreachable(), t0).retry_at, t0 + milliseconds{800});
}

// Only a verdict on each line drops events; the same status without one keeps
// them (the answer may come from a proxy or the wrong server).
TEST_F(forwarder_logic_test, a_batch_rejected_line_by_line_is_dropped_not_retried) {
  auto f = make();
  submit(f, "a");
  submit(f, "b");
  auto batch = f.next_batch(t0 + seconds{1});
  ASSERT_TRUE(batch.has_value());
  post_result bad;
  bad.outcome = post_outcome::rejected;
  bad.failure_class = post_failure::none;
  bad.http_status = 400;
  bad.lines = {{"", false, "nodeName: missing"}, {"", false, "nodeName: missing"}};
  auto report = f.complete(bad, t0 + seconds{1});
  EXPECT_FALSE(report.retry_at.has_value());
  ASSERT_EQ(report.rejected.size(), 2u);
  EXPECT_EQ(report.rejected[0].id, batch->ids[0]);
  EXPECT_EQ(report.rejected[0].error, "nodeName: missing");
  EXPECT_NE(report.rejected[0].encoded.find("\"message\":\"a\""), std::string::npos);
  EXPECT_EQ(report.rejected[0].encoded.find('\n'), std::string::npos);
  EXPECT_FALSE(f.spool_mode());
  EXPECT_FALSE(f.next_batch(t0 + seconds{2}).has_value());
  EXPECT_EQ(f.stats().events_rejected, 2u);
}

TEST_F(forwarder_logic_test, a_rejection_without_a_verdict_per_line_keeps_the_events) {
  auto f = make();
  submit(f, "a", t0, true);
  submit(f, "b");
  ASSERT_TRUE(f.next_batch(t0 + seconds{1}).has_value());
  post_result bad;
  bad.outcome = post_outcome::rejected;
  bad.failure_class = post_failure::none;
  bad.http_status = 400;
  bad.lines = {{"", false, "only one verdict for two lines"}};
  auto report = f.complete(bad, t0 + seconds{1});
  EXPECT_TRUE(report.rejected.empty());
  ASSERT_TRUE(report.retry_at.has_value());
  EXPECT_EQ(report.failure_class, post_failure::endpoint);
  EXPECT_EQ(spool_.size(), 2u);
  EXPECT_EQ(f.stats().events_rejected, 0u);
}

// What `vigil agent --control-url <ingest URL>` met: 404 on every post. The
// fatal XID event must wait in the spool, not be dropped.
TEST_F(forwarder_logic_test, an_answer_about_the_endpoint_keeps_the_events_spooled) {
  auto f = make();
  submit(f, "xid 79", t0, true);
  ASSERT_TRUE(f.next_batch(t0 + seconds{1}).has_value());
  for (long status : {404L, 405L, 401L, 403L, 415L, 500L}) {
    post_result r;
    r.http_status = status;
    std::tie(r.outcome, r.failure_class) = classify_reply(status, false);
    auto report = f.complete(r, t0 + seconds{1});
    EXPECT_TRUE(report.rejected.empty()) << status;
    EXPECT_TRUE(report.retry_at.has_value()) << status;
    EXPECT_EQ(spool_.size(), 1u) << status;
    auto again = f.next_batch(*report.retry_at);
    ASSERT_TRUE(again.has_value()) << status;
    EXPECT_EQ(messages(*again), texts{"xid 79"}) << status;
  }
  EXPECT_EQ(f.stats().failures, 6u);
  EXPECT_EQ(f.stats().failures_by[static_cast<std::size_t>(post_failure::endpoint)], 3u);
  EXPECT_EQ(f.stats().failures_by[static_cast<std::size_t>(post_failure::credentials)],
            2u);
  EXPECT_EQ(f.stats().failures_by[static_cast<std::size_t>(post_failure::overloaded)],
            1u);
  EXPECT_EQ(f.complete(accepted(), t0 + seconds{600}).accepted, 1u);
  EXPECT_EQ(spool_.size(), 0u);
}

// 413: the control plane's limits are below the batch; smaller batches follow.
TEST_F(forwarder_logic_test, a_batch_too_large_is_sent_again_in_halves) {
  options_.batch_max_events = 4;
  auto f = make();
  for (const char* m : {"a", "b", "c", "d"})
    submit(f, m);
  ASSERT_EQ(f.next_batch(t0)->ids.size(), 4u);
  post_result too_large;
  too_large.http_status = 413;
  std::tie(too_large.outcome, too_large.failure_class) = classify_reply(413, false);
  auto report = f.complete(too_large, t0);
  ASSERT_TRUE(report.retry_at.has_value());
  EXPECT_EQ(f.batch_limit(), 2u);
  auto half = f.next_batch(*report.retry_at);
  ASSERT_TRUE(half.has_value());
  EXPECT_EQ(messages(*half), (texts{"a", "b"}));
  f.complete(accepted(), *report.retry_at);
  auto rest = f.next_batch(*report.retry_at);
  ASSERT_TRUE(rest.has_value());
  EXPECT_EQ(messages(*rest), (texts{"c", "d"}));
}

TEST_F(forwarder_logic_test, per_line_results_drop_only_the_invalid_lines) {
  auto f = make();
  submit(f, "a");
  submit(f, "b");
  submit(f, "c");
  auto batch = f.next_batch(t0);
  ASSERT_TRUE(batch.has_value());
  auto r = accepted();
  r.lines = {{"", true, ""}, {"", false, "message: too long"}, {"", true, ""}};
  auto report = f.complete(r, t0);
  EXPECT_EQ(report.accepted, 2u);
  ASSERT_EQ(report.rejected.size(), 1u);
  EXPECT_EQ(report.rejected[0].id, batch->ids[1]);
  EXPECT_EQ(report.rejected[0].error, "message: too long");
}

TEST_F(forwarder_logic_test, a_spool_left_by_a_previous_run_drains_before_new_events) {
  ASSERT_EQ(spool_.append({encode_health_event(make_event("old")), false}).status,
            spool_append_status::appended);
  auto f = make();
  EXPECT_TRUE(f.spool_mode());
  EXPECT_EQ(f.next_wakeup(t0), t0);
  EXPECT_EQ(f.submit(make_event("new"), t0).status, submit_status::spooled);
  auto batch = f.next_batch(t0);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(messages(*batch), (texts{"old", "new"}));
}

TEST_F(forwarder_logic_test, a_spool_full_of_fatal_events_refuses_new_ones) {
  event_spool small(spool_options{test::fresh_directory() + "/small", 1 << 20, 1});
  ASSERT_TRUE(small.open().has_value());
  ASSERT_EQ(small.append({encode_health_event(make_event("f", true)), true}).status,
            spool_append_status::appended);
  forwarder_logic f(options_, small, [] { return 0.5; });
  auto r = f.submit(make_event("g", true), t0);
  EXPECT_EQ(r.status, submit_status::refused);
  ASSERT_TRUE(r.error.has_value());
  EXPECT_EQ(f.stats().refused, 1u);
}

TEST_F(forwarder_logic_test, full_memory_spills_to_the_spool) {
  options_.memory_max_events = 2;
  options_.batch_max_events = 100;
  auto f = make();
  submit(f, "a");
  submit(f, "b");
  EXPECT_FALSE(f.spool_mode());
  submit(f, "c");
  EXPECT_TRUE(f.spool_mode());
  EXPECT_EQ(spool_.size(), 3u);
  EXPECT_EQ(f.queued_in_memory(), 0u);
}

TEST_F(forwarder_logic_test, shutdown_spools_memory_and_a_restart_resends_it) {
  std::string first_id;
  {
    auto f = make();
    submit(f, "in flight");
    auto batch = f.next_batch(t0 + seconds{1});
    ASSERT_TRUE(batch.has_value());
    first_id = batch->ids[0];
    submit(f, "queued");
    ASSERT_TRUE(f.spool_memory().has_value());
  }
  auto f = make();
  auto batch = f.next_batch(t0);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(messages(*batch), (texts{"in flight", "queued"}));
  EXPECT_EQ(batch->ids[0], first_id);
}

} // namespace
} // namespace vigil::agent
