// Messages of the journal actor: appends, batches to the writer, statistics,
// and the journal's error codes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "runtime/journal/journal_store.hpp"

namespace vigil {

/// (append_atom, journal_record) → append_outcome, after the batch committed.
using append_atom = caf::atom_constant<caf::atom("append")>;
/// (write_atom, vector<journal_record>) → vector<append_outcome>: one batch.
using write_atom = caf::atom_constant<caf::atom("write")>;
using flush_atom = caf::atom_constant<caf::atom("flush")>;
using retry_atom = caf::atom_constant<caf::atom("retry")>;
/// (read_atom, journal_query) → vector<journal_record>: rows in seq order,
/// read by the writer between batches (state rebuilds at startup and restart).
using read_atom = caf::atom_constant<caf::atom("read")>;
/// (tail_atom, journal_position, std::uint64_t limit, tail_filter) →
/// journal_tail_page: the rows after the position in commit order
/// (journal_store::tail), read on the tail's own connection; the sharded
/// fleet follows the journal with it, filtered to its shards.
using tail_atom = caf::atom_constant<caf::atom("tail")>;
/// (stats_atom) → journal_stats.
using stats_atom = caf::atom_constant<caf::atom("stats")>;
/// (subscribe_atom, journal_subscriber) to the journal: from now on the subscriber
/// gets (committed_atom, vector<journal_record>) after each committed batch,
/// the rows newly stored (duplicates left out) with their seq, until it goes
/// down. For watchers of the journal (the console's live stream), never for
/// anything that must not miss a row: a subscriber restarts with a read.
using subscribe_atom = caf::atom_constant<caf::atom("subscribe")>;
/// (slot_claim_atom, pool, node, std::uint64_t budget) → (granted, the
/// pool's other holders): one of the pool's remediation slots, held in the
/// database across replicas (journal_store::claim_slot; budget 0: unlimited).
using slot_claim_atom = caf::atom_constant<caf::atom("slotclaim")>;
/// (slot_free_atom, node) → true once the node's slot is given back.
using slot_free_atom = caf::atom_constant<caf::atom("slotfree")>;
/// (slot_list_atom) → the nodes holding a slot (journal_store::slot_holders).
using slot_list_atom = caf::atom_constant<caf::atom("slotlist")>;
/// (cordon_claim_atom, cordon_ask) → cordon_claim: a new cordon asked of the
/// breaker's fleet-wide window, decided in the database across replicas
/// (journal_store::claim_cordon).
using cordon_claim_atom = caf::atom_constant<caf::atom("cordclaim")>;
/// (cordon_reset_atom) → cordon_window_reset: an operator's reset of the
/// breaker, sharded: the fleet's trip closed and window forgotten in the
/// database (journal_store::reset_cordon_window).
using cordon_reset_atom = caf::atom_constant<caf::atom("cordreset")>;
/// (fleet_snapshot_atom) → fleet_snapshot: the newest one stored (id 0: none).
using fleet_snapshot_atom = caf::atom_constant<caf::atom("fsnapshot")>;
using committed_atom = caf::atom_constant<caf::atom("committed")>;

enum class journal_errc : std::uint8_t {
  overloaded = 1, ///< the bounded queue is full: retry later, nothing was stored
  unavailable,    ///< the database failed this batch; the journal retries it
};

/// The category of journal errors in caf::error.
inline caf::atom_value journal_error_category() {
  return caf::atom("journal");
}

inline caf::error make_error(journal_errc code, std::string context = {}) {
  return caf::error{static_cast<std::uint8_t>(code), journal_error_category(),
                    caf::make_message(std::move(context))};
}

inline bool is_journal_error(const caf::error& err, journal_errc code) {
  return err.category() == journal_error_category()
         && err.code() == static_cast<std::uint8_t>(code);
}

/// What metrics and readiness checks read from the journal actor.
struct journal_stats {
  std::uint64_t queue_depth = 0; ///< appends waiting for a batch
  std::uint64_t in_flight = 0;   ///< appends in the batch being written
  std::int64_t lag_ns = 0;       ///< age of the oldest unacknowledged append
  std::uint64_t committed = 0;   ///< appends acknowledged as stored
  std::uint64_t duplicates = 0;  ///< of those, already stored before
  std::uint64_t refused = 0;     ///< appends refused as overloaded
  std::uint64_t write_failures = 0;
  std::uint64_t memory_releases = 0; ///< backlogs over, free memory handed back
  bool available = true;             ///< false while the database is failing
  std::uint64_t mailbox_depth = 0;   ///< messages waiting in the actor's mailbox
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, journal_record& x) {
  return f(caf::meta::type_name("journal_record"), x.seq, x.recorded_at, x.node, x.kind,
           x.idempotency_key, x.body);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, append_outcome& x) {
  return f(caf::meta::type_name("append_outcome"), x.seq, x.duplicate);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, journal_stats& x) {
  return f(caf::meta::type_name("journal_stats"), x.queue_depth, x.in_flight, x.lag_ns,
           x.committed, x.duplicates, x.refused, x.write_failures, x.memory_releases,
           x.available, x.mailbox_depth);
}

/// A watcher of the journal: told of the rows of each committed batch.
using journal_subscriber =
  caf::typed_actor<caf::reacts_to<committed_atom, std::vector<journal_record>>>;

/// The journal's protocol, which the compiler checks at every send:
/// (append_atom, record) → append_outcome once its batch committed, or
/// journal_errc::overloaded at once; (read_atom, query) → rows in seq order;
/// (tail_atom, position, limit, filter) → the rows after it in commit order;
/// (stats_atom) → journal_stats; (subscribe_atom, subscriber): committed rows
/// from now on, as `(committed_atom, vector<journal_record>)`; the slot
/// claims and releases and the newest fleet snapshot, passed to the writer.
using journal_handle = caf::typed_actor<
  caf::replies_to<append_atom, journal_record>::with<append_outcome>,
  caf::replies_to<read_atom, journal_query>::with<std::vector<journal_record>>,
  caf::replies_to<tail_atom, journal_position, std::uint64_t,
                  tail_filter>::with<journal_tail_page>,
  caf::replies_to<slot_claim_atom, std::string, std::string,
                  std::uint64_t>::with<bool, std::uint64_t>,
  caf::replies_to<slot_free_atom, std::string>::with<bool>,
  caf::replies_to<slot_list_atom>::with<std::vector<std::string>>,
  caf::replies_to<cordon_claim_atom, cordon_ask>::with<cordon_claim>,
  caf::replies_to<cordon_reset_atom>::with<cordon_window_reset>,
  caf::replies_to<fleet_snapshot_atom>::with<fleet_snapshot>,
  caf::replies_to<stats_atom>::with<journal_stats>,
  caf::reacts_to<subscribe_atom, journal_subscriber>>;

/// The writer's protocol: one batch or one read at a time, each blocking on
/// the database; journal_errc::unavailable when it failed.
using journal_writer_handle = caf::typed_actor<
  caf::replies_to<write_atom,
                  std::vector<journal_record>>::with<std::vector<append_outcome>>,
  caf::replies_to<read_atom, journal_query>::with<std::vector<journal_record>>,
  caf::replies_to<tail_atom, journal_position, std::uint64_t,
                  tail_filter>::with<journal_tail_page>,
  caf::replies_to<slot_claim_atom, std::string, std::string,
                  std::uint64_t>::with<bool, std::uint64_t>,
  caf::replies_to<slot_free_atom, std::string>::with<bool>,
  caf::replies_to<slot_list_atom>::with<std::vector<std::string>>,
  caf::replies_to<cordon_claim_atom, cordon_ask>::with<cordon_claim>,
  caf::replies_to<cordon_reset_atom>::with<cordon_window_reset>,
  caf::replies_to<fleet_snapshot_atom>::with<fleet_snapshot>>;

} // namespace vigil

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(vigil::journal_query)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(vigil::journal_position)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(vigil::journal_tail_page)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(vigil::tail_filter)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(vigil::fleet_snapshot)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(vigil::cordon_ask)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(vigil::cordon_claim)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(vigil::cordon_window_reset)
