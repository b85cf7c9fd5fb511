// The journal actor: batches appends (flush at N events or after T), answers
// each caller only after its batch committed, refuses appends beyond a bounded
// queue with journal_errc::overloaded, and retries a failed batch with
// exponential backoff until the database is back. Nothing acknowledged is
// lost; nothing unacknowledged is claimed stored. Blocking I/O happens in the
// writer actor (detached in production).
#pragma once

#include <deque>
#include <memory>
#include <vector>

#include <caf/actor.hpp>
#include <caf/response_promise.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/journal/backlog_release.hpp"
#include "actors/journal/journal_messages.hpp"
#include "actors/supervisor/message_stats.hpp"
#include "runtime/clock.hpp"
#include "runtime/config.hpp"

namespace vigil {

struct pending_append {
  journal_record record;
  caf::response_promise promise;
  steady_time enqueued; ///< on the actor clock
};

struct journal_state {
  journal_config config;
  journal_writer_handle writer;
  /// Serves the tail (sharded: every replica reads every row, all the time);
  /// its own connection keeps appends from queueing behind tail pages. The
  /// writer itself when there is none.
  journal_writer_handle reader;
  std::deque<pending_append> queue;      ///< not yet in a batch
  std::vector<pending_append> in_flight; ///< the batch the writer has
  std::uint64_t flush_generation = 0;    ///< stale flush timers are ignored
  bool flush_armed = false;
  caf::timespan backoff{};
  backlog_release backlog{1, 0}; ///< set from the config when spawned
  journal_stats stats;
  std::vector<journal_subscriber> subscribers; ///< told of each committed batch
  static inline const char* name = "journal";
};

/// The journal's protocol and its own timers: the flush of a batch that did
/// not fill (with the timer's generation) and the retry of a failed one.
using journal_timers = journal_handle::extend<caf::reacts_to<flush_atom, std::uint64_t>,
                                              caf::reacts_to<retry_atom>>;

using journal_actor = caf::stateful_actor<journal_state, observed<journal_timers::base>>;

journal_timers::behavior_type journal(journal_actor* self, journal_config config,
                                      journal_writer_handle writer);

/// The same, with the tail read through `reader` (a writer actor on a
/// connection of its own).
journal_timers::behavior_type journal_with_reader(journal_actor* self,
                                                  journal_config config,
                                                  journal_writer_handle writer,
                                                  journal_writer_handle reader);

struct journal_writer_state {
  static inline const char* name = "journal_writer";
};

using journal_writer_actor =
  caf::stateful_actor<journal_writer_state, observed<journal_writer_handle::base>>;

/// Wraps a store; one batch at a time. Spawn it detached outside tests.
journal_writer_handle::behavior_type journal_writer(journal_writer_actor* self,
                                                    std::shared_ptr<journal_store> store);

} // namespace vigil
