#include "actors/journal/journal_actor.hpp"

#include <algorithm>

#include <caf/all.hpp>

#include "actors/control/rules/circuit_breaker.hpp"
#include "runtime/clock.hpp"
#include "runtime/free_memory.hpp"
#include "runtime/logging.hpp"

namespace vigil {

namespace {

// A batch that has not answered within this is treated as failed and retried;
// idempotency keys make the retry safe if the first attempt did commit.
constexpr auto write_timeout = std::chrono::seconds{60};

caf::timespan ms(std::uint32_t n) {
  return std::chrono::milliseconds{n};
}

void start_batch(journal_actor* self);

void arm_flush_timer(journal_actor* self) {
  auto& st = self->state;
  if (st.flush_armed || st.queue.empty())
    return;
  st.flush_armed = true;
  self->delayed_send(self, ms(st.config.batch_max_delay_ms), flush_atom::value,
                     ++st.flush_generation);
}

// After a commit or an enqueue: write now if a batch is full, else wait for the timer.
void schedule_flush(journal_actor* self) {
  auto& st = self->state;
  if (!st.in_flight.empty() || st.queue.empty())
    return;
  if (st.queue.size() >= st.config.batch_max_events || st.config.batch_max_delay_ms == 0)
    start_batch(self);
  else
    arm_flush_timer(self);
}

void write_in_flight(journal_actor* self) {
  std::vector<journal_record> records;
  records.reserve(self->state.in_flight.size());
  for (const auto& p : self->state.in_flight)
    records.push_back(p.record);
  self->request(self->state.writer, write_timeout, write_atom::value, std::move(records))
    .then(
      [=](std::vector<append_outcome>& outcomes) {
        auto& st = self->state;
        std::vector<journal_record> stored;
        for (size_t i = 0; i < st.in_flight.size() && i < outcomes.size(); ++i) {
          st.stats.duplicates += outcomes[i].duplicate ? 1 : 0;
          st.in_flight[i].promise.deliver(outcomes[i]);
          if (!outcomes[i].duplicate && !st.subscribers.empty()) {
            // Moved, not copied: in_flight is cleared below.
            stored.push_back(std::move(st.in_flight[i].record));
            stored.back().seq = outcomes[i].seq;
          }
        }
        if (!stored.empty()) { // the last subscriber is sent `stored` itself
          for (std::size_t k = 0; k + 1 < st.subscribers.size(); ++k)
            self->send(st.subscribers[k], committed_atom::value, stored);
          self->send(st.subscribers.back(), committed_atom::value, std::move(stored));
        }
        st.stats.committed += st.in_flight.size();
        st.in_flight.clear();
        if (st.backlog.ended(st.queue.size())) {
          // The outage's appends and the requests that waited on them are
          // freed; glibc would keep their pages (backlog_release.hpp).
          ++st.stats.memory_releases;
          component_logger("journal")->info(
            "backlog over ({} appends waiting); free memory {}", st.queue.size(),
            release_free_memory() ? "returned to the system" : "checked, none to return");
        }
        if (!st.stats.available)
          component_logger("journal")->info("journal available again");
        st.stats.available = true;
        st.backoff = ms(st.config.reconnect_initial_ms);
        schedule_flush(self);
      },
      [=](caf::error& err) {
        auto& st = self->state;
        ++st.stats.write_failures;
        st.stats.available = false;
        component_logger("journal")->warn(
          "batch of {} not stored ({}); retrying in {} ms", st.in_flight.size(),
          self->system().render(err),
          std::chrono::duration_cast<std::chrono::milliseconds>(st.backoff).count());
        self->delayed_send(self, st.backoff, retry_atom::value);
        st.backoff =
          std::min(st.backoff * 2, caf::timespan{ms(st.config.reconnect_max_ms)});
      });
}

void start_batch(journal_actor* self) {
  auto& st = self->state;
  const auto n = std::min<size_t>(st.queue.size(), st.config.batch_max_events);
  for (size_t i = 0; i < n; ++i) {
    st.in_flight.push_back(std::move(st.queue.front()));
    st.queue.pop_front();
  }
  write_in_flight(self);
}

journal_stats current_stats(journal_actor* self) {
  auto& st = self->state;
  auto stats = st.stats;
  stats.queue_depth = st.queue.size();
  stats.in_flight = st.in_flight.size();
  const pending_append* oldest = !st.in_flight.empty() ? &st.in_flight.front()
                                 : !st.queue.empty()   ? &st.queue.front()
                                                       : nullptr;
  stats.lag_ns = oldest ? (self->clock().now() - oldest->enqueued).count() : 0;
  stats.mailbox_depth = self->mailbox().size(); // only the actor may read it
  return stats;
}

} // namespace

journal_timers::behavior_type journal(journal_actor* self, journal_config config,
                                      journal_writer_handle writer) {
  auto reader = writer;
  return journal_with_reader(self, std::move(config), std::move(writer),
                             std::move(reader));
}

journal_timers::behavior_type journal_with_reader(journal_actor* self,
                                                  journal_config config,
                                                  journal_writer_handle writer,
                                                  journal_writer_handle reader) {
  self->state.config = config;
  // A backlog: an eighth of the queue's bound; over at one batch waiting.
  self->state.backlog =
    backlog_release(config.queue_capacity / 8, config.batch_max_events);
  self->state.writer = std::move(writer);
  self->state.reader = std::move(reader);
  self->state.backoff = ms(config.reconnect_initial_ms);
  self->set_down_handler([=](caf::down_msg& down) {
    auto& subscribers = self->state.subscribers;
    subscribers.erase(std::remove_if(subscribers.begin(), subscribers.end(),
                                     [&](const journal_subscriber& a) {
                                       return a.address() == down.source;
                                     }),
                      subscribers.end());
  });
  return {
    [=](append_atom, journal_record& record) -> caf::result<append_outcome> {
      auto& st = self->state;
      if (st.queue.size() + st.in_flight.size() >= st.config.queue_capacity) {
        ++st.stats.refused;
        return make_error(journal_errc::overloaded, "journal queue full");
      }
      auto promise = self->make_response_promise();
      st.queue.push_back({std::move(record), promise, self->clock().now()});
      st.backlog.note(st.queue.size() + st.in_flight.size());
      schedule_flush(self);
      return promise;
    },
    [=](flush_atom, std::uint64_t generation) {
      auto& st = self->state;
      if (generation != st.flush_generation)
        return;
      st.flush_armed = false;
      if (st.in_flight.empty() && !st.queue.empty())
        start_batch(self);
    },
    [=](retry_atom) { write_in_flight(self); },
    [=](stats_atom) -> journal_stats { return current_stats(self); },
    [=](subscribe_atom, const journal_subscriber& subscriber) {
      self->monitor(subscriber);
      self->state.subscribers.push_back(subscriber);
    },
    [=](read_atom atom,
        journal_query& query) -> caf::delegated<std::vector<journal_record>> {
      return self->delegate(self->state.writer, atom, std::move(query));
    },
    [=](tail_atom atom, journal_position after, std::uint64_t limit,
        tail_filter& filter) -> caf::delegated<journal_tail_page> {
      return self->delegate(self->state.reader, atom, after, limit, std::move(filter));
    },
    [=](slot_claim_atom atom, std::string& pool, std::string& node,
        std::uint64_t budget) -> caf::delegated<bool, std::uint64_t> {
      return self->delegate(self->state.writer, atom, std::move(pool), std::move(node),
                            budget);
    },
    [=](slot_free_atom atom, std::string& node) -> caf::delegated<bool> {
      return self->delegate(self->state.writer, atom, std::move(node));
    },
    [=](slot_list_atom atom) -> caf::delegated<std::vector<std::string>> {
      return self->delegate(self->state.writer, atom);
    },
    [=](cordon_claim_atom atom, cordon_ask& ask) -> caf::delegated<cordon_claim> {
      return self->delegate(self->state.writer, atom, std::move(ask));
    },
    [=](cordon_reset_atom atom) -> caf::delegated<cordon_window_reset> {
      return self->delegate(self->state.writer, atom);
    },
    [=](fleet_snapshot_atom atom) -> caf::delegated<fleet_snapshot> {
      return self->delegate(self->state.writer, atom);
    },
  };
}

journal_writer_handle::behavior_type
journal_writer(journal_writer_actor*, std::shared_ptr<journal_store> store) {
  return {
    [=](write_atom, const std::vector<journal_record>& batch)
      -> caf::result<std::vector<append_outcome>> {
      auto outcomes = store->append(batch);
      if (!outcomes) {
        store->close(); // reconnect on the next attempt
        return make_error(journal_errc::unavailable, outcomes.error().to_string());
      }
      return std::move(*outcomes);
    },
    [=](read_atom,
        const journal_query& query) -> caf::result<std::vector<journal_record>> {
      auto rows = store->read(query);
      if (!rows) {
        store->close();
        return make_error(journal_errc::unavailable, rows.error().to_string());
      }
      return std::move(*rows);
    },
    [=](tail_atom, journal_position after, std::uint64_t limit,
        const tail_filter& filter) -> caf::result<journal_tail_page> {
      auto page = store->tail(after, static_cast<std::size_t>(limit), filter);
      if (!page) {
        store->close();
        return make_error(journal_errc::unavailable, page.error().to_string());
      }
      return std::move(*page);
    },
    [=](slot_claim_atom, const std::string& pool, const std::string& node,
        std::uint64_t budget) -> caf::result<bool, std::uint64_t> {
      auto rule = [budget](std::size_t others, bool holds) {
        return control::pool_admits(others, holds, static_cast<std::size_t>(budget));
      };
      auto claim = store->claim_slot(pool, node, system_now(), rule);
      if (!claim) {
        store->close();
        return make_error(journal_errc::unavailable, claim.error().to_string());
      }
      return {claim->granted, static_cast<std::uint64_t>(claim->holders)};
    },
    [=](slot_free_atom, const std::string& node) -> caf::result<bool> {
      if (auto released = store->release_slot(node); !released) {
        store->close();
        return make_error(journal_errc::unavailable, released.error().to_string());
      }
      return true;
    },
    [=](slot_list_atom) -> caf::result<std::vector<std::string>> {
      auto nodes = store->slot_holders();
      if (!nodes) {
        store->close();
        return make_error(journal_errc::unavailable, nodes.error().to_string());
      }
      return std::move(*nodes);
    },
    [=](cordon_claim_atom, const cordon_ask& ask) -> caf::result<cordon_claim> {
      auto claim = store->claim_cordon(ask);
      if (!claim) {
        store->close();
        return make_error(journal_errc::unavailable, claim.error().to_string());
      }
      return std::move(*claim);
    },
    [=](cordon_reset_atom) -> caf::result<cordon_window_reset> {
      auto reset = store->reset_cordon_window();
      if (!reset) {
        store->close();
        return make_error(journal_errc::unavailable, reset.error().to_string());
      }
      return std::move(*reset);
    },
    [=](fleet_snapshot_atom) -> caf::result<fleet_snapshot> {
      auto snapshot = store->latest_fleet_snapshot();
      if (!snapshot) {
        store->close();
        return make_error(journal_errc::unavailable, snapshot.error().to_string());
      }
      return std::move(*snapshot);
    },
  };
}

} // namespace vigil
