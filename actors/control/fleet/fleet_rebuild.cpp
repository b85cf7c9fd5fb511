// The fleet actor's rebuild from the journal (ARCHITECTURE.md §3
// "supervision", §5): the whole journal at startup and on becoming leader,
// one node's rows when its actor crashed; fold_rows() groups the rows into
// each node's events, drain and fabric marks and remediation attempts, and
// the breaker's rows.
#include <algorithm>
#include <functional>
#include <unordered_map>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/control/breaker/breaker_actor.hpp"
#include "actors/control/drain/drain_resource.hpp"
#include "actors/control/fleet/fleet_actor.hpp"
#include "actors/control/fleet/fleet_actor_internal.hpp"
#include "actors/control/fleet/fleet_snapshot.hpp"
#include "actors/control/leader/shard_assignment.hpp"
#include "actors/control/remediation/remediation_resource.hpp"
#include "actors/journal/journal_messages.hpp"
#include "actors/protocol/control_messages.hpp"
#include "runtime/logging.hpp"

namespace vigil {

namespace fleet_detail {

namespace {

void report_undecodable(fleet_actor* self, const rebuild_batch& batch) {
  self->state.stats.undecodable_rows += batch.undecodable.size();
  if (batch.undecodable.empty())
    return;
  std::string seqs;
  for (std::size_t i = 0; i < batch.undecodable.size() && i < 20; ++i)
    seqs += (seqs.empty() ? "" : ", ") + std::to_string(batch.undecodable[i]);
  logger()->error("{} journal event rows no longer decode and were skipped (seq {}{})",
                  batch.undecodable.size(), seqs,
                  batch.undecodable.size() > 20 ? ", …" : "");
}

} // namespace

void read_all(fleet_actor* self, journal_query query,
              std::shared_ptr<rebuild_batch> batch, std::function<void()> done) {
  self->request(self->state.journal, caf::infinite, read_atom::value, query)
    .then(
      [=](const std::vector<journal_record>& rows) mutable {
        fold_rows(*batch, rows);
        self->state.stats.rows_replayed += rows.size();
        if (rows.size() < query.limit)
          return done();
        query.after_seq = rows.back().seq;
        read_all(self, query, batch, done);
      },
      [=](const caf::error& err) {
        // Without its history a node could uncordon too early: retry this
        // page, never skip it.
        logger()->error("journal read for a rebuild failed ({}); retrying in 1 s",
                        caf::to_string(err));
        self->delayed_send(self, std::chrono::seconds{1},
                           pending_read{[=] { read_all(self, query, batch, done); }});
      });
}

namespace {

// Sharded: reads the journal in commit order from `from`, up to and
// including `end` when given, else until caught up; then `done` with where
// the reading stopped.
void read_tail(fleet_actor* self, journal_position from,
               std::optional<journal_position> end, std::shared_ptr<rebuild_batch> batch,
               std::function<void(journal_position)> done) {
  self
    ->request(self->state.journal, caf::infinite, tail_atom::value, from,
              std::uint64_t{fleet_rebuild_page}, tail_filter{})
    .then(
      [=](journal_tail_page& page) {
        std::vector<journal_record> rows;
        bool past_end = false;
        for (std::size_t i = 0; i < page.rows.size(); ++i) {
          if (end && *end < page.positions[i]) {
            past_end = true;
            break;
          }
          rows.push_back(std::move(page.rows[i]));
        }
        fold_rows(*batch, rows);
        self->state.stats.rows_replayed += rows.size();
        if (past_end || page.rows.size() < fleet_rebuild_page)
          return done(end ? *end : page.next);
        read_tail(self, page.next, end, batch, done);
      },
      [=](const caf::error& err) {
        logger()->error("journal tail read for a rebuild failed ({}); retrying in 1 s",
                        caf::to_string(err));
        self->delayed_send(self, std::chrono::seconds{1}, pending_read{[=] {
                             read_tail(self, from, end, batch, done);
                           }});
      });
}

// The newest fleet snapshot a rebuild may start from, or null: none stored,
// pruned with shorter windows than this configuration's, or (a later gain,
// reading up to `end`) taken past where the tail stands.
void with_snapshot(fleet_actor* self, std::optional<journal_position> end,
                   std::function<void(std::shared_ptr<const fleet_snapshot>)> then) {
  self->request(self->state.journal, caf::infinite, fleet_snapshot_atom::value)
    .then(
      [=](fleet_snapshot& found) {
        if (found.id == 0)
          return then(nullptr);
        const auto& st = self->state;
        const auto needed =
          horizons_of(st.settings->correlation, st.settings->breaker_window);
        auto taken_with = snapshot_horizons::from_json(found.horizons);
        if (!taken_with || !taken_with->covers(needed)) {
          logger()->warn("fleet snapshot {} was pruned with shorter windows than "
                         "this configuration's; reading the whole journal",
                         found.id);
          return then(nullptr);
        }
        if (end && *end < found.position)
          return then(nullptr);
        then(std::make_shared<const fleet_snapshot>(std::move(found)));
      },
      [=](const caf::error& err) {
        logger()->warn("no fleet snapshot read ({}); reading the whole journal",
                       caf::to_string(err));
        then(nullptr);
      });
}

// Folds a snapshot's rows from `from` on, a page at a time, in the
// snapshot's order (the journal answers in seq order). A row it names that
// is gone makes the history incomplete: `gone` then, with the batch empty.
void read_snapshot(fleet_actor* self, std::shared_ptr<const fleet_snapshot> snapshot,
                   std::size_t from, std::shared_ptr<rebuild_batch> batch,
                   std::function<void()> done, std::function<void()> gone) {
  if (from >= snapshot->rows.size())
    return done();
  journal_query query;
  const auto to = std::min(snapshot->rows.size(), from + fleet_rebuild_page);
  query.seqs.assign(snapshot->rows.begin() + static_cast<std::ptrdiff_t>(from),
                    snapshot->rows.begin() + static_cast<std::ptrdiff_t>(to));
  self->request(self->state.journal, caf::infinite, read_atom::value, query)
    .then(
      [=](std::vector<journal_record>& rows) {
        std::unordered_map<std::int64_t, journal_record*> by_seq;
        for (auto& row : rows)
          by_seq.emplace(row.seq, &row);
        std::vector<journal_record> ordered;
        ordered.reserve(rows.size());
        for (auto seq : query.seqs) {
          auto i = by_seq.find(seq);
          if (i == by_seq.end()) {
            logger()->error("fleet snapshot {} names journal row {}, which is gone; "
                            "reading the whole journal",
                            snapshot->id, seq);
            *batch = rebuild_batch{};
            return gone();
          }
          ordered.push_back(std::move(*i->second));
        }
        fold_rows(*batch, ordered);
        self->state.stats.rows_replayed += ordered.size();
        self->state.stats.snapshot_rows += ordered.size();
        read_snapshot(self, snapshot, to, batch, done, gone);
      },
      [=](const caf::error& err) {
        logger()->error("journal read for a rebuild failed ({}); retrying in 1 s",
                        caf::to_string(err));
        self->delayed_send(self, std::chrono::seconds{1}, pending_read{[=] {
                             read_snapshot(self, snapshot, from, batch, done, gone);
                           }});
      });
}

// Sharded, remediation slots live in the journal's database and outlive the
// replica that claimed one: one that died between a claim and its CR's
// "created" row left a slot no history names. After a rebuild, each slot of
// a node rebuilt here with nothing running in its history is checked by the
// node actor, after its replay (same sender, same order): with no
// remediation in flight it gives the slot back. A slot of a node without
// an actor (gone from the cluster) is given back here.
void check_slots(fleet_actor* self, std::uint64_t generation,
                 std::set<std::uint32_t> only, std::set<std::string> running) {
  self->request(self->state.journal, caf::infinite, slot_list_atom::value)
    .then(
      [=](const std::vector<std::string>& holders) {
        auto& st = self->state;
        if (st.standby || generation != st.tail_generation)
          return;
        for (const auto& node : holders) {
          if (!owns(st, node) || running.count(node) > 0
              || (!only.empty()
                  && only.count(control::shard_of(node, st.settings->shards)) == 0))
            continue;
          if (auto actor = st.nodes.find(node); actor != st.nodes.end())
            self->send(actor->second, slot_check_atom::value);
          else
            self->send(st.breaker, remedied_atom::value, node);
        }
      },
      [=](const caf::error& err) {
        logger()->warn("the remediation slots could not be read after the rebuild ({}); "
                       "a slot left by a stopped replica stays until the next one",
                       caf::to_string(err));
      });
}

// Reads the journal and hands its history to the node actors of the nodes
// it rebuilds: every node this replica owns (`only` empty: startup, a new
// leader, the first shards), or those of the shards in `only` (shards gained
// later). Routes held meanwhile are released after, those already in the
// rebuilt history dropped.
void rebuild(fleet_actor* self, std::int64_t after_seq,
             std::shared_ptr<rebuild_batch> batch, std::set<std::uint32_t> only) {
  const auto generation = self->state.tail_generation;
  self->state.rebuilding = only;
  auto finish = [=](journal_position read_to) {
    auto& st = self->state;
    if (st.standby || generation != st.tail_generation) // leadership lost meanwhile
      return;
    const bool whole = only.empty();
    const auto k = st.settings->shards;
    // Owned now (a shard lost during the read is not rebuilt) and, for a
    // later gain, among the shards gained.
    auto rebuilt_here = [&](const std::string& node) {
      return owns(st, node) && (whole || only.count(control::shard_of(node, k)) > 0);
    };
    report_undecodable(self, *batch);
    if (whole)
      self->send(st.breaker, replay_atom::value, batch->breaker_rows);
    // Attempts first: the replay ends in a reconcile that may plan new ones.
    std::set<std::string> running; // a CR or its validation without an end
    for (const auto& [name, attempts] : batch->attempts)
      for (const auto& a : attempts)
        if (a.open)
          running.insert(name);
    for (auto& [name, attempts] : batch->attempts)
      if (rebuilt_here(name))
        self->send(node_for(self, name), attempts_atom::value, std::move(attempts));
    std::size_t nodes = 0;
    for (auto& [name, events] : batch->events)
      if (rebuilt_here(name)) {
        ++nodes;
        self->send(node_for(self, name), replay_atom::value, std::move(events),
                   std::move(batch->marks[name]));
      }
    // Node actors started meanwhile (their Node listed) with no history:
    // an empty replay lets them act.
    for (const auto& [name, actor] : st.nodes)
      if (rebuilt_here(name) && batch->events.count(name) == 0)
        self->send(actor, replay_atom::value, std::vector<health_event>{},
                   std::vector<replay_mark>{});
    if (whole) {
      // The fabric window carries on where it was: a port-down just after the
      // restart joins the incident its peers opened (incidents found here
      // were journaled when they formed). Every node's, sharded too: the
      // window is fleet-wide.
      st.fabric = control::fabric_correlator(st.settings->correlation);
      for (const auto& [at, node] : batch->port_downs)
        st.fabric.on_port_down(node, at);
    }
    st.rebuilt_seq = std::max(st.rebuilt_seq, batch->last_seq);
    st.rebuilt = true;
    st.rebuilding.clear();
    logger()->info(
      "rebuilt {} from the journal: {} rows, {} nodes with events, up to seq {}",
      whole ? "the fleet" : std::to_string(only.size()) + " shards gained",
      st.stats.rows_replayed, nodes, batch->last_seq);
    auto held = std::move(st.held);
    st.held.clear();
    for (auto& [event, seq] : held)
      if (owns(st, event.node_name)
          && (!rebuilt_here(event.node_name) || seq > batch->last_seq))
        route(self, std::move(event), seq, st.time->wall_now());
    if (k > 1) {
      check_slots(self, generation, only, std::move(running));
      // The whole rebuild read up to here and covered every shard owned now,
      // those gained during the read too; a later gain read up to tail_at.
      if (whole) {
        st.tail_at = read_to;
        st.pending_gain.clear();
      }
      rebuild_gained(self);
      follow_tail(self);
      return;
    }
    rebuild_gained(self);
  };
  std::optional<journal_position> end;
  if (!only.empty())
    end = self->state.tail_at; // a later gain reads up to where the tail is
  // The whole journal: in commit order when sharded (several replicas
  // append), else by seq.
  auto read_whole = [=] {
    if (self->state.settings->shards > 1)
      return read_tail(self, {}, end, batch, finish);
    journal_query query;
    query.after_seq = after_seq;
    query.limit = fleet_rebuild_page;
    read_all(self, query, batch, [finish] { finish({}); });
  };
  with_snapshot(self, end, [=](std::shared_ptr<const fleet_snapshot> snapshot) {
    if (only.empty()) {
      self->state.stats.snapshot_id = snapshot ? snapshot->id : 0;
      self->state.stats.snapshot_rows = 0;
    }
    if (!snapshot)
      return read_whole();
    // Its rows, then the journal after its position in commit order.
    read_snapshot(
      self, snapshot, 0, batch,
      [=] { read_tail(self, snapshot->position, end, batch, finish); },
      [=] {
        self->state.stats.snapshot_id = 0;
        read_whole();
      });
  });
}

} // namespace

void rebuild_fleet(fleet_actor* self, std::int64_t after_seq,
                   std::shared_ptr<rebuild_batch> batch) {
  self->state.rebuilt_seq = 0;
  rebuild(self, after_seq, std::move(batch), {});
}

void rebuild_gained(fleet_actor* self) {
  auto& st = self->state;
  // Not while a tail read is out: its rows would reach the gained nodes
  // ahead of their history. Its answer calls here again.
  if (st.pending_gain.empty() || !st.rebuilt || st.standby || st.tail_in_flight)
    return;
  auto shards = std::move(st.pending_gain);
  st.pending_gain.clear();
  st.rebuilt = false; // routes wait in `held` until the gained nodes are in
  rebuild(self, 0, std::make_shared<rebuild_batch>(), std::move(shards));
}

// A crashed node actor comes back with its events replayed from the journal.
void restart_node(fleet_actor* self, const std::string& name) {
  auto& st = self->state;
  ++st.stats.restarts;
  logger()->error("node actor {} crashed; restarting it from the journal", name);
  st.replaying[name]; // routes wait until the history is in; the actor too
  auto child = spawn_node(self, name);
  // Its held events are journaled (ingest routes only what is stored): the
  // replay below delivers them; the hold must not deliver them again.
  st.on_hold.drop(name);
  auto batch = std::make_shared<rebuild_batch>();
  journal_query query;
  query.node = name;
  query.limit = fleet_rebuild_page;
  // Sharded, the tail delivers this node's rows after tail_at; the history
  // stops there. (By seq alone, a row committed late with a lower seq would
  // be skipped, and one the tail had not reached yet delivered twice.)
  const bool sharded = st.settings->shards > 1;
  if (sharded)
    query.through = st.tail_at;
  read_all(self, query, batch, [=] {
    report_undecodable(self, *batch);
    auto& st = self->state;
    if (auto a = batch->attempts.find(name); a != batch->attempts.end())
      self->send(child, attempts_atom::value, std::move(a->second));
    self->send(child, replay_atom::value, std::move(batch->events[name]),
               std::move(batch->marks[name]));
    auto waiting = std::move(st.replaying[name]);
    st.replaying.erase(name);
    // Routed once already (fabric rule, hold): only delivered now. Sharded,
    // all of them came from the tail after the history's end.
    for (auto& [event, seq] : waiting)
      if (sharded || seq > batch->last_seq) {
        mark_if_fabric(self, event);
        deliver(self, std::move(event), seq);
      }
  });
}

// The rows this replica's tail reads: its shards' and every replica's
// (journal_store::tail_routing, set by `vigil control` on its writer). The
// owned set is safe to use while the read is out: a shard gained meanwhile
// is rebuilt up to where this read ends (rebuild_gained waits for it).
tail_filter own_rows_filter(const fleet_state& st) {
  return {st.settings->shards, {st.owned.begin(), st.owned.end()}};
}

void follow_tail(fleet_actor* self) {
  auto& st = self->state;
  if (st.settings->shards <= 1 || st.standby || !st.rebuilt || st.tail_in_flight)
    return;
  st.tail_in_flight = true;
  const auto generation = st.tail_generation;
  self
    ->request(st.journal, caf::infinite, tail_atom::value, st.tail_at,
              std::uint64_t{fleet_tail_page}, own_rows_filter(st))
    .then(
      [=](journal_tail_page& page) {
        auto& st = self->state;
        if (generation != st.tail_generation)
          return; // lead() started a new term meanwhile
        st.tail_in_flight = false;
        for (auto& row : page.rows) {
          // A trip, or its reset, on any replica stops or frees them all
          // (the database refuses cordons from the trip on already; the row
          // stops drains and remediations too). Every replica's cordons make
          // the breaker's window the fleet's (its utilisation on /metrics).
          if (row.kind != "event") {
            if (row.kind == breaker_row::tripped || row.kind == breaker_row::reset
                || (row.kind == quarantine_row
                    && classify_row(row).what == folded_row::kind::breaker_cordon))
              self->send(st.breaker, replay_atom::value,
                         std::vector<journal_record>{row});
            continue;
          }
          const bool mine = owns(st, row.node);
          // Another replica's node: only a NIC port's state (the fabric
          // window) matters here; most rows are skipped without a decode
          // (most are left in the database: own_rows_filter).
          if (!mine && !read_by_every_replica(row))
            continue;
          auto event = decode_health_event(row.body);
          if (!event) {
            if (mine) {
              ++st.stats.undecodable_rows;
              logger()->error("journal row {} no longer decodes; skipped", row.seq);
            }
            continue;
          }
          if (!mine) {
            count_port_down(self, *event, row.recorded_at);
            continue;
          }
          ++st.stats.tailed;
          route(self, std::move(*event), row.seq, row.recorded_at);
        }
        st.tail_at = page.next;
        rebuild_gained(self);
        if (page.rows.size() >= fleet_tail_page)
          return follow_tail(self);
        self->delayed_send(self, fleet_tail_interval, tail_atom::value, generation);
      },
      [=](const caf::error& err) {
        auto& st = self->state;
        if (generation != st.tail_generation)
          return;
        st.tail_in_flight = false;
        logger()->warn("journal tail read failed ({}); again in 1 s",
                       caf::to_string(err));
        self->delayed_send(self, std::chrono::seconds{1}, tail_atom::value, generation);
      });
}

} // namespace fleet_detail

void fold_rows(rebuild_batch& into, const std::vector<journal_record>& rows) {
  for (const auto& row : rows) {
    into.last_seq = std::max(into.last_seq, row.seq);
    auto folded = classify_row(row);
    switch (folded.what) {
      case folded_row::kind::ignored: break;
      case folded_row::kind::breaker_state:
      case folded_row::kind::breaker_cordon: into.breaker_rows.push_back(row); break;
      case folded_row::kind::drain_mark:
        into.marks[row.node].push_back({into.events[row.node].size(),
                                        replay_mark::kind::drain,
                                        std::move(folded.drain_key)});
        break;
      case folded_row::kind::fabric_mark:
        for (const auto& n : folded.fabric_nodes)
          into.marks[n].push_back({into.events[n].size(), replay_mark::kind::fabric, {}});
        break;
      case folded_row::kind::attempt:
        into.attempts[row.node].push_back(std::move(folded.attempt));
        break;
      case folded_row::kind::outcome:
      case folded_row::kind::validation:
        // The CR it names no longer runs for this node actor, or its
        // validation does.
        apply_to_attempts(folded, into.attempts[row.node]);
        break;
      case folded_row::kind::undecodable: into.undecodable.push_back(row.seq); break;
      case folded_row::kind::event: {
        auto& event = *folded.event;
        // The fabric window as the live fleet saw it: port-downs by arrival.
        if (control::reports_link_down(event) && control::is_nic_port_down(event))
          into.port_downs.emplace_back(row.recorded_at, event.node_name);
        into.events[event.node_name].push_back(std::move(event));
        break;
      }
    }
  }
}

} // namespace vigil
