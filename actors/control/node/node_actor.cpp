// The node actor's behaviour and wiring: its messages, the restart's replay
// of journaled events, its summary and its Kubernetes Events. The quarantine
// is in node_quarantine.cpp, the drain in node_drain.cpp, the gpu and
// nic_port actors in node_correlation.cpp, the remediations in
// node_remediation.cpp.
#include "actors/control/node/node_actor.hpp"

#include <algorithm>
#include <climits>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/control/node/node_actor_internal.hpp"
#include "actors/control/node/node_remediation.hpp"
#include "actors/gateway/kube_gateway_messages.hpp"
#include "actors/journal/journal_messages.hpp"
#include "actors/protocol/control_messages.hpp"
#include "runtime/logging.hpp"

namespace vigil {

namespace node_detail {

std::shared_ptr<spdlog::logger> logger() {
  return component_logger("node");
}

} // namespace node_detail

using namespace node_detail;

namespace {

// A restart's replay (replay_atom): the journaled events in order, each
// through the correlation rules, with the drain and fabric marks among them.
struct replay_job {
  std::vector<health_event> events;
  std::vector<replay_mark> marks;
  std::size_t next_mark = 0;
};

void take_marks(node_actor* self, replay_job& job, std::size_t applied) {
  auto& st = self->state;
  for (; job.next_mark < job.marks.size()
         && job.marks[job.next_mark].after_events <= applied;
       ++job.next_mark) {
    const auto& mark = job.marks[job.next_mark];
    if (mark.what == replay_mark::kind::fabric)
      drop_port_downs(self);
    else if (!st.active.empty()) // a drain of the quarantine still active
      note_drained(st, mark.key);
  }
}

void replay_applied(node_actor* self, replay_job& job, std::size_t i,
                    const std::vector<health_event>& events) {
  apply_events(self, events);
  if (self->state.active.empty())
    forget_drains(self->state);
  take_marks(self, job, i + 1);
}

// The history is in: each NIC port answers the drop that fell due after its
// last event (seed 002 §6.2, stamped at its deadline as live) and arms its
// timer; the node takes them in turn and reconciles once, so that the Node is
// not patched for a state short of them.
void end_replay(node_actor* self, std::shared_ptr<std::vector<caf::actor>> ports,
                std::size_t i) {
  if (i < ports->size()) {
    self->request((*ports)[i], caf::infinite, replay_atom::value)
      .await([=](const std::vector<health_event>& dropped) {
        for (const auto& drop : dropped)
          journal_firing(self, "nic-drop", drop, drop.message); // once, by its id
        apply_events(self, dropped);
        end_replay(self, ports, i + 1);
      });
    return;
  }
  self->state.awaiting_history = false;
  reconcile(self);
}

// Replays from event i on; an event awaiting its entity's actor resumes the
// replay from its answer (a fresh stack: no recursion over the events).
void replay_from(node_actor* self, std::shared_ptr<replay_job> job, std::size_t i) {
  for (; i < job->events.size(); ++i) {
    auto resume = [=](std::vector<health_event> events) {
      replay_applied(self, *job, i, events);
      replay_from(self, job, i + 1);
    };
    auto now = correlate(self, job->events[i], false, resume);
    if (!now)
      return;
    replay_applied(self, *job, i, *now);
  }
  auto ports = std::make_shared<std::vector<caf::actor>>();
  for (const auto& [key, port] : self->state.ports)
    ports->push_back(port);
  end_replay(self, std::move(ports), 0);
}

// The node's GPUs as the console lists them: every GPU the node actor knows
// of (the agent's heartbeat, with index and PCI address; its gpu actors; the
// agent's allocation report; active records), with its active events and
// the pods holding it.
nlohmann::json gpu_rows(const node_state& st) {
  std::map<std::string, nlohmann::json> gpus;
  auto row = [&](const std::string& uuid) -> nlohmann::json& {
    auto [it, added] = gpus.try_emplace(uuid);
    if (added)
      it->second = {{"uuid", uuid},
                    {"activeEvents", 0},
                    {"pods", nlohmann::json::array()},
                    {"gpuActor", st.gpus.count(uuid) > 0}};
    return it->second;
  };
  if (st.agent_gpus)
    for (const auto& gpu : st.agent_gpus->devices) {
      auto& g = row(gpu.uuid);
      if (gpu.index >= 0)
        g["index"] = gpu.index;
      if (!gpu.pci.empty())
        g["pci"] = gpu.pci;
    }
  for (const auto& [uuid, actor] : st.gpus)
    row(uuid);
  if (st.allocations)
    for (const auto& a : st.allocations->allocations)
      for (const auto& uuid : a.gpu_uuids)
        row(uuid)["pods"].push_back(a.ns + "/" + a.pod);
  for (const auto& r : st.active.records())
    if (auto uuid = control::gpu_uuid_of(r); !uuid.empty()) {
      auto& g = row(uuid);
      g["activeEvents"] = g["activeEvents"].get<int>() + 1;
      g["lastCheck"] = r.check_name;
    }
  // nvidia-smi's order where the agent said it, then the others by UUID.
  std::vector<nlohmann::json> rows;
  for (auto& [uuid, g] : gpus)
    rows.push_back(std::move(g));
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return a.value("index", INT_MAX) < b.value("index", INT_MAX);
  });
  return nlohmann::json(std::move(rows));
}

// The NIC ports the node actor has actors for, down in a fabric incident or not.
nlohmann::json port_rows(const node_state& st) {
  auto out = nlohmann::json::array();
  const auto& down = st.fabric.ports();
  for (const auto& [port, actor] : st.ports)
    out.push_back({{"port", port}, {"fabricDown", down.count(port) > 0}});
  return out;
}

// What a fleet tile is drawn from (console_view's tile_of): the fleet page
// asks it of every node, so it holds nothing else. The full summary starts
// from it.
nlohmann::json tile_fields(const node_state& st) {
  nlohmann::json active = nlohmann::json::array();
  for (const auto& r : st.active.records())
    active.push_back({{"check", r.check_name},
                      {"entityType", r.subject.type},
                      {"entityValue", r.subject.value},
                      {"rule", r.rule}});
  const auto machine = st.remediation->summary(st.time->wall_now());
  nlohmann::json remediation = nlohmann::json::object();
  for (const char* key : {"inFlight", "step", "cr", "kind"})
    if (auto it = machine.find(key); it != machine.end())
      remediation[key] = *it;
  nlohmann::json out = {{"node", st.node_name},
                        {"active", std::move(active)},
                        {"observed", st.node.has_value()},
                        {"draining", st.drain ? st.drain_key : std::string{}},
                        {"fabricPortsDown", st.fabric.ports()},
                        {"remediation", std::move(remediation)}};
  if (st.node) {
    const auto& labels = st.node->observation.labels;
    auto label = [&](const std::string& key) {
      auto it = labels.find(key);
      return it == labels.end() ? std::string{} : it->second;
    };
    out["unschedulable"] = st.node->observation.unschedulable;
    out["cordonOwned"] = st.node->observation.cordon_owned;
    out["pool"] = label(st.settings->remediation.pool_label);
    out["optedOut"] = label(st.settings->quarantine.opt_out_label) == "true";
  }
  if (!st.handed_to_operator.empty())
    out["handedToOperator"] = st.handed_to_operator;
  return out;
}

nlohmann::json summary_of(const node_state& st) {
  auto out = tile_fields(st);
  out.update(nlohmann::json{{"busy", st.busy},
                            {"events", st.stats.events},
                            {"eventsWaiting", st.events_waiting.size()},
                            {"reconciles", st.stats.reconciles},
                            {"patches", st.stats.patches},
                            {"conflicts", st.stats.conflicts},
                            {"failures", st.stats.failures},
                            {"cordons", st.stats.cordons},
                            {"uncordons", st.stats.uncordons},
                            {"held", st.stats.held},
                            {"drainedKey", st.drained_key},
                            {"drainsStarted", st.stats.drains_started},
                            {"drainsSucceeded", st.stats.drains_succeeded},
                            {"drainsCancelled", st.stats.drains_cancelled},
                            {"drainsSkipped", st.stats.drains_skipped},
                            {"drainsHeld", st.stats.drains_held},
                            {"evictions", st.stats.evictions},
                            {"ruleFirings", st.stats.rule_firings},
                            {"gpuActors", st.gpus.size()},
                            {"nicPortActors", st.ports.size()},
                            {"remediation", node_remediation_steps::summary(st)}});
  out["gpus"] = gpu_rows(st);
  out["nicPorts"] = port_rows(st);
  if (st.agent_gpus)
    out["agentGpus"] = encode_agent_gpu_facts(*st.agent_gpus);
  return out;
}

// The console's rows for the actors this node supervises (gpu, nic_port,
// drain): each asked for its summary by message, sorted by name; an actor
// that does not answer in time is left out.
caf::result<std::vector<std::string>> children_rows(node_actor* self) {
  auto& st = self->state;
  struct gathering {
    caf::typed_response_promise<std::vector<std::string>> promise;
    std::vector<std::string> rows;
    std::size_t waiting = 0;
  };
  auto g = std::make_shared<gathering>();
  g->promise = self->make_response_promise<std::vector<std::string>>();
  g->waiting = st.gpus.size() + st.ports.size() + (st.drain ? 1 : 0);
  auto one_done = [g] {
    if (--g->waiting > 0)
      return;
    std::sort(g->rows.begin(), g->rows.end());
    g->promise.deliver(std::move(g->rows));
  };
  if (g->waiting == 0) {
    g->waiting = 1;
    one_done();
    return g->promise;
  }
  auto ask = [&](const caf::actor& child) {
    self->request(child, std::chrono::seconds(5), summary_atom::value)
      .then(
        [g, one_done](std::string& row) {
          g->rows.push_back(std::move(row));
          one_done();
        },
        [one_done](caf::error&) { one_done(); });
  };
  for (const auto* children : {&st.gpus, &st.ports})
    for (const auto& [key, child] : *children)
      ask(child);
  if (st.drain)
    ask(st.drain);
  return g->promise;
}

// Job attribution: which pods held a failing GPU at the moment of the fault,
// from the agent's latest PodResources report (`vigil replay --by-namespace`
// reads these rows). Nothing is written without a usable report.
void journal_gpu_holders(node_actor* self, const health_event& event) {
  auto& st = self->state;
  if (event.is_healthy || !st.allocations || !st.allocations->available)
    return;
  std::vector<std::string> gpus;
  for (const auto& entity : event.entities)
    if (entity.type == "GPU_UUID")
      gpus.push_back(entity.value);
  auto holders = gpu_holders(*st.allocations, gpus);
  if (holders.empty())
    return;
  nlohmann::json listed = nlohmann::json::array();
  for (const auto& h : holders)
    listed.push_back({{"namespace", h.ns}, {"pod", h.pod}, {"gpus", h.gpus}});
  journal_record row;
  row.recorded_at = st.time->wall_now();
  row.node = st.node_name;
  row.kind = gpu_holders_row;
  row.body =
    nlohmann::json{{"eventId", event.id},
                   {"gpus", gpus},
                   {"holders", listed},
                   {"allocationsObservedAt", format_rfc3339(st.allocations->observed)}}
      .dump();
  row.idempotency_key = st.node_name + "/gpu_holders/" + event.id;
  self->request(st.journal, caf::infinite, append_atom::value, std::move(row))
    .then([](const append_outcome&) {},
          [=](const caf::error& err) {
            logger()->warn("node {}: GPU holders not journaled: {}",
                           self->state.node_name, caf::to_string(err));
          });
}

// Takes a routed event in its turn: a healthy one closes its seed 000 §4
// records, a fault journals who held its GPU; then correlation, and the
// active set.
void take_event(node_actor* self, const health_event& event);

// Takes the events routed while one was being correlated, until one has to
// wait for its entity's answer again.
void take_waiting_events(node_actor* self) {
  auto& st = self->state;
  while (!st.correlating && !st.events_waiting.empty()) {
    const auto event = std::move(st.events_waiting.front());
    st.events_waiting.pop_front();
    take_event(self, event);
  }
}

void take_event(node_actor* self, const health_event& event) {
  ++self->state.stats.events;
  if (event.is_healthy)
    node_remediation_steps::on_healthy_event(self, event);
  else
    journal_gpu_holders(self, event);
  auto apply = [=](const std::vector<health_event>& events) {
    if (apply_events(self, events))
      reconcile(self);
  };
  auto answered = [=](std::vector<health_event> events) {
    self->state.correlating = false;
    apply(events);
    take_waiting_events(self);
  };
  if (auto now = correlate(self, event, true, answered))
    apply(*now);
  else
    self->state.correlating = true;
}

} // namespace

void post_node_event(node_actor* self, const std::string& reason,
                     const std::string& message, bool warning) {
  auto& st = self->state;
  auto request =
    control::node_event_request(st.node_name, st.settings->events_namespace, reason,
                                message, warning, st.time->wall_now(), ++st.decisions);
  self->request(st.gateway, caf::infinite, std::move(request))
    .then([=](const kube::kube_result& result) {
      if (!result.ok())
        logger()->warn("node {}: Event not posted: {}", self->state.node_name,
                       result.error().to_string());
    });
}

node_timers::behavior_type node(node_actor* self, std::string name,
                                std::shared_ptr<const node_settings> settings,
                                kube_gateway_handle gateway, journal_handle journal,
                                breaker_handle breaker,
                                std::shared_ptr<const clock> time) {
  auto& st = self->state;
  st.node_name = std::move(name);
  st.settings = std::move(settings);
  st.gateway = std::move(gateway);
  st.journal = std::move(journal);
  st.breaker = std::move(breaker);
  st.time = std::move(time);
  st.dedup = control::event_deduplicator(st.settings->correlation);
  st.remediation.emplace(st.node_name, node_remediation_steps::config_of(*st.settings));
  return {
    [=](route_atom, health_event& event, std::int64_t) {
      auto& st = self->state;
      // How far behind this node is (the fleet's /metrics): its mailbox and
      // the events waiting behind one being correlated.
      auto& high = st.settings->counters->node_mailbox_high;
      const std::uint64_t depth = self->mailbox().size() + st.events_waiting.size();
      for (auto seen = high.load();
           depth > seen && !high.compare_exchange_weak(seen, depth);) {
      }
      if (st.correlating)
        st.events_waiting.push_back(std::move(event));
      else
        take_event(self, event);
    },
    [=](history_atom) { self->state.awaiting_history = true; },
    [=](replay_atom, std::vector<health_event>& events, std::vector<replay_mark>& marks) {
      self->state.awaiting_history = true; // its correlation may wait on answers
      auto job = std::make_shared<replay_job>();
      job->events = std::move(events);
      job->marks = std::move(marks);
      take_marks(self, *job, 0);
      replay_from(self, job, 0);
    },
    [=](nicdrop_atom, const health_event& dropped) {
      journal_firing(self, "nic-drop", dropped, dropped.message);
      if (apply_events(self, {dropped}))
        reconcile(self);
    },
    [=](fabric_atom) {
      auto& st = self->state;
      auto dropped = drop_port_downs(self);
      // At most one Event per fabric window: an incident that grows tells
      // its nodes again, and they have said it already.
      const auto now = st.time->wall_now();
      if (!st.settings->dry_run
          && (!st.fabric_event_posted
              || now - *st.fabric_event_posted
                   >= st.settings->correlation.fabric_window)) {
        st.fabric_event_posted = now;
        post_node_event(self, "FabricIncident",
                        "NIC ports down on many nodes at once: a fabric incident; this "
                        "node is not quarantined for its NIC port-downs",
                        true);
      }
      if (dropped > 0)
        logger()->info(
          "node {}: {} NIC port records dropped: a fabric incident covers them",
          st.node_name, dropped);
      if (dropped > 0 || !st.fabric.ports().empty())
        reconcile(self);
    },
    [=](observe_atom, const shared_json& node) {
      if (!take_node(self, *node))
        return;
      check_conditions(self);
      reconcile(self);
    },
    [=](condition_check_atom) {
      self->state.condition_check_at.reset();
      check_conditions(self);
    },
    [=](reconcile_atom) {
      self->state.retry_armed = false;
      reconcile(self);
    },
    [=](allocations_atom, gpu_allocations& report) {
      auto& st = self->state;
      if (st.allocations && report.observed < st.allocations->observed)
        return; // an older report overtaken by a newer one
      if (!report.available
          && (!st.allocations || st.allocations->available
              || st.allocations->error != report.error))
        logger()->warn("node {}: the agent cannot read the kubelet's GPU allocations: {}",
                       st.node_name, report.error);
      st.allocations = std::move(report);
    },
    [=](gpu_facts_atom, agent_gpu_facts& facts) {
      self->state.agent_gpus = std::move(facts);
    },
    [=](agent_quiet_atom, bool silent, std::int64_t since_ns) {
      auto& st = self->state;
      if (silent == st.agent_silent_since.has_value())
        return;
      if (silent)
        st.agent_silent_since = wall_time{std::chrono::nanoseconds{since_ns}};
      else
        st.agent_silent_since.reset();
      if (!st.settings->dry_run)
        post_node_event(self, silent ? "AgentSilent" : "AgentReporting",
                        silent ? "vigil's agent on this node stopped reporting; "
                                 "its faults go unseen (no remediation follows)"
                               : "vigil's agent on this node reports again",
                        silent);
      reconcile(self);
    },
    [=](summary_atom) -> std::string {
      auto summary = summary_of(self->state);
      // Its five busiest message types: 10,000 summaries make the actors page.
      summary.update(self->figures(5));
      return summary.dump();
    },
    [=](tile_atom) -> std::string { return tile_fields(self->state).dump(); },
    [=](children_atom) { return children_rows(self); },
    [=](attempts_atom, const std::vector<remediation_attempt>& attempts) {
      auto& machine = *self->state.remediation;
      for (const auto& a : attempts)
        machine.remember_attempt(a.action, a.gpu_uuid, a.at);
      // One maintenance at a time per node: the latest CR without an
      // outcome is the one that may still run (followed only with
      // remediation on: off, nothing would take it up, and it would hold
      // the quarantine for good).
      if (!self->state.settings->remediation.enabled)
        return;
      for (auto a = attempts.rbegin(); a != attempts.rend(); ++a)
        if (a->open) {
          machine.resume(a->action, a->gpu_uuid, a->event_id, a->custom_action, a->cr,
                         a->validating);
          break;
        }
    },
    [=](slot_check_atom) {
      auto& st = self->state;
      if (st.remediation && st.remediation->in_flight())
        return;
      logger()->warn("node {}: holds a remediation slot with no remediation in flight "
                     "(left by a replica that stopped between the claim and the CR); "
                     "given back",
                     st.node_name);
      self->send(st.breaker, remedied_atom::value, st.node_name);
    },
    [=](remediation_start_atom) {
      node_remediation_steps::on_timer(self, control::remediation_timer::start);
    },
    [=](remediation_poll_atom) {
      node_remediation_steps::on_timer(self, control::remediation_timer::poll);
    },
    [=](remediation_verify_atom) {
      node_remediation_steps::on_timer(self, control::remediation_timer::verify);
    },
    [=](drained_atom, const std::string& key, const std::string& outcome,
        std::uint64_t evictions, std::uint64_t deletions) {
      self->state.settings->counters->pod_deletions += deletions;
      on_drained(self, key, outcome, evictions);
    },
  };
}

} // namespace vigil
