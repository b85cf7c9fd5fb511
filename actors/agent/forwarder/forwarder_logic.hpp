// The forwarder's decisions without its I/O timing: batching, retry backoff
// with jitter, spooling while the control plane is away, draining in order.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "actors/agent/forwarder/event_spool.hpp"
#include "actors/agent/forwarder/http_event_poster.hpp"
#include "messages/health_event.hpp"
#include "runtime/clock.hpp"

namespace vigil::agent {

struct forwarder_options {
  std::size_t batch_max_events = 256;             ///< events per POST
  std::size_t batch_max_bytes = 1 << 20;          ///< body bytes per POST
  std::chrono::milliseconds batch_max_delay{500}; ///< oldest queued event waits at most
  std::chrono::milliseconds backoff_initial{500}; ///< first retry delay
  std::chrono::milliseconds backoff_max{60'000};  ///< cap on retry delays
  double backoff_multiplier = 2.0;                ///< growth per failed attempt
  double jitter = 0.2;                            ///< delay × [1-jitter, 1+jitter)
  std::chrono::milliseconds retry_after_max{300'000}; ///< cap on honoured Retry-After
  std::size_t memory_max_events = 10'000; ///< queued in memory before spilling to disk
};

/// A number in [0, 1); tests pass a constant. Empty: a seeded PRNG.
using jitter_source = std::function<double()>;

/// A stable id for an event without one: FNV-1a-128, as 32 hex digits, of its
/// node, agent, component class, check, health, error codes, entities (sorted)
/// and generated timestamp. Re-sends carry the same id, so ingest is idempotent.
std::string derive_event_id(const health_event& event);

/// Exponential backoff for the `attempt`-th consecutive failure (1-based),
/// scaled by the jitter factor from `unit` in [0, 1), capped at backoff_max.
std::chrono::milliseconds backoff_delay(const forwarder_options& options,
                                        unsigned attempt, double unit);

/// How long a batch that failed for the `attempt`-th time in a row waits
/// before it is sent again; `unit` in [0, 1) picks the jitter.
///
/// An overloaded answer (408, 429, 5xx) with a Retry-After is the control
/// plane's own word on when it can take the batch (ingest sends one with every
/// request it sheds): the agent waits that long (at most retry_after_max),
/// spread upward by the jitter so agents refused together do not return
/// together, and no longer. Backing off exponentially on top of it left 1,000
/// agents posting 26-50 times a second once the journal had room again, and
/// spools full long after a fault (RELIABILITY.md, "Resends answered from
/// memory, and agents back when told"). Every other failure (no answer, a
/// wrong URL or credentials, a Retry-After on anything but an overloaded
/// answer) backs off exponentially, and not sooner than a Retry-After it
/// carries.
std::chrono::milliseconds retry_delay(const forwarder_options& options, unsigned attempt,
                                      post_failure failure,
                                      std::optional<std::chrono::seconds> retry_after,
                                      double unit);

enum class submit_status {
  queued,  ///< in memory, will be batched
  spooled, ///< on disk (the control plane is away)
  refused, ///< not stored: the spool is full of fatal events, or broken
};

struct submit_result {
  submit_status status = submit_status::queued;
  std::string id;               ///< the event's id (derived when it had none)
  std::size_t dropped = 0;      ///< older non-fatal events dropped for room
  std::optional<failure> error; ///< why it was refused, or a spool problem survived
};

/// One POST to make: hand `body` to http_event_poster::post.
struct event_batch {
  std::uint64_t number = 0;     ///< increasing, for logs
  std::string body;             ///< NDJSON: one encoded event per line
  std::vector<std::string> ids; ///< the events' ids, in line order
  bool from_spool = false;
};

/// An event the control plane refused line by line: dropped, so the caller
/// keeps it in the agent's rejected-events log with the reason.
struct rejected_event {
  std::string id;
  std::string error;   ///< the control plane's reason
  std::string encoded; ///< the event as sent (one NDJSON line, no newline)
};

/// What came of a batch, for the caller's logs and metrics.
struct batch_report {
  std::size_t accepted = 0;
  /// Lines the control plane refused with a verdict per line; they are dropped.
  std::vector<rejected_event> rejected;
  /// Set when the batch will be sent again at this time.
  std::optional<steady_time> retry_at;
  /// Why it will be sent again (with retry_at).
  post_failure failure_class = post_failure::none;
  /// Problems with the spool while handling the result.
  std::vector<failure> spool_errors;
};

struct forwarder_stats {
  std::uint64_t submitted = 0;
  std::uint64_t batches_sent = 0;
  std::uint64_t events_accepted = 0;
  std::uint64_t events_rejected = 0;
  std::uint64_t failures = 0; ///< retryable send failures, all reasons
  /// failures by post_failure (index: its value; [none] stays 0).
  std::array<std::uint64_t, 6> failures_by{};
  std::uint64_t spool_dropped = 0; ///< non-fatal events dropped for room
  std::uint64_t refused = 0;       ///< events neither queued nor spooled
};

/// Drive it like this: submit() each event; when next_wakeup() comes (or
/// after a submit), call next_batch(); post its body; give the post_result to
/// complete(). One batch is in flight at a time, which keeps events in order.
/// In spool mode (entered on a failed send, or on start with a non-empty
/// spool) new events go to the spool, and the spool drains before memory.
class forwarder_logic {
public:
  forwarder_logic(forwarder_options options, event_spool& spool, jitter_source jitter);

  /// Queues one event; derives its id when empty. Handle `refused`.
  [[nodiscard]] submit_result submit(health_event event, steady_time now);

  /// The batch to send now, if one is due and none is in flight.
  std::optional<event_batch> next_batch(steady_time now);

  /// Takes the outcome of the batch from next_batch().
  batch_report complete(const post_result& result, steady_time now);

  /// When next_batch() should be called again: nullopt while a batch is in
  /// flight or nothing is queued; `now` when one is due already.
  std::optional<steady_time> next_wakeup(steady_time now) const;

  /// For shutdown: writes the events queued in memory (and those of a batch in
  /// flight from memory) to the spool; after a restart they are re-sent with
  /// the same ids, so a batch that did arrive is not duplicated by ingest.
  status spool_memory();

  bool spool_mode() const { return spool_mode_; }
  /// Events per batch now: batch_max_events, halved after each 413.
  std::size_t batch_limit() const { return batch_limit_; }
  bool in_flight() const { return in_flight_.has_value(); }
  std::size_t queued_in_memory() const { return memory_.size(); }
  const forwarder_stats& stats() const { return stats_; }

private:
  struct queued_event {
    std::string id;
    std::string line;
    bool fatal = false;
    steady_time at{};
  };

  struct flight {
    event_batch batch;
    std::vector<std::string> lines;   ///< the batch's events, encoded
    std::vector<queued_event> events; ///< for a batch taken from memory
    std::uint64_t spool_last_id = 0;  ///< for a batch taken from the spool
  };

  submit_result spool_one(queued_event event);
  std::vector<failure> spill_to_spool(std::vector<queued_event> first);
  bool memory_batch_due(steady_time now) const;
  std::optional<event_batch> batch_from_spool(steady_time now);
  event_batch batch_from_memory();
  void finish(const post_result& result, batch_report& report);
  void schedule_retry(const post_result& result, steady_time now, batch_report& report);
  event_batch start_flight(std::vector<std::string> lines, std::vector<std::string> ids,
                           bool from_spool);

  forwarder_options options_;
  event_spool& spool_;
  jitter_source jitter_;
  std::deque<queued_event> memory_;
  std::size_t memory_bytes_ = 0;
  std::optional<flight> in_flight_;
  bool spool_mode_ = false;
  unsigned consecutive_failures_ = 0;
  std::optional<steady_time> retry_at_;
  std::uint64_t next_batch_number_ = 1;
  std::size_t batch_limit_;
  forwarder_stats stats_;
};

} // namespace vigil::agent
