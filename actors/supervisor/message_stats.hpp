// What an actor's mailbox carried (issue 18, the console's actors page):
// messages handled by type, the time each type took (p50/p99 from a
// power-of-two histogram), and the recent rate. `observed<Base>` keeps them
// as it consumes each message, and the actor reads them only in its own
// handlers (its summary): the mailbox serialises both, so nothing locks.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/atom.hpp>
#include <caf/invoke_message_result.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/monitorable_actor.hpp>
#include <caf/response_promise.hpp>
#include <caf/send.hpp>
#include <caf/type_erased_tuple.hpp>
#include <nlohmann/json.hpp>

namespace vigil {

/// (trace_atom, caf::actor sink, uint32 max_messages, uint32 seconds), sent
/// to any observed actor (anon_send; typed ones too, through a caf::actor):
/// the next messages it handles, at most `max_messages` within `seconds`, are
/// reported to `sink` one by one, then (trace_end_atom, why). Erlang
/// Observer's tracer, for one actor, bounded in count and time.
using trace_atom = caf::atom_constant<caf::atom("trace")>;
/// (trace_line_atom, std::string json): {"seq", "type", "sender", "micros"}.
using trace_line_atom = caf::atom_constant<caf::atom("traceline")>;
/// (trace_end_atom, std::string why): the trace is over.
using trace_end_atom = caf::atom_constant<caf::atom("traceend")>;

/// (actor_stats_atom) → std::string JSON {"mailboxDepth", "messages"}: asked
/// of any observed actor, typed ones too (through a caf::actor), and answered
/// by observed<Base> itself, so no actor's interface has to name it (the
/// console's actors page asks the journal and the gateway this way).
using actor_stats_atom = caf::atom_constant<caf::atom("actorstats")>;

/// The most a trace may ask for: it must never become a second mailbox.
inline constexpr std::uint32_t max_trace_messages = 10'000;
inline constexpr std::uint32_t max_trace_seconds = 300;

class message_stats {
public:
  using clock = std::chrono::steady_clock;

  /// What tells message types apart: the leading atom when there is one
  /// (the protocol's verb), else the type of the first element.
  struct key {
    std::uint16_t type_nr = 0;
    const std::type_info* type = nullptr;
    caf::atom_value atom = static_cast<caf::atom_value>(0);
    bool empty = true; ///< a message with no elements
  };

  static key key_of(const caf::type_erased_tuple& content);

  /// The name the console shows for `k`: its atom, or CAF's name of the type.
  static std::string type_name(const key& k, const caf::actor_system& system);

  /// A message of `k` was handled in `spent`, ending at `now`.
  void record(const key& k, clock::duration spent, clock::time_point now);

  std::uint64_t handled() const { return handled_; }

  /// Messages per second over the last full window (10 s), or over the
  /// current one while none is complete.
  double per_second(clock::time_point now) const;

  /// {"handled", "perSecond", "types": [{"type", "count", "p50Micros",
  /// "p99Micros", "maxMicros"}]}: the types most handled first, at most
  /// `max_types`. Type names are the atoms' and CAF's registered names.
  nlohmann::json summary(const caf::actor_system& system, clock::time_point now,
                         std::size_t max_types = 12) const;

private:
  /// Bucket i holds times in [2^(i+7), 2^(i+8)) ns; bucket 0 everything
  /// under 256 ns, the last everything from about 2 s up.
  static constexpr std::size_t bucket_count = 24;

  struct entry {
    key k;
    std::uint64_t count = 0;
    std::uint64_t max_ns = 0;
    std::array<std::uint32_t, bucket_count> buckets{};
  };

  static std::size_t bucket_of(std::uint64_t ns);
  static double quantile_micros(const entry& e, double q);

  std::vector<entry> entries_;
  std::uint64_t handled_ = 0;
  clock::time_point window_start_{};
  std::uint64_t window_count_ = 0;
  double last_rate_ = -1; ///< < 0: no full window yet
};

/// An actor whose mailbox is measured: `Base` (event_based_actor or a typed
/// one) with consume() timing every message it handles. Use it as the base
/// of the actor's stateful_actor; its behaviour reads self->messages().
template <class Base>
class observed : public Base {
public:
  using Base::Base;

  caf::invoke_message_result consume(caf::mailbox_element& x) override {
    auto& content = x.content();
    if (content
          .match_elements<caf::atom_value, caf::actor, std::uint32_t, std::uint32_t>()
        && content.get_as<caf::atom_value>(0) == trace_atom::value) {
      arm_trace(content.get_as<caf::actor>(1), content.get_as<std::uint32_t>(2),
                content.get_as<std::uint32_t>(3));
      return caf::invoke_message_result::consumed;
    }
    if (content.match_elements<caf::atom_value>()
        && content.get_as<caf::atom_value>(0) == actor_stats_atom::value) {
      caf::response_promise{caf::strong_actor_ptr{this->ctrl()}, x}.deliver(
        figures().dump());
      return caf::invoke_message_result::consumed;
    }
    const auto k = message_stats::key_of(content);
    const auto start = message_stats::clock::now();
    const auto result = Base::consume(x);
    if (result != caf::invoke_message_result::skipped) {
      const auto end = message_stats::clock::now();
      stats_.record(k, end - start, end);
      if (trace_left_ > 0)
        trace(k, x.sender, end - start, end);
    }
    return result;
  }

  const message_stats& messages() const { return stats_; }

  /// {"mailboxDepth", "messages"}: what actor_stats_atom answers; an actor's
  /// own summary may start from it. Only the actor itself may call this.
  nlohmann::json figures(std::size_t max_types = 12) {
    return {{"mailboxDepth", this->mailbox().size()},
            {"messages",
             stats_.summary(this->system(), message_stats::clock::now(), max_types)}};
  }

private:
  void arm_trace(caf::actor sink, std::uint32_t max_messages, std::uint32_t seconds) {
    if (trace_left_ > 0 && trace_sink_ != sink)
      caf::anon_send(trace_sink_, trace_end_atom::value,
                     std::string{"another trace took this actor"});
    trace_sink_ = std::move(sink);
    trace_left_ = std::min(std::max<std::uint32_t>(max_messages, 1), max_trace_messages);
    trace_until_ = message_stats::clock::now()
                   + std::chrono::seconds{std::min(seconds, max_trace_seconds)};
    trace_seq_ = 0;
  }

  void trace(const message_stats::key& k, const caf::strong_actor_ptr& sender,
             message_stats::clock::duration spent, message_stats::clock::time_point now) {
    if (now >= trace_until_) {
      end_trace("the trace's time is up");
      return;
    }
    std::string from = "(anonymous)";
    if (sender) {
      const auto* who = dynamic_cast<const caf::monitorable_actor*>(sender->get());
      from = std::string{who != nullptr ? who->name() : "actor"} + "#"
             + std::to_string(sender->id());
    }
    nlohmann::json line = {
      {"seq", ++trace_seq_},
      {"type", message_stats::type_name(k, this->system())},
      {"sender", std::move(from)},
      {"micros", std::chrono::duration<double, std::micro>(spent).count()}};
    caf::anon_send(trace_sink_, trace_line_atom::value, line.dump());
    if (--trace_left_ == 0)
      end_trace("the trace's message count is reached");
  }

  void end_trace(std::string why) {
    trace_left_ = 0;
    caf::anon_send(trace_sink_, trace_end_atom::value, std::move(why));
    trace_sink_ = nullptr;
  }

  message_stats stats_;
  caf::actor trace_sink_;
  message_stats::clock::time_point trace_until_{};
  std::uint32_t trace_left_ = 0;
  std::uint64_t trace_seq_ = 0;
};

} // namespace vigil
