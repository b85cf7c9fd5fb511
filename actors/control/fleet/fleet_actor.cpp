// The fleet actor's behaviour and wiring: node actors spawned and
// supervised, the Node watch, agent liveness, leadership changes and the
// summary. Routing is in fleet_routing.cpp, the rebuild from the journal in
// fleet_rebuild.cpp.
#include "actors/control/fleet/fleet_actor.hpp"

#include <algorithm>
#include <iterator>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/control/fleet/fleet_actor_internal.hpp"
#include "actors/control/leader/shard_assignment.hpp"
#include "actors/gateway/kube_gateway_messages.hpp"
#include "actors/protocol/control_messages.hpp"
#include "runtime/logging.hpp"

namespace vigil {

namespace fleet_detail {

std::shared_ptr<spdlog::logger> logger() {
  return component_logger("fleet");
}

node_handle spawn_node(fleet_actor* self, const std::string& name) {
  auto& st = self->state;
  auto child =
    self->spawn(node, name, st.settings, st.gateway, st.journal, st.breaker, st.time);
  self->monitor(child);
  // Spawned while its history is read (a Node listed during a rebuild, a
  // restart): it waits for the replay before it acts.
  if (history_pending(st, name))
    self->send(child, history_atom::value);
  st.nodes[name] = child;
  st.names[child.address()] = name;
  ++st.stats.spawned;
  return child;
}

node_handle node_for(fleet_actor* self, const std::string& name) {
  auto i = self->state.nodes.find(name);
  return i != self->state.nodes.end() ? i->second : spawn_node(self, name);
}

void agent_heard(fleet_actor* self, const std::string& node) {
  auto& st = self->state;
  if (st.liveness.heard(node, st.time->wall_now()))
    self->send(node_for(self, node), agent_quiet_atom::value, false, std::int64_t{0});
}

void stop_nodes(fleet_actor* self, const std::function<bool(const std::string&)>& which) {
  auto& st = self->state;
  for (auto it = st.nodes.begin(); it != st.nodes.end();) {
    if (!which(it->first)) {
      ++it;
      continue;
    }
    // Forgotten at once: their down messages find no name (no restart).
    self->send_exit(it->second, caf::exit_reason::user_shutdown);
    st.names.erase(it->second.address());
    st.replaying.erase(it->first);
    // Journaled: whoever acts on the node next replays them.
    st.on_hold.drop(it->first);
    st.liveness.forget(it->first);
    it = st.nodes.erase(it);
  }
  st.held.erase(std::remove_if(st.held.begin(), st.held.end(),
                               [&](const auto& h) { return which(h.first.node_name); }),
                st.held.end());
}

} // namespace fleet_detail

bool fleet_detail::history_pending(const fleet_state& st, const std::string& node) {
  if (st.replaying.count(node) > 0)
    return true;
  const auto shard = control::shard_of(node, st.settings->shards);
  // A shard gained while another's history was being read waits for a read
  // of its own: its node actors, started by the new Node list, must not act
  // on their Nodes (uncordon one whose reboot the history holds) before it.
  if (st.pending_gain.count(shard) > 0)
    return true;
  if (st.rebuilt)
    return false;
  return st.rebuilding.empty() || st.rebuilding.count(shard) > 0;
}

bool owns(const fleet_state& st, const std::string& node) {
  if (st.standby)
    return false;
  return st.settings->shards <= 1
         || st.owned.count(control::shard_of(node, st.settings->shards)) > 0;
}

using namespace fleet_detail;

namespace {

using nlohmann::json;

bool is_gpu_node(const json& object, const control::label_selector& selector) {
  std::map<std::string, std::string> labels;
  auto metadata = object.find("metadata");
  if (metadata != object.end() && metadata->is_object())
    if (auto l = metadata->find("labels"); l != metadata->end() && l->is_object())
      for (const auto& [key, value] : l->items())
        if (value.is_string())
          labels[key] = value.get<std::string>();
  return selector.matches(labels);
}

std::string name_of(const json& object) {
  auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object())
    return {};
  auto name = metadata->find("name");
  return name != metadata->end() && name->is_string() ? name->get<std::string>()
                                                      : std::string{};
}

// The breaker's denominator. Sharded, the breaker holds the limits for this
// replica's share: the GPU nodes of the shards it owns, out of the fleet's.
void send_gpu_count(fleet_actor* self) {
  auto& st = self->state;
  std::uint64_t counted = st.gpu_nodes.size();
  if (st.settings->shards > 1) {
    counted = 0;
    for (const auto& node : st.gpu_nodes)
      counted += owns(st, node) ? 1 : 0;
  }
  self->send(st.breaker, gpunodes_atom::value, counted,
             static_cast<std::uint64_t>(st.gpu_nodes.size()));
}

void publish_gpu_count(fleet_actor* self, std::size_t before) {
  auto& st = self->state;
  if (st.gpu_nodes.size() != before || !st.listed)
    send_gpu_count(self);
}

// `node` is the Node itself, or one item of a shared List: the node actor
// reads it in place (shared_json's aliasing keeps the List alive).
void observe(fleet_actor* self, const shared_json& node) {
  auto& st = self->state;
  const json& object = *node;
  auto name = name_of(object);
  if (name.empty())
    return;
  // Every Node counts for the GPU-node count; only those this replica acts
  // on get a node actor and have their agents watched.
  const bool mine = owns(st, name);
  if (is_gpu_node(object, st.settings->gpu_nodes)) {
    st.gpu_nodes.insert(name);
    if (mine)
      st.liveness.watch(name, st.time->wall_now()); // GPU nodes run the agent
  } else {
    st.gpu_nodes.erase(name);
    st.liveness.forget(name);
  }
  if (mine)
    self->send(node_for(self, name), observe_atom::value, node);
}

void on_watch_event(fleet_actor* self, const kube_watch_event& event) {
  auto& st = self->state;
  ++st.stats.watch_events;
  if (event.type == "BOOKMARK")
    return;
  if (!event.object || !event.object->is_object()) {
    logger()->warn("Node watch: unreadable {} object", event.type);
    return;
  }
  const json& object = *event.object;
  const auto before = st.gpu_nodes.size();
  if (event.type == "LISTED") {
    // One page of the list: its Nodes are observed now (their actors run
    // while the next page is read); the count is published at the last.
    if (event.list_page == 0)
      st.listing.clear();
    auto items = object.find("items");
    if (items != object.end() && items->is_array())
      for (const auto& item : *items) {
        st.listing.insert(name_of(item));
        observe(self, shared_json(event.object, &item));
      }
    if (!event.last_page)
      return;
    for (auto it = st.gpu_nodes.begin(); it != st.gpu_nodes.end();)
      it = st.listing.count(*it) > 0 ? std::next(it) : st.gpu_nodes.erase(it);
    st.listing.clear();
    send_gpu_count(self); // earlier pages may have changed it too
    if (!st.listed)
      logger()->info("Node list seen: {} nodes, {} GPU nodes", st.nodes.size(),
                     st.gpu_nodes.size());
    if (st.gpu_nodes.empty() && !st.nodes.empty())
      logger()->warn("no Node matches control.gpu_node_label: the breaker's percentage "
                     "limit has no GPU nodes to count (a typo in the selector?)");
    st.listed = true;
    return;
  }
  if (event.type == "DELETED") {
    // The actor stays: its events are still active if the node comes back
    // under the same name; it waits for the watch to show the Node again.
    st.gpu_nodes.erase(name_of(object));
  } else {
    observe(self, event.object);
  }
  publish_gpu_count(self, before);
}

void start_watch(fleet_actor* self) {
  kube_watch_spec spec;
  spec.resource = kube::api_resource{"", "v1", "nodes", false};
  self->request(self->state.gateway, caf::infinite, watch_atom::value, std::move(spec))
    .then([=](std::uint64_t id) { self->state.watch_id = id; },
          [=](const caf::error& err) {
            logger()->error("cannot watch Nodes: {}", caf::to_string(err));
          });
}

std::string fleet_summary(const fleet_state& st) {
  const auto& c = *st.settings->counters;
  return json{{"nodes", st.nodes.size()},
              {"standby", st.standby},
              {"droppedStandby", st.stats.dropped_standby},
              {"shards", st.settings->shards},
              {"shardsOwned", st.owned},
              {"tailed", st.stats.tailed},
              {"shardChanges", st.stats.shard_changes},
              {"cordons", c.cordons.load()},
              {"uncordons", c.uncordons.load()},
              {"quarantinesHeld", c.quarantines_held.load()},
              {"drainsStarted", c.drains_started.load()},
              {"drainsStartedPartial", c.drains_started_partial.load()},
              {"drainsSucceeded", c.drains_succeeded.load()},
              {"drainsCancelled", c.drains_cancelled.load()},
              {"drainsSkipped", c.drains_skipped.load()},
              {"drainsHeld", c.drains_held.load()},
              {"evictions", c.evictions.load()},
              {"podDeletions", c.pod_deletions.load()},
              {"ruleFirings", c.rule_firings.load()},
              {"ruleFiringsRepeatedXid", c.rule_firings_repeated_xid.load()},
              {"ruleFiringsNicFlap", c.rule_firings_nic_flap.load()},
              {"ruleFiringsNicDrop", c.rule_firings_nic_drop.load()},
              {"fabricIncidents", c.fabric_incidents.load()},
              {"remediationsStarted", c.remediations_started.load()},
              {"remediationsSucceeded", c.remediations_succeeded.load()},
              {"remediationsFailed", c.remediations_failed.load()},
              {"remediationsSkipped", c.remediations_skipped.load()},
              {"remediationsManual", c.remediations_manual.load()},
              {"escalations", c.escalations.load()},
              {"gpuNodes", st.gpu_nodes.size()},
              {"rebuilt", st.rebuilt},
              {"listed", st.listed},
              {"routed", st.stats.routed},
              {"spawned", st.stats.spawned},
              {"restarts", st.stats.restarts},
              {"rowsReplayed", st.stats.rows_replayed},
              {"snapshotId", st.stats.snapshot_id},
              {"snapshotRows", st.stats.snapshot_rows},
              {"undecodableRows", st.stats.undecodable_rows},
              {"watchEvents", st.stats.watch_events}}
    .dump();
}

void arm_liveness(fleet_actor* self) {
  auto& st = self->state;
  const auto window = st.liveness.window();
  if (st.liveness_armed || window.count() == 0 || st.standby)
    return;
  st.liveness_armed = true;
  self->delayed_send(self, std::min<caf::timespan>(window, std::chrono::seconds{60}),
                     liveness_atom::value);
}

// Agents silent for the window: their nodes say so (a condition and an Event).
void check_liveness(fleet_actor* self) {
  auto& st = self->state;
  st.liveness_armed = false;
  if (st.standby)
    return;
  for (const auto& [node, since] : st.liveness.newly_silent(st.time->wall_now())) {
    logger()->warn("node {}: no heartbeat or event from its agent since {}", node,
                   format_rfc3339(since));
    self->send(node_for(self, node), agent_quiet_atom::value, true,
               static_cast<std::int64_t>(since.time_since_epoch().count()));
  }
  arm_liveness(self);
}

// Leadership changes: the new leader rebuilds everything from the journal
// (what the old leader did is there); a replica that stops leading stops its
// node actors (and their drains) and its Node watch.
void lead(fleet_actor* self, bool leading) {
  auto& st = self->state;
  if (leading != st.standby)
    return;
  st.standby = !leading;
  // A tail read still out belongs to the old term: its answer is ignored.
  ++st.tail_generation;
  st.tail_in_flight = false;
  st.tail_at = {};
  if (leading) {
    st.rebuilt = false;
    st.listed = !st.watch_nodes;
    st.held.clear();
    rebuild_fleet(self, 0, std::make_shared<rebuild_batch>());
    if (st.watch_nodes)
      start_watch(self);
    // Silence counts from now: a new leader has heard nobody yet.
    st.liveness = control::agent_liveness(st.settings->agent_silence);
    arm_liveness(self);
    return;
  }
  // Forget them at once: their down messages then find no name (no restart),
  // and a quick re-election never routes to a dying actor.
  stop_nodes(self, [](const std::string&) { return true; });
  st.replaying.clear();
  st.held.clear();
  st.pending_gain.clear();
  // Journaled: the next leader's rebuild replays them (without the hold; the
  // fabric window is rebuilt from the journal's port-downs).
  st.on_hold.clear();
  if (st.watch_id != 0) {
    self->send(st.gateway, unwatch_atom::value, st.watch_id);
    st.watch_id = 0;
  }
}

// Shards (settings->shards > 1): the shard elector says which this replica
// acts on. Lost shards stop their node actors at once (the elector stops
// acting before it writes a release, and before its renew deadline lets the
// Lease expire); gained shards are rebuilt from the journal, the first ones
// as a leader's whole rebuild, later ones on their own, one rebuild at a time.
void own_shards(fleet_actor* self, const std::vector<std::uint32_t>& shards) {
  auto& st = self->state;
  if (st.settings->shards <= 1)
    return;
  std::set<std::uint32_t> next(shards.begin(), shards.end());
  if (next == st.owned)
    return;
  ++st.stats.shard_changes;
  std::set<std::uint32_t> lost, gained;
  std::set_difference(st.owned.begin(), st.owned.end(), next.begin(), next.end(),
                      std::inserter(lost, lost.end()));
  std::set_difference(next.begin(), next.end(), st.owned.begin(), st.owned.end(),
                      std::inserter(gained, gained.end()));
  const auto k = st.settings->shards;
  logger()->info("shards owned now: {} ({} gained, {} lost)", next.size(), gained.size(),
                 lost.size());
  st.owned = std::move(next);
  for (auto shard : lost)
    st.pending_gain.erase(shard);
  if (st.owned.empty())
    return lead(self, false);
  if (!lost.empty())
    stop_nodes(self, [&](const std::string& node) {
      return lost.count(control::shard_of(node, k)) > 0;
    });
  if (st.standby) {
    lead(self, true); // a whole rebuild, kept to the shards owned
  } else {
    st.pending_gain.insert(gained.begin(), gained.end());
    if (st.rebuilt)
      rebuild_gained(self);
    // The gained nodes' actors need their Node objects: a new watch lists
    // them all again (shards change rarely; keeping every Node's object would
    // cost more than a list).
    if (!gained.empty() && st.watch_nodes) {
      if (st.watch_id != 0)
        self->send(st.gateway, unwatch_atom::value, st.watch_id);
      st.watch_id = 0;
      start_watch(self);
    }
  }
  // The breaker's GPU-node counts follow the shards (a new Node list sends
  // them too).
  if (st.listed)
    send_gpu_count(self);
}

// Asks every node actor `atom` (its summary or its tile) by message, so
// nothing but the mailboxes is touched; answered when the last reply (or
// error) is in. A node that does not answer within 5 s is left out.
template <class Atom>
caf::result<std::vector<std::string>> ask_every_node(fleet_actor* self, Atom atom) {
  struct gathering {
    caf::response_promise promise;
    std::vector<std::string> answers;
    std::size_t waiting = 0;
  };
  auto g = std::make_shared<gathering>();
  g->promise = self->make_response_promise();
  g->waiting = self->state.nodes.size();
  g->answers.reserve(g->waiting);
  if (g->waiting == 0)
    g->promise.deliver(std::vector<std::string>{});
  auto one_done = [g] {
    if (--g->waiting == 0)
      g->promise.deliver(std::move(g->answers));
  };
  for (const auto& [name, node] : self->state.nodes)
    self->request(node, std::chrono::seconds(5), atom)
      .then(
        [g, one_done](std::string& answer) {
          g->answers.push_back(std::move(answer));
          one_done();
        },
        [one_done](caf::error&) { one_done(); });
  return g->promise;
}

// Hands `atom` to the node actor of `node`, which answers; the promise
// makes sure nothing else does. A node the fleet has no actor for is an error.
template <class Atom>
void ask_node(fleet_actor* self, const std::string& node, Atom atom) {
  auto rp = self->make_response_promise();
  auto i = self->state.nodes.find(node);
  if (i == self->state.nodes.end())
    rp.deliver(caf::make_error(caf::sec::invalid_argument, "no such node: " + node));
  else
    rp.delegate(i->second, atom);
}

} // namespace

caf::behavior fleet(fleet_actor* self, std::shared_ptr<const node_settings> settings,
                    kube_gateway_handle gateway, journal_handle journal,
                    breaker_handle breaker, std::shared_ptr<const clock> time,
                    bool watch_nodes, bool await_leadership) {
  auto& st = self->state;
  st.settings = std::move(settings);
  st.fabric = control::fabric_correlator(st.settings->correlation);
  st.on_hold = control::fabric_hold(st.settings->correlation.fabric_hold);
  st.gateway = std::move(gateway);
  st.journal = std::move(journal);
  st.breaker = std::move(breaker);
  st.time = std::move(time);
  st.liveness = control::agent_liveness(st.settings->agent_silence);
  st.listed = !watch_nodes;
  self->set_down_handler([=](const caf::down_msg& msg) {
    auto& st = self->state;
    auto i = st.names.find(msg.source);
    if (i == st.names.end())
      return;
    auto name = i->second;
    st.names.erase(i);
    st.nodes.erase(name);
    if (!st.stopping && msg.reason != caf::exit_reason::normal
        && msg.reason != caf::exit_reason::user_shutdown) {
      auto& crashes = st.crashes[name];
      ++crashes.restarts;
      crashes.last_reason = caf::to_string(msg.reason);
      restart_node(self, name);
    }
  });
  self->set_exit_handler([=](const caf::exit_msg& msg) {
    // The node actors go with the fleet (they are monitored, not linked).
    self->state.stopping = true;
    for (auto& [name, child] : self->state.nodes)
      self->send_exit(child, msg.reason);
    self->quit(msg.reason);
  });
  st.watch_nodes = watch_nodes;
  st.standby = true;
  if (!await_leadership)
    lead(self, true);
  return {
    [=](leader_atom, bool leading) { lead(self, leading); },
    [=](snapshot_turn_atom) {
      // One replica takes them, once its own state is in.
      const auto& st = self->state;
      return !st.standby && st.rebuilt
             && (st.settings->shards <= 1 || st.owned.count(0) > 0);
    },
    [=](shards_atom, const std::vector<std::uint32_t>& shards) {
      own_shards(self, shards);
    },
    [=](route_atom, health_event& event, std::int64_t seq) {
      auto& st = self->state;
      if (st.standby) {
        ++st.stats.dropped_standby; // journaled; the leader's rebuild has it
        return;
      }
      // Sharded, any replica may have journaled an event: every replica
      // takes its nodes' events from the journal's tail (follow_tail).
      if (st.settings->shards > 1)
        return;
      if (!st.rebuilt) {
        st.held.emplace_back(std::move(event), seq);
        return;
      }
      route(self, std::move(event), seq, self->state.time->wall_now());
    },
    // Only what is due goes: a timer left from before a leadership change
    // or an earlier hold releases nothing early.
    [=](fabric_hold_expired_atom, const std::string& node) { release_held(self, node); },
    [=](agent_heard_atom, const std::string& node) {
      if (owns(self->state, node))
        agent_heard(self, node);
    },
    [=](gpu_facts_atom atom, const std::string& node, agent_gpu_facts& facts) {
      if (owns(self->state, node))
        self->send(node_for(self, node), atom, std::move(facts));
    },
    [=](allocations_atom atom, gpu_allocations& report) {
      if (owns(self->state, report.node)) {
        auto node = node_for(self, report.node);
        self->send(node, atom, std::move(report));
      }
    },
    [=](liveness_atom) { check_liveness(self); },
    [=](const kube_watch_event& event) {
      if (!self->state.standby) // a late line of a watch given up on
        on_watch_event(self, event);
    },
    [=](const pending_read& retry) { retry.again(); },
    [=](tail_atom, std::uint64_t generation) {
      if (generation == self->state.tail_generation)
        follow_tail(self);
    },
    // The console's Trace: the node actor's observed base takes it from here.
    [=](trace_atom, const std::string& node, caf::actor& sink, std::uint32_t max_messages,
        std::uint32_t seconds) {
      auto it = self->state.nodes.find(node);
      if (it == self->state.nodes.end())
        return caf::anon_send(sink, trace_end_atom::value, "no node actor for " + node);
      caf::anon_send(caf::actor_cast<caf::actor>(it->second), trace_atom::value,
                     std::move(sink), max_messages, seconds);
    },
    [=](summary_atom) {
      auto summary = json::parse(fleet_summary(self->state));
      summary["mailboxDepth"] = self->mailbox().size();
      summary["messages"] =
        self->messages().summary(self->system(), message_stats::clock::now());
      auto restarted = json::array();
      for (const auto& [node, crashes] : self->state.crashes)
        restarted.push_back({{"node", node},
                             {"restarts", crashes.restarts},
                             {"lastCrash", crashes.last_reason}});
      summary["restartedNodes"] = std::move(restarted);
      summary["nodeMailboxHigh"] =
        self->state.settings->counters->node_mailbox_high.load();
      return summary.dump();
    },
    [=](node_summaries_atom) { return ask_every_node(self, summary_atom::value); },
    [=](tile_atom) { return ask_every_node(self, tile_atom::value); },
    [=](children_atom atom, const std::string& node) { ask_node(self, node, atom); },
    [=](summary_atom atom, const std::string& node) { ask_node(self, node, atom); },
  };
}

} // namespace vigil
