#include "actors/control/fleet/fleet_actor.hpp"

#include <functional>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/control/breaker/breaker_actor.hpp"
#include "actors/control/drain/drain_resource.hpp"
#include "actors/control/remediation/remediation_resource.hpp"
#include "actors/gateway/kube_gateway_messages.hpp"
#include "actors/journal/journal_messages.hpp"
#include "messages/control_messages.hpp"
#include "runtime/logging.hpp"

namespace vigil {

namespace {

using nlohmann::json;

std::shared_ptr<spdlog::logger> logger() {
  return component_logger("fleet");
}

/// Journal row kind of a HealthEvent (the kind fleet_view replays too).
constexpr const char* event_row = "event";

} // namespace

/// A rebuild's journal read to try again (the journal was unavailable).
struct pending_read {
  journal_query query;
  std::shared_ptr<rebuild_batch> batch;
  std::function<void()> done;
};

} // namespace vigil

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(vigil::pending_read)

namespace vigil {

namespace {

caf::actor spawn_node(fleet_actor* self, const std::string& name) {
  auto& st = self->state;
  auto child =
    self->spawn(node, name, st.settings, st.gateway, st.journal, st.breaker, st.time);
  self->monitor(child);
  st.nodes[name] = child;
  st.names[child.address()] = name;
  ++st.stats.spawned;
  return child;
}

caf::actor node_for(fleet_actor* self, const std::string& name) {
  auto i = self->state.nodes.find(name);
  return i != self->state.nodes.end() ? i->second : spawn_node(self, name);
}

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

void publish_gpu_count(fleet_actor* self, std::size_t before) {
  auto& st = self->state;
  if (st.gpu_nodes.size() != before || !st.listed)
    self->send(st.breaker, gpunodes_atom::value,
               static_cast<std::uint64_t>(st.gpu_nodes.size()));
}

void observe(fleet_actor* self, const json& object) {
  auto& st = self->state;
  auto name = name_of(object);
  if (name.empty())
    return;
  if (is_gpu_node(object, st.settings->gpu_nodes)) {
    st.gpu_nodes.insert(name);
    st.liveness.watch(name, st.time->wall_now()); // GPU nodes run the agent
  } else {
    st.gpu_nodes.erase(name);
    st.liveness.forget(name);
  }
  self->send(node_for(self, name), observe_atom::value, object.dump());
}

void on_watch_event(fleet_actor* self, const kube_watch_event& event) {
  auto& st = self->state;
  ++st.stats.watch_events;
  if (event.type == "BOOKMARK")
    return;
  auto object = json::parse(event.object, nullptr, false);
  if (!object.is_object()) {
    logger()->warn("Node watch: unreadable {} object", event.type);
    return;
  }
  const auto before = st.gpu_nodes.size();
  if (event.type == "LISTED") {
    st.gpu_nodes.clear();
    auto items = object.find("items");
    if (items != object.end() && items->is_array())
      for (const auto& item : *items)
        observe(self, item);
    publish_gpu_count(self, before);
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
    observe(self, object);
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

// Reads `query` page by page, folding rows into `batch`, then calls `done`.
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
                           pending_read{query, batch, done});
      });
}

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

// One fabric incident (issue #7 item 6): journaled as one fleet-wide row, and
// its nodes are told to drop their port-down records.
void on_fabric_incident(fleet_actor* self, const control::fabric_incident& incident) {
  auto& st = self->state;
  ++st.settings->counters->fabric_incidents;
  std::vector<std::string> nodes(incident.nodes.begin(), incident.nodes.end());
  std::string names;
  for (const auto& n : nodes)
    names += (names.empty() ? "" : ", ") + n;
  logger()->error("fabric incident: NIC ports down on {} nodes within the window ({}); "
                  "not quarantining them for it",
                  nodes.size(), names);
  journal_record row;
  row.recorded_at = st.time->wall_now();
  row.kind = fabric_row;
  row.body = json{{"opened", format_rfc3339(incident.opened)}, {"nodes", nodes}}.dump();
  row.idempotency_key =
    "fabric/" + format_rfc3339(incident.opened) + "/" + std::to_string(nodes.size());
  self->request(st.journal, caf::infinite, append_atom::value, std::move(row))
    .then([](const append_outcome&) {},
          [](const caf::error& err) {
            logger()->warn("fabric incident not journaled: {}", caf::to_string(err));
          });
  for (const auto& n : nodes)
    if (auto i = st.nodes.find(n); i != st.nodes.end())
      self->send(i->second, fabric_atom::value);
}

// Inside a fabric incident a link-down report (a port down, or the
// link_downed rise that comes with it) is kept and correlated, never acted on.
void mark_if_fabric(fleet_actor* self, health_event& event) {
  auto& st = self->state;
  if (control::reports_link_down(event)
      && st.fabric.suppresses(event.node_name, st.time->wall_now()))
    event.strategy = processing_strategy::store_and_analyse;
}

void deliver(fleet_actor* self, health_event event, std::int64_t seq);

void agent_heard(fleet_actor* self, const std::string& node);

void route(fleet_actor* self, health_event event, std::int64_t seq) {
  auto& st = self->state;
  ++st.stats.routed;
  agent_heard(self, event.node_name); // an event is proof of life too
  const bool link_down = control::reports_link_down(event);
  if (link_down && control::is_nic_port_down(event))
    if (auto incident = st.fabric.on_port_down(event.node_name, st.time->wall_now()))
      on_fabric_incident(self, *incident);
  mark_if_fabric(self, event);
  // A link down the fabric does not explain yet waits correlation.fabric_hold:
  // the incident may still be forming on other nodes.
  const auto name = event.node_name;
  const bool first = !st.on_hold.next_due(name);
  const bool hold =
    link_down && event.strategy == processing_strategy::execute_remediation;
  if (!st.on_hold.take(event, seq, hold, st.time->wall_now())) {
    deliver(self, std::move(event), seq);
    return;
  }
  if (first)
    self->delayed_send(self, st.settings->correlation.fabric_hold, fhold_atom::value,
                       name);
}

// The hold of some of `node`'s events is over: deliver them in order (an
// incident formed meanwhile claims them), and wait for the next one.
void release_held(fleet_actor* self, const std::string& node) {
  auto& st = self->state;
  const auto now = st.time->wall_now();
  for (auto& h : st.on_hold.release(node, now)) {
    mark_if_fabric(self, h.event);
    deliver(self, std::move(h.event), h.seq);
  }
  if (auto due = st.on_hold.next_due(node))
    self->delayed_send(self, std::max(*due - now, std::chrono::nanoseconds{0}),
                       fhold_atom::value, node);
}

void deliver(fleet_actor* self, health_event event, std::int64_t seq) {
  auto& st = self->state;
  auto name = event.node_name;
  if (auto waiting = st.replaying.find(name); waiting != st.replaying.end()) {
    waiting->second.emplace_back(std::move(event), seq);
    return;
  }
  self->send(node_for(self, name), route_atom::value, std::move(event), seq);
}

// Startup: fold the whole journal, hand each node its events and the breaker
// its rows, then release what was routed meanwhile.
void rebuild_fleet(fleet_actor* self, std::int64_t after_seq,
                   std::shared_ptr<rebuild_batch> batch) {
  journal_query query;
  query.after_seq = after_seq;
  query.limit = fleet_rebuild_page;
  read_all(self, query, batch, [=] {
    auto& st = self->state;
    if (st.standby) // leadership was lost meanwhile
      return;
    report_undecodable(self, *batch);
    self->send(st.breaker, replay_atom::value, batch->breaker_rows);
    // Attempts first: the replay ends in a reconcile that may plan new ones.
    for (auto& [name, attempts] : batch->attempts)
      self->send(node_for(self, name), attempts_atom::value, std::move(attempts));
    for (auto& [name, events] : batch->events)
      self->send(node_for(self, name), replay_atom::value, std::move(events),
                 std::move(batch->marks[name]));
    // The fabric window carries on where it was: a port-down just after the
    // restart joins the incident its peers opened (incidents found here were
    // journaled when they formed).
    st.fabric = control::fabric_correlator(st.settings->correlation);
    for (const auto& [at, node] : batch->port_downs)
      st.fabric.on_port_down(node, at);
    st.rebuilt_seq = batch->last_seq;
    st.rebuilt = true;
    logger()->info(
      "rebuilt from the journal: {} rows, {} nodes with events, up to seq {}",
      st.stats.rows_replayed, batch->events.size(), st.rebuilt_seq);
    auto held = std::move(st.held);
    st.held.clear();
    for (auto& [event, seq] : held)
      if (seq > st.rebuilt_seq)
        route(self, std::move(event), seq);
  });
}

// A crashed node actor comes back with its events replayed from the journal.
void restart_node(fleet_actor* self, const std::string& name) {
  auto& st = self->state;
  ++st.stats.restarts;
  logger()->error("node actor {} crashed; restarting it from the journal", name);
  auto child = spawn_node(self, name);
  // Its held events are journaled (ingest routes only what is stored): the
  // replay below delivers them; the hold must not deliver them again.
  st.on_hold.drop(name);
  st.replaying[name]; // routes wait until the history is in
  auto batch = std::make_shared<rebuild_batch>();
  journal_query query;
  query.node = name;
  query.limit = fleet_rebuild_page;
  read_all(self, query, batch, [=] {
    report_undecodable(self, *batch);
    auto& st = self->state;
    if (auto a = batch->attempts.find(name); a != batch->attempts.end())
      self->send(child, attempts_atom::value, std::move(a->second));
    self->send(child, replay_atom::value, std::move(batch->events[name]),
               std::move(batch->marks[name]));
    auto waiting = std::move(st.replaying[name]);
    st.replaying.erase(name);
    // Routed once already (fabric rule, hold): only delivered now.
    for (auto& [event, seq] : waiting)
      if (seq > batch->last_seq) {
        mark_if_fabric(self, event);
        deliver(self, std::move(event), seq);
      }
  });
}

std::string fleet_summary(const fleet_state& st) {
  const auto& c = *st.settings->counters;
  return json{{"nodes", st.nodes.size()},
              {"standby", st.standby},
              {"droppedStandby", st.stats.dropped_standby},
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
              {"undecodableRows", st.stats.undecodable_rows},
              {"watchEvents", st.stats.watch_events}}
    .dump();
}

} // namespace

namespace {

// A string field of a journal row's body; "" when absent or not a string
// (rows written by another version must not stop a rebuild).
std::string text_of(const json& body, const char* key) {
  if (!body.is_object())
    return {};
  auto it = body.find(key);
  return it != body.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

} // namespace

void fold_rows(rebuild_batch& into, const std::vector<journal_record>& rows) {
  for (const auto& row : rows) {
    into.last_seq = std::max(into.last_seq, row.seq);
    if (row.kind == breaker_row::tripped || row.kind == breaker_row::reset) {
      into.breaker_rows.push_back(row);
      continue;
    }
    if (row.kind == quarantine_row) {
      // The quarantines the breaker counted (a cordon or a new taint), so its
      // window survives a restart.
      auto body = json::parse(row.body, nullptr, false);
      if (body.is_object()
          && (body.value("startsQuarantine", false) || body.value("cordon", false)))
        into.breaker_rows.push_back(row);
      continue;
    }
    if (row.kind == control::drain_row) {
      // A completed drain (succeeded, skipped, dry run): not cancelled ones.
      auto body = json::parse(row.body, nullptr, false);
      const auto phase = text_of(body, "phase");
      if (phase == "succeeded" || phase == "skipped" || phase == "dry_run")
        into.marks[row.node].push_back({into.events[row.node].size(),
                                        replay_mark::kind::drain,
                                        text_of(body, "drain")});
      continue;
    }
    if (row.kind == fabric_row) {
      // Fleet-wide; each of its nodes dropped its port-down records here.
      auto body = json::parse(row.body, nullptr, false);
      if (body.is_object() && body.contains("nodes") && body["nodes"].is_array())
        for (const auto& n : body["nodes"])
          if (n.is_string())
            into.marks[n.get<std::string>()].push_back(
              {into.events[n.get<std::string>()].size(), replay_mark::kind::fabric, {}});
      continue;
    }
    if (row.kind == control::remediation_row) {
      auto body = json::parse(row.body, nullptr, false);
      const auto phase = text_of(body, "phase");
      const auto dry = body.is_object() && body.contains("dryRun")
                       && body["dryRun"].is_boolean() && body["dryRun"].get<bool>();
      if ((phase != "created" && phase != "handed_to_provider") || dry)
        continue;
      auto action = parse_recommended_action(text_of(body, "action"));
      if (action)
        into.attempts[row.node].push_back(
          {*action, text_of(body, "gpuUUID"), row.recorded_at});
      continue;
    }
    if (row.kind != event_row)
      continue;
    auto event = decode_health_event(row.body);
    if (!event) {
      into.undecodable.push_back(row.seq);
      continue;
    }
    // The fabric window as the live fleet saw it: port-downs by arrival.
    if (control::reports_link_down(*event) && control::is_nic_port_down(*event))
      into.port_downs.emplace_back(row.recorded_at, event->node_name);
    into.events[event->node_name].push_back(std::move(*event));
  }
}

namespace {

// Leadership changes (issue #7 item 7): the new leader rebuilds everything from
// the journal (what the old leader did is there); a replica that stops
// leading stops its node actors (and their drains) and its Node watch.
// The agent spoke: a node flagged silent is told it reports again.
void agent_heard(fleet_actor* self, const std::string& node) {
  auto& st = self->state;
  if (st.liveness.heard(node, st.time->wall_now()))
    self->send(node_for(self, node), agent_quiet_atom::value, false, std::int64_t{0});
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

void lead(fleet_actor* self, bool leading) {
  auto& st = self->state;
  if (leading != st.standby)
    return;
  st.standby = !leading;
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
  for (auto& [name, child] : st.nodes)
    self->send_exit(child, caf::exit_reason::user_shutdown);
  st.nodes.clear();
  st.names.clear();
  st.replaying.clear();
  st.held.clear();
  // Journaled: the next leader's rebuild replays them (without the hold; the
  // fabric window is rebuilt from the journal's port-downs).
  st.on_hold.clear();
  if (st.watch_id != 0) {
    self->send(st.gateway, unwatch_atom::value, st.watch_id);
    st.watch_id = 0;
  }
}

} // namespace

caf::behavior fleet(fleet_actor* self, std::shared_ptr<const node_settings> settings,
                    caf::actor gateway, caf::actor journal, caf::actor breaker,
                    std::shared_ptr<const clock> time, bool watch_nodes,
                    bool await_leadership) {
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
        && msg.reason != caf::exit_reason::user_shutdown)
      restart_node(self, name);
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
    [=](route_atom, health_event& event, std::int64_t seq) {
      auto& st = self->state;
      if (st.standby) {
        ++st.stats.dropped_standby; // journaled; the leader's rebuild has it
        return;
      }
      if (!st.rebuilt) {
        st.held.emplace_back(std::move(event), seq);
        return;
      }
      route(self, std::move(event), seq);
    },
    // Only what is due goes: a timer left from before a leadership change
    // or an earlier hold releases nothing early.
    [=](fhold_atom, const std::string& node) { release_held(self, node); },
    [=](agent_heard_atom, const std::string& node) {
      if (!self->state.standby)
        agent_heard(self, node);
    },
    [=](liveness_atom) { check_liveness(self); },
    [=](const kube_watch_event& event) {
      if (!self->state.standby) // a late line of a watch given up on
        on_watch_event(self, event);
    },
    [=](const pending_read& retry) {
      read_all(self, retry.query, retry.batch, retry.done);
    },
    [=](summary_atom) {
      auto summary = json::parse(fleet_summary(self->state));
      summary["mailboxDepth"] = self->mailbox().size();
      summary["nodeMailboxHigh"] =
        self->state.settings->counters->node_mailbox_high.load();
      return summary.dump();
    },
    [=](summary_atom atom, const std::string& node) {
      // The node actor answers; the promise makes sure nothing else does.
      auto rp = self->make_response_promise();
      auto i = self->state.nodes.find(node);
      if (i == self->state.nodes.end())
        rp.deliver(caf::make_error(caf::sec::invalid_argument, "no such node: " + node));
      else
        rp.delegate(i->second, atom);
    },
  };
}

} // namespace vigil
