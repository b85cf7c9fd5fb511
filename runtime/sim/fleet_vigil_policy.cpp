// vigil's side of the fleet simulation: the control plane's rules as the
// fleet, node and remediation code runs them — the production
// remediation_machine (seed 000 §4), quarantine rules, the fabric-incident
// correlation and the circuit breaker — without actors.
#include <algorithm>
#include <map>

#include "actors/control/remediation/remediation_machine.hpp"
#include "actors/control/remediation/remediation_plan.hpp"
#include "actors/control/rules/circuit_breaker.hpp"
#include "actors/control/rules/correlation_rules.hpp"
#include "actors/control/rules/drain_plan.hpp"
#include "actors/control/rules/quarantine_rules.hpp"
#include "runtime/sim/fleet_world.hpp"

namespace vigil::demo::fleet_sim {

namespace {

action_kind action_of(control::remediation_kind kind) {
  switch (kind) {
    case control::remediation_kind::gpu_reset: return action_kind::reset;
    case control::remediation_kind::reboot_node: return action_kind::reboot;
    default: return action_kind::replace;
  }
}

class vigil_policy final : public policy {
public:
  explicit vigil_policy(fleet_world& world)
    : world_(world), nodes_(static_cast<std::size_t>(world.size())),
      fabric_(world.model().correlation), breaker_(world.model().breaker) {
    // config/vigil.yaml's default rule: any fatal event cordons and taints.
    control::quarantine_rule fatal;
    fatal.name = "fatal";
    fatal.match.is_fatal = true;
    fatal.taints = {{"vigil.dev/fault", "true", control::taint_effect::no_schedule}};
    quarantine_.rules.push_back(fatal);
    facts_.product_name = world.model().gpu_product;
    facts_.nvswitch_fabric = world.model().nvswitch_fabric;
  }

  // The fleet actor's route(): the fabric rule sees every port-down first;
  // inside an incident a port down, or the link_downed rise reported with
  // it, is kept and correlated, never acted on.
  void on_signal(int node, health_event event) override {
    if (control::reports_link_down(event)) {
      const auto now = world_.now();
      if (control::is_nic_port_down(event))
        if (auto incident = fabric_.on_port_down(event.node_name, now))
          on_fabric_incident(*incident);
      if (fabric_.suppresses(event.node_name, now))
        event.strategy = processing_strategy::store_and_analyse;
    }
    observe(node, std::move(event));
  }

  void on_timer(const sim_event& t) override {
    if (t.index == breaker_reset_timer)
      return on_breaker_reset();
    auto* st = nodes_[t.node].get();
    if (st == nullptr)
      return;
    if (t.index == drain_done_timer && st->draining && st->drain_token == t.token)
      return on_drained(t.node);
    if (t.index == drop_check_timer && st->epoch == t.token)
      return on_drop_check(t.node);
    if (st->epoch != t.token)
      return; // a replaced node's timer
    if (t.index == start_timer)
      return on_machine_timer(t.node, control::remediation_timer::start);
    if (t.index == poll_timer)
      return on_machine_timer(t.node, control::remediation_timer::poll);
    if (t.index == verify_timer)
      return on_machine_timer(t.node, control::remediation_timer::verify);
    if (t.index == validation_timer && !st->validation) // the Job finishes
      st->validation = world_.validation_passes(t.node, st->validation_gpu);
  }

  void on_action_done(int node, action_kind kind, int gpu) override {
    const auto& name = world_.name(node);
    if (kind == action_kind::replace) { // a new node, a new node actor
      breaker_.finish_remediation(name);
      nodes_[node].reset();
      held_.erase(node);
      return;
    }
    auto* st = nodes_[node].get();
    if (st == nullptr)
      return;
    if (kind == action_kind::support) { // the person repaired and cleared it
      st->support = false;
      return clear_all(node);
    }
    // The janitor set the CR's status; the machine sees it at its next poll.
    st->cr_done = true;
    if (kind == action_kind::reset)
      world_.emit_reset_occurred(node, gpu); // the reset Job's kernel-log line
  }

  bool acting_on(int node) const override {
    const auto* st = nodes_[node].get();
    return st != nullptr && (st->machine.acting() || st->support);
  }

private:
  enum timer_code : int {
    drain_done_timer,
    start_timer,
    poll_timer,
    verify_timer,
    validation_timer,
    drop_check_timer,
    breaker_reset_timer
  };

  /// The node actor's state.
  struct node_state {
    node_state(const fleet_model& m, const std::string& name, std::uint64_t id)
      : epoch(id), correlator(m.correlation), machine(name, machine_config(m)) {}

    /// remediation.* at config/vigil.yaml's defaults, the model's escalation.
    static control::remediation_config machine_config(const fleet_model& m) {
      control::remediation_config config;
      config.escalation = control::node_escalation_policy(
        m.escalation, m.correlation.remediation_repeat_threshold,
        m.correlation.remediation_window);
      return config;
    }

    std::uint64_t epoch; ///< this actor's timers, not a predecessor's
    control::node_correlator correlator;
    control::active_events active;
    control::remediation_machine machine;
    bool cordoned = false;
    bool draining = false;
    std::string drain_key;
    std::string drained_key;
    control::drain_history history = control::drain_history::none;
    std::uint64_t drain_token = 0;
    bool cr_done = false; ///< the CR in flight has succeeded (its action is done)
    std::optional<bool> validation; ///< the validation Job's verdict, once done
    int validation_gpu = -1;        ///< the GPU it checks; -1: all
    bool support = false;           ///< a person was asked
    bool drop_check_armed = false;
  };

  node_state& state(int node) {
    auto& slot = nodes_[node];
    if (!slot)
      slot = std::make_unique<node_state>(world_.model(), world_.name(node), ++tokens_);
    return *slot;
  }

  // The fleet actor tells the incident's nodes; each drops its port-down
  // records (node_actor drop_port_downs).
  void on_fabric_incident(const control::fabric_incident& incident) {
    if (!last_incident_ || *last_incident_ != incident.opened) {
      last_incident_ = incident.opened;
      ++world_.outcome().fabric_incidents;
    }
    for (const auto& name : incident.nodes) {
      const int node = world_.index_of(name);
      auto* st = node < 0 ? nullptr : nodes_[node].get();
      if (st == nullptr)
        continue;
      auto dropped = st->active.remove_if(control::explained_by_fabric);
      st->correlator.explain_port_downs();
      if (dropped > 0)
        reconcile(node);
    }
  }

  // The node actor's route_atom: healthy verification, correlation, the
  // active set, then reconcile.
  void observe(int node, health_event event) {
    auto& st = state(node);
    const auto now = world_.now();
    if (event.is_healthy)
      carry_out(node, st.epoch, st.machine.on_healthy_event(event, now));
    auto outcome = st.correlator.observe(event, now);
    world_.outcome().rule_firings += static_cast<int>(outcome.due.size());
    if (outcome.escalate && !event.is_healthy)
      ++world_.outcome().rule_firings;
    const auto events = control::events_in_order(event, std::move(outcome));
    bool changed = false;
    for (const auto& e : events)
      changed = st.active.apply(e, quarantine_).changed || changed;
    arm_drop_check(node);
    if (changed)
      reconcile(node);
  }

  void arm_drop_check(int node) {
    auto& st = state(node);
    if (st.drop_check_armed)
      return;
    if (auto at = st.correlator.next_drop_check()) {
      st.drop_check_armed = true;
      world_.timer(*at, node, drop_check_timer, st.epoch);
    }
  }

  // seed 002 §6.2: a port DOWN with no recovery attempts is dropped.
  void on_drop_check(int node) {
    auto& st = state(node);
    st.drop_check_armed = false;
    auto drops = st.correlator.due_drops(world_.name(node), world_.now());
    world_.outcome().rule_firings += static_cast<int>(drops.size());
    arm_drop_check(node);
    bool changed = false;
    for (const auto& e : drops)
      changed = st.active.apply(e, quarantine_).changed || changed;
    if (changed)
      reconcile(node);
  }

  // Quarantine (breaker permitting), drain, remediation: level-based.
  void reconcile(int node) {
    auto& st = state(node);
    if (st.active.empty()) {
      if (st.cordoned && !st.machine.holds_quarantine())
        release(node);
      return;
    }
    if (!st.cordoned) {
      const auto refusal =
        breaker_.admit_cordon(world_.name(node), world_.size(), world_.now());
      if (refusal == control::breaker_refusal::trips_now) {
        ++world_.outcome().breaker_trips;
        arm_breaker_reset();
      }
      if (refusal != control::breaker_refusal::none) {
        held_.insert(node);
        return;
      }
      st.cordoned = true;
      ++world_.outcome().cordons;
    }
    converge_drain(node);
    consider(node);
  }

  // seed 000 §3.1: the drain the records want (the machine widens it to
  // full before a reboot or replacement); a completed one is not repeated,
  // nothing after a full one; a change cancels the running one.
  void converge_drain(int node) {
    auto& st = state(node);
    auto wanted =
      control::drain_wanted(st.active.records(), st.machine.needs_full_drain());
    if (st.draining) {
      if (wanted && control::drain_key(*wanted) == st.drain_key)
        return;
      st.draining = false;
    }
    if (!st.cordoned || !wanted || st.history == control::drain_history::full_done
        || control::drain_key(*wanted) == st.drained_key)
      return;
    if (breaker_.admit_drain() != control::breaker_refusal::none) {
      held_.insert(node);
      return;
    }
    st.draining = true;
    st.drain_key = control::drain_key(*wanted);
    st.drain_token = ++tokens_;
    ++world_.outcome().drains;
    std::uint8_t gpus = whole_node;
    if (st.drain_key != "full" && !world_.whole_node_jobs(node)) {
      gpus = 0;
      for (const auto& uuid : wanted->gpu_uuids)
        if (int g = world_.gpu_index(node, uuid); g >= 0)
          gpus |= gpu_bit(g);
    }
    world_.take_out(node, gpus);
    world_.timer(world_.now() + world_.drain_time(node), node, drain_done_timer,
                 st.drain_token);
  }

  void on_drained(int node) {
    auto& st = state(node);
    st.draining = false;
    st.drained_key = st.drain_key;
    if (st.history != control::drain_history::full_done)
      st.history = st.drain_key == "full" ? control::drain_history::full_done
                                          : control::drain_history::partial_done;
    converge_drain(node);
    consider(node);
  }

  // The node as the machine reads it (node_remediation_steps::view_of).
  control::remediation_view view_of(int node) {
    auto& st = state(node);
    control::remediation_view view;
    view.records = st.active.records();
    view.quarantined = st.cordoned;
    view.drain_busy = st.draining;
    view.drained = st.history;
    view.drained_key = st.drained_key;
    view.facts = facts_;
    view.pool = "rack-" + std::to_string(node / world_.model().nodes_per_leaf);
    return view;
  }

  void consider(int node) {
    auto& st = state(node);
    carry_out(node, st.epoch, st.machine.consider(view_of(node), world_.now()));
  }

  void on_machine_timer(int node, control::remediation_timer timer) {
    auto& st = state(node);
    carry_out(node, st.epoch, st.machine.on_timer(timer, view_of(node), world_.now()));
  }

  // The machine's commands against the simulated cluster, as the node actor
  // carries them out against the API server (node_remediation.cpp). A command
  // may replace the node (and its machine): the rest then no longer apply.
  void carry_out(int node, std::uint64_t epoch, control::remediation_commands commands) {
    namespace cmd = control::remediation_command;
    for (auto& command : commands) {
      auto* st = nodes_[node].get();
      if (st == nullptr || st->epoch != epoch)
        return;
      auto& m = st->machine;
      const auto now = world_.now();
      if (auto* c = std::get_if<cmd::find_cr>(&command)) {
        carry_out(node, epoch, m.on_cr_absent(c->generation, view_of(node), now));
      } else if (auto* c = std::get_if<cmd::ask_breaker>(&command)) {
        const auto refusal = breaker_.admit_remediation(world_.name(node), c->pool);
        carry_out(node, epoch,
                  m.on_breaker_answer(c->generation,
                                      refusal == control::breaker_refusal::none
                                        ? ""
                                        : std::string{control::to_string(refusal)},
                                      view_of(node), now));
      } else if (auto* c = std::get_if<cmd::create_cr>(&command)) {
        st->cr_done = false;
        world_.start_action(node, action_of(c->request.plan.kind),
                            world_.gpu_index(node, c->request.plan.gpu_uuid));
        carry_out(node, epoch, m.on_cr_created(c->generation, c->cr, now));
      } else if (auto* c = std::get_if<cmd::read_cr>(&command)) {
        control::cr_progress progress;
        progress.phase = st->cr_done ? "Succeeded" : "Running";
        progress.terminal = progress.succeeded = st->cr_done;
        carry_out(node, epoch,
                  m.on_cr_progress(c->generation, progress, view_of(node), now));
      } else if (std::holds_alternative<cmd::leave_pool>(command)) {
        breaker_.finish_remediation(world_.name(node));
      } else if (auto* c = std::get_if<cmd::wake>(&command)) {
        const int code = c->timer == control::remediation_timer::start  ? start_timer
                         : c->timer == control::remediation_timer::poll ? poll_timer
                                                                        : verify_timer;
        world_.timer(c->at, node, code, epoch);
      } else if (auto* c = std::get_if<cmd::run_validation>(&command)) {
        st->validation.reset();
        st->validation_gpu =
          c->gpus.empty() ? -1 : world_.gpu_index(node, c->gpus.front());
        world_.timer(now + world_.model().validation, node, validation_timer, epoch);
      } else if (auto* c = std::get_if<cmd::read_validation>(&command)) {
        control::validation_progress progress;
        progress.done = st->validation.has_value();
        progress.passed = st->validation.value_or(false);
        carry_out(node, epoch,
                  m.on_validation_progress(c->generation, progress, view_of(node), now));
      } else if (auto* c = std::get_if<cmd::report_fault>(&command)) {
        observe(node, c->event);
      } else if (std::holds_alternative<cmd::hold_ended>(command)) {
        reconcile(node);
      } else if (std::holds_alternative<cmd::request_replacement>(command)) {
        world_.start_action(node, action_kind::replace, -1);
      } else if (std::holds_alternative<cmd::hand_to_operator>(command)) {
        ask_support(node);
      } else if (auto* c = std::get_if<cmd::clear_records>(&command)) {
        clear(node, c->records);
      } else if (std::holds_alternative<cmd::drain_fully>(command)) {
        converge_drain(node);
      } else if (auto* c = std::get_if<cmd::count>(&command)) {
        world_.outcome().escalations +=
          c->metric == control::remediation_metric::escalated ? 1 : 0;
      }
      // journal_step, post_event, write_annotation, log: nothing to simulate.
    }
  }

  // CONTACT_SUPPORT: the node stays quarantined until a person is done.
  void ask_support(int node) {
    auto& st = state(node);
    if (st.support)
      return;
    st.support = true;
    world_.start_action(node, action_kind::support, -1);
  }

  // Each record cleared by a healthy event of its agent and check.
  void clear(int node, const std::vector<control::active_record>& records) {
    if (records.empty())
      return reconcile(node);
    for (const auto& r : records) {
      health_event healthy;
      healthy.agent = r.agent;
      healthy.component_class = r.component_class;
      healthy.check_name = r.check_name;
      healthy.is_healthy = true;
      healthy.entities = {r.subject};
      healthy.node_name = world_.name(node);
      healthy.generated = world_.now();
      healthy.id = "cleared/" + r.event_id + "/" + r.subject.type + "/" + r.subject.value;
      observe(node, std::move(healthy));
    }
  }

  void clear_all(int node) { clear(node, state(node).active.records()); }

  // seed 000 §4.2: the release ends the node's remediations; uncordon.
  void release(int node) {
    auto& st = state(node);
    st.cordoned = false;
    st.draining = false;
    st.drain_key.clear();
    st.drained_key.clear();
    st.history = control::drain_history::none;
    world_.put_back(node);
    consider(node); // no records: the machine releases
  }

  void arm_breaker_reset() {
    if (reset_armed_)
      return;
    reset_armed_ = true;
    world_.timer(world_.now() + world_.model().breaker_operator_reset, -1,
                 breaker_reset_timer, 0);
  }

  // `vigil breaker reset`: the operator's; held nodes try again.
  void on_breaker_reset() {
    reset_armed_ = false;
    breaker_.reset();
    const auto held = std::move(held_);
    held_.clear();
    for (int node : held)
      if (nodes_[node])
        reconcile(node);
  }

  fleet_world& world_;
  std::vector<std::unique_ptr<node_state>> nodes_;
  control::fabric_correlator fabric_;
  control::circuit_breaker breaker_;
  control::quarantine_policy quarantine_;
  control::node_gpu_facts facts_;
  std::set<int> held_; ///< nodes the breaker refused, retried on its reset
  bool reset_armed_ = false;
  std::optional<wall_time> last_incident_;
  std::uint64_t tokens_ = 0;
};

} // namespace

std::unique_ptr<policy> make_vigil_policy(fleet_world& world) {
  return std::make_unique<vigil_policy>(world);
}

} // namespace vigil::demo::fleet_sim
