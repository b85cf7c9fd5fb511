#include "actors/control/breaker/breaker_actor.hpp"

#include <algorithm>
#include <functional>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/control/node/node_actor.hpp"
#include "actors/journal/journal_messages.hpp"
#include "actors/protocol/control_messages.hpp"
#include "runtime/logging.hpp"

namespace vigil {

namespace {

journal_record trip_row(const control::circuit_breaker& b) {
  journal_record row;
  row.recorded_at = *b.tripped_at();
  row.kind = breaker_row::tripped;
  row.idempotency_key = std::string(breaker_row::tripped) + "/"
                        + std::to_string(unix_seconds(row.recorded_at)) + "."
                        + std::to_string(unix_nanos(row.recorded_at));
  row.body =
    nlohmann::json{{"reason", b.trip_reason()}, {"at", format_rfc3339(row.recorded_at)}}
      .dump();
  return row;
}

journal_record reset_row(wall_time now) {
  journal_record row;
  row.recorded_at = now;
  row.kind = breaker_row::reset;
  row.idempotency_key = std::string(breaker_row::reset) + "/"
                        + std::to_string(unix_seconds(now)) + "."
                        + std::to_string(unix_nanos(now));
  row.body = nlohmann::json{{"at", format_rfc3339(now)}}.dump();
  return row;
}

// A trip is refused to the asking node at once; the row is journaled so the
// trip survives a restart. A failed append is logged loudly: the breaker stays
// tripped in memory either way (failing safe).
void journal_trip(breaker_actor* self) {
  auto row = trip_row(self->state.breaker);
  self->state.own_rows.insert(row.idempotency_key);
  self->request(self->state.journal, caf::infinite, append_atom::value, std::move(row))
    .then([](const append_outcome&) {},
          [](const caf::error& err) {
            component_logger("breaker")->error(
              "breaker: the trip could not be journaled ({}); it holds until "
              "this process restarts",
              caf::to_string(err));
          });
}

// An operator's reset at `at`: journaled first (an acknowledged reset is
// never lost on restart), then applied here.
void journal_reset(breaker_actor* self, wall_time at,
                   caf::typed_response_promise<std::string> rp) {
  auto row = reset_row(at);
  self->state.own_rows.insert(row.idempotency_key);
  self->request(self->state.journal, caf::infinite, append_atom::value, std::move(row))
    .then(
      [=](const append_outcome&) mutable {
        self->state.breaker.reset(at);
        self->state.reset_at = std::max(self->state.reset_at, at);
        component_logger("breaker")->warn("circuit breaker reset by an operator");
        rp.deliver(std::string("reset"));
      },
      [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
}

// A new cordon of `node`: "" when granted, else why not (a refusal that
// trips the breaker journals the trip).
std::string admit_cordon(breaker_actor* self, const std::string& node) {
  auto& st = self->state;
  auto refusal = st.breaker.admit_cordon(node, st.gpu_nodes, st.time->wall_now());
  if (refusal == control::breaker_refusal::none) {
    ++st.stats.admitted;
    return {};
  }
  ++st.stats.refused;
  if (refusal == control::breaker_refusal::trips_now) {
    ++st.stats.trips;
    component_logger("breaker")->error(
      "circuit breaker tripped: {}; no new cordon, drain or remediation "
      "starts until `vigil breaker reset`",
      st.breaker.trip_reason());
    journal_trip(self);
  }
  return std::string(control::to_string(refusal)) + ": " + st.breaker.trip_reason();
}

// Sharded (in_journal): the cordon is decided in the journal's database
// across replicas (journal_store::claim_cordon) against the fleet's GPU
// nodes; a trip found there (another replica's, not yet read from the
// tail) or made now holds here too. A database failure is an error, not a
// refusal: the node actor asks again later, and nothing is cordoned
// uncounted.
void claim_cordon(breaker_actor* self, const std::string& node,
                  caf::typed_response_promise<std::string> rp) {
  auto& st = self->state;
  const auto& config = st.breaker.config();
  cordon_ask ask;
  ask.node = node;
  ask.now = st.time->wall_now();
  ask.window = config.window;
  ask.reset_at = st.reset_at;
  ask.over_limit = [config, gpu_nodes = st.fleet_gpu_nodes](std::size_t count) {
    return control::cordon_limit_exceeded(config, count, gpu_nodes);
  };
  self->request(st.journal, caf::infinite, cordon_claim_atom::value, std::move(ask))
    .then(
      [=](const cordon_claim& claim) mutable {
        auto& st = self->state;
        st.fleet_cordons = claim.counted;
        if (claim.granted) {
          ++st.stats.admitted;
          // Before the tail has it; at the database's time, as it was counted.
          st.breaker.restore_cordon(claim.decided_at, node);
          rp.deliver(std::string{});
          return;
        }
        ++st.stats.refused;
        const bool was_tripped = st.breaker.tripped();
        st.breaker.restore_trip(claim.tripped_at, claim.reason);
        if (claim.trips_now) {
          ++st.stats.trips;
          component_logger("breaker")->error(
            "circuit breaker tripped: {}; no new cordon, drain or remediation "
            "starts on any replica until `vigil breaker reset`",
            claim.reason);
          journal_trip(self);
        } else if (!was_tripped) {
          component_logger("breaker")->error(
            "circuit breaker tripped on another replica: {}", claim.reason);
        }
        rp.deliver(std::string(control::to_string(claim.trips_now
                                                    ? control::breaker_refusal::trips_now
                                                    : control::breaker_refusal::tripped))
                   + ": " + claim.reason);
      },
      [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
}

// How much of its limits the window has used. Sharded, the window holds
// every replica's cordons (this one's as decided, the others' as the
// journal's tail brings them) and the limits are the fleet's.
double utilisation(breaker_state& st, wall_time now) {
  const bool fleet = st.breaker.config().in_journal;
  return st.breaker.utilisation(fleet ? st.fleet_gpu_nodes : st.gpu_nodes, now);
}

// A new cordon asked for once the GPU nodes are counted.
void decide_cordon(breaker_actor* self, const std::string& node,
                   caf::typed_response_promise<std::string> rp) {
  auto& st = self->state;
  if (!st.breaker.config().in_journal || st.breaker.tripped()) {
    rp.deliver(admit_cordon(self, node));
    return;
  }
  claim_cordon(self, node, std::move(rp));
}

} // namespace

void restore_breaker(control::circuit_breaker& breaker,
                     const std::vector<journal_record>& rows) {
  for (const auto& row : rows) {
    if (row.kind == breaker_row::reset) {
      breaker.reset(row.recorded_at);
    } else if (row.kind == quarantine_row) {
      breaker.restore_cordon(row.recorded_at, row.node);
    } else if (row.kind == breaker_row::tripped) {
      auto body = nlohmann::json::parse(row.body, nullptr, false);
      std::string reason =
        body.is_object() && body.contains("reason") && body["reason"].is_string()
          ? body["reason"].get<std::string>()
          : "tripped (reason not recorded)";
      breaker.restore_trip(row.recorded_at, reason);
    }
  }
}

namespace {

// The GPU nodes the limits apply to (this replica's, sharded) and the
// fleet's; cordons that waited for a count are answered.
void count_gpu_nodes(breaker_actor* self, std::uint64_t counted, std::uint64_t fleet) {
  auto& st = self->state;
  st.gpu_nodes = counted;
  st.fleet_gpu_nodes = fleet;
  st.gpu_nodes_known = true;
  auto waiting = std::move(st.waiting_admits);
  st.waiting_admits.clear();
  for (auto& [node, rp] : waiting)
    decide_cordon(self, node, std::move(rp));
}

// in_journal: the pool's slots are claimed in the journal's database,
// across replicas; `answer` gets "" or why not. A failed claim is a refusal
// (the remediation is held and asks again): it never starts on a budget it
// could not check.
void claim_slot(breaker_actor* self, const std::string& node, const std::string& pool,
                std::uint64_t budget, std::function<void(std::string)> answer) {
  self
    ->request(self->state.journal, caf::infinite, slot_claim_atom::value, pool, node,
              budget)
    .then(
      [=](bool granted, std::uint64_t others) {
        if (granted) {
          self->state.releasing.erase(node);
          return answer({});
        }
        answer("pool \"" + pool + "\" has " + std::to_string(others)
               + " remediations in flight across the replicas, its budget");
      },
      [=](const caf::error& err) {
        answer("the pool's budget could not be checked (" + caf::to_string(err) + ")");
      });
}

// Gives the node's slot back in the journal's database; a failure is tried
// again in 5 s (a slot left behind would hold the pool's budget), unless
// the node claimed a slot again meanwhile.
void free_slot(breaker_actor* self, const std::string& node) {
  self->state.releasing.insert(node);
  self->request(self->state.journal, caf::infinite, slot_free_atom::value, node)
    .then([=](bool) { self->state.releasing.erase(node); },
          [=](const caf::error& err) {
            component_logger("breaker")->error(
              "{}'s remediation slot could not be given back ({}); again in 5 s", node,
              caf::to_string(err));
            self->delayed_send(self, std::chrono::seconds{5}, slot_free_atom::value,
                               node);
          });
}

} // namespace

breaker_handle::behavior_type breaker(breaker_actor* self, control::breaker_config config,
                                      journal_handle journal,
                                      std::shared_ptr<const clock> time) {
  self->state.breaker = control::circuit_breaker(std::move(config));
  self->state.journal = std::move(journal);
  self->state.time = std::move(time);
  self->set_down_handler([=](const caf::down_msg& down) {
    auto& holders = self->state.slot_holders;
    for (auto i = holders.begin(); i != holders.end(); ++i)
      if (i->second == down.source) {
        component_logger("breaker")->warn(
          "the actor holding {}'s remediation slot is gone ({}); slot given back",
          i->first, caf::to_string(down.reason));
        self->state.breaker.finish_remediation(i->first);
        holders.erase(i);
        return;
      }
  });
  return {
    [=](admit_atom, const std::string& node) -> caf::result<std::string> {
      auto& st = self->state;
      auto rp = self->make_response_promise<std::string>();
      if (!st.gpu_nodes_known && st.breaker.config().max_cordoned_percent < 100.0)
        st.waiting_admits.emplace_back(node, rp);
      else
        decide_cordon(self, node, rp);
      return rp;
    },
    [=](permit_atom, const std::string&) -> std::string {
      auto& st = self->state;
      if (!st.breaker.tripped())
        return {};
      return "circuit breaker tripped: " + st.breaker.trip_reason();
    },
    [=](remedy_atom, const std::string& node,
        const std::string& pool) -> caf::result<std::string> {
      auto& st = self->state;
      if (st.breaker.config().in_journal) {
        if (st.breaker.tripped())
          return "circuit breaker tripped: " + st.breaker.trip_reason();
        auto rp = self->make_response_promise<std::string>();
        claim_slot(self, node, pool, st.breaker.config().max_concurrent_per_pool,
                   [=](std::string refusal) mutable { rp.deliver(std::move(refusal)); });
        return rp;
      }
      switch (st.breaker.admit_remediation(node, pool)) {
        case control::breaker_refusal::none:
          if (auto holder = caf::actor_cast<caf::actor>(self->current_sender());
              holder && st.slot_holders[node] != holder.address()) {
            self->monitor(holder);
            st.slot_holders[node] = holder.address();
          }
          return std::string{};
        case control::breaker_refusal::pool_budget:
          return "pool \"" + pool + "\" has " + std::to_string(st.breaker.in_flight(pool))
                 + " remediations in flight, its budget";
        default: return "circuit breaker tripped: " + st.breaker.trip_reason();
      }
    },
    [=](remedied_atom, const std::string& node) {
      auto& st = self->state;
      if (st.breaker.config().in_journal)
        return free_slot(self, node);
      st.breaker.finish_remediation(node);
      if (auto holder = st.slot_holders.find(node); holder != st.slot_holders.end()) {
        self->demonitor(holder->second);
        st.slot_holders.erase(holder);
      }
    },
    [=](slot_free_atom, const std::string& node) {
      if (self->state.releasing.count(node) > 0)
        free_slot(self, node);
    },
    [=](occupy_atom, const std::string& node, const std::string& pool) {
      auto& st = self->state;
      if (st.breaker.config().in_journal) {
        claim_slot(self, node, pool, 0, [=](const std::string& refusal) {
          if (!refusal.empty())
            component_logger("breaker")->warn(
              "{}'s running remediation holds no slot: {}", node, refusal);
        });
        return;
      }
      st.breaker.occupy(node, pool);
    },
    [=](reset_atom) -> caf::result<std::string> {
      auto rp = self->make_response_promise<std::string>();
      if (!self->state.breaker.config().in_journal) {
        journal_reset(self, self->state.time->wall_now(), rp);
        return rp;
      }
      // Sharded: the fleet's window and trip go first, in the database, and
      // the reset is stamped by its clock, the one the window is kept by.
      self->request(self->state.journal, caf::infinite, cordon_reset_atom::value)
        .then(
          [=](const cordon_window_reset& reset) mutable {
            journal_reset(self, reset.at.value_or(self->state.time->wall_now()), rp);
          },
          [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
      return rp;
    },
    [=](gpunodes_atom, std::uint64_t count) { count_gpu_nodes(self, count, count); },
    [=](gpunodes_atom, std::uint64_t owned, std::uint64_t fleet) {
      count_gpu_nodes(self, owned, fleet);
    },
    [=](replay_atom, std::vector<journal_record>& rows) {
      auto& own = self->state.own_rows;
      rows.erase(std::remove_if(rows.begin(), rows.end(),
                                [&](const journal_record& row) {
                                  return own.erase(row.idempotency_key) > 0;
                                }),
                 rows.end());
      restore_breaker(self->state.breaker, rows);
      for (const auto& row : rows)
        if (row.kind == breaker_row::reset)
          self->state.reset_at = std::max(self->state.reset_at, row.recorded_at);
      if (self->state.breaker.tripped())
        component_logger("breaker")->warn("circuit breaker restored as tripped: {}",
                                          self->state.breaker.trip_reason());
    },
    [=](summary_atom) -> std::string {
      auto& st = self->state;
      auto now = st.time->wall_now();
      return nlohmann::json{{"tripped", st.breaker.tripped()},
                            {"reason", st.breaker.trip_reason()},
                            {"cordonsInWindow", st.breaker.cordons_in_window(now)},
                            {"utilisation", utilisation(st, now)},
                            {"gpuNodes", st.gpu_nodes},
                            {"fleetGpuNodes", st.fleet_gpu_nodes},
                            {"fleetCordonsInWindow", st.fleet_cordons},
                            {"admitted", st.stats.admitted},
                            {"refused", st.stats.refused},
                            {"trips", st.stats.trips},
                            {"mailboxDepth", self->mailbox().size()},
                            {"messages", self->messages().summary(
                                           self->system(), message_stats::clock::now())}}
        .dump();
    },
  };
}

} // namespace vigil
