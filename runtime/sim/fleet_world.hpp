// The fleet simulation's world: nodes, their hardware and ground truth, the
// agents' signals (built by the agents' own parsers and event builders), time
// and the accounting. A policy decides; the world carries it out.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "actors/agent/nic/nic_events.hpp"
#include "actors/agent/nic/nic_health.hpp"
#include "actors/agent/xid/xid_catalog.hpp"
#include "actors/agent/xid/xid_events.hpp"
#include "actors/agent/xid/xid_parser.hpp"
#include "messages/health_event.hpp"
#include "runtime/clock.hpp"
#include "runtime/sim/fleet_trace.hpp"

namespace vigil::demo::fleet_sim {

enum class action_kind { reset, reboot, replace, support };

enum class event_kind {
  fault_onset,  ///< index: fault
  fault_recur,  ///< index: fault; token: node incarnation
  cable_flap,   ///< index: fault
  port_up,      ///< node, nic; token: node incarnation
  switch_down,  ///< index: fault; node, nic
  switch_up,    ///< index: fault
  app_xid,      ///< index: noise
  nic_flap,     ///< index: noise
  found_check,  ///< index: fault
  action_done,  ///< index: action_kind; nic: GPU
  policy_timer, ///< index: the policy's timer code; token: the policy's
};

struct sim_event {
  wall_time at{};
  std::uint64_t seq = 0; ///< ties break by scheduling order
  event_kind kind = event_kind::fault_onset;
  int node = -1;
  int index = -1;
  int nic = -1;
  std::uint64_t token = 0;
};

struct later {
  bool operator()(const sim_event& a, const sim_event& b) const {
    return a.at != b.at ? a.at > b.at : a.seq > b.seq;
  }
};

class policy {
public:
  virtual ~policy() = default;
  /// A HealthEvent of `node` reached the control plane.
  virtual void on_signal(int node, health_event event) = 0;
  virtual void on_timer(const sim_event& timer) = 0;
  /// An action finished; its ground truth is applied and the node is up.
  virtual void on_action_done(int node, action_kind kind, int gpu) = 0;
  /// A remediation of the node runs, or a person was asked.
  virtual bool acting_on(int node) const = 0;
};

enum class fixed_by { policy, support, people };

class fleet_world {
public:
  fleet_world(const fleet_options& options, const fleet_trace& trace,
              const agent::xid_catalog& catalog, policy_outcome& outcome)
    : options_(options), trace_(trace), catalog_(catalog), outcome_(outcome),
      clock_(epoch), durations_(mix(options.seed ^ 0x6475726174696f6eull)),
      faults_(trace.faults.size()), slots_(static_cast<std::size_t>(options.nodes)) {
    const int width = options.nodes > 10000 ? 5 : 4;
    for (int n = 0; n < options.nodes; ++n) {
      auto& s = slots_[n];
      char buf[32];
      std::snprintf(buf, sizeof buf, "gpu-node-%0*d", width, n);
      s.name = buf;
      s.whole_node_jobs = trace.whole_node_jobs[n];
      s.accounted = epoch;
      name_index_[s.name] = n;
      learn_uuids(n);
    }
    down_verdict_ = *agent::evaluate_port("1: DOWN", "2: Polling", "InfiniBand");
    up_verdict_ = *agent::evaluate_port("4: ACTIVE", "5: LinkUp", "InfiniBand");
  }

  void run(policy& p) {
    policy_ = &p;
    for (std::size_t i = 0; i < trace_.faults.size(); ++i)
      push({trace_.faults[i].onset, 0, event_kind::fault_onset, trace_.faults[i].node,
            static_cast<int>(i)});
    for (std::size_t i = 0; i < trace_.noise.size(); ++i) {
      const auto& n = trace_.noise[i];
      push({n.at, 0, n.flap ? event_kind::nic_flap : event_kind::app_xid, n.node,
            static_cast<int>(i)});
    }
    const auto horizon = epoch + std::chrono::hours{24} * options_.days;
    // Faults of the last day play out; found_check bounds each to a few days.
    const auto limit = horizon + std::chrono::hours{24 * 30};
    while (!queue_.empty()) {
      auto e = queue_.top();
      queue_.pop();
      if (e.at > limit)
        break;
      advance_to(e.at);
      dispatch(e);
    }
    advance_to(std::max(now(), horizon));
    for (int n = 0; n < size(); ++n)
      touch(n);
    const auto hours = [](std::int64_t gpu_ms) {
      return std::round(static_cast<double>(gpu_ms) / 36000.0) / 100.0;
    };
    outcome_.gpu_hours_out_of_service = hours(out_ms_);
    outcome_.gpu_hours_faulty_in_service = hours(faulty_ms_);
    outcome_.gpu_hours_lost = hours(out_ms_ + faulty_ms_);
  }

  // What a policy reads.
  wall_time now() const { return clock_.wall_now(); }
  const fleet_model& model() const { return options_.model; }
  int size() const { return options_.nodes; }
  const std::string& name(int node) const { return slots_[node].name; }
  int index_of(const std::string& name) const {
    auto it = name_index_.find(name);
    return it == name_index_.end() ? -1 : it->second;
  }
  bool whole_node_jobs(int node) const { return slots_[node].whole_node_jobs; }
  int gpu_index(int node, const std::string& uuid) const {
    const auto& uuids = slots_[node].uuids;
    auto it = std::find(uuids.begin(), uuids.end(), uuid);
    return it == uuids.end() ? -1 : static_cast<int>(it - uuids.begin());
  }
  /// The drain of the node's pods: one 8-GPU pod, or single-GPU pods at once.
  nanoseconds drain_time(int node) const {
    return whole_node_jobs(node) ? model().drain_whole_node
                                 : model().drain_single_gpu_pod;
  }
  policy_outcome& outcome() { return outcome_; }

  // What a policy does.
  void timer(wall_time at, int node, int code, std::uint64_t token) {
    push({std::max(at, now()), 0, event_kind::policy_timer, node, code, -1, token});
  }

  /// Evictions: these GPUs stop working until put_back.
  void take_out(int node, std::uint8_t gpus) {
    touch(node);
    slots_[node].drained |= gpus;
  }

  /// The node is released: its GPUs work again, and an unfixed GPU fault
  /// shows again once the job hits it.
  void put_back(int node) {
    touch(node);
    auto& s = slots_[node];
    s.drained = 0;
    for (int id : s.faults)
      if (trace_.faults[id].signal == signal_kind::xid)
        recur_later(id, recurrence_delay(id));
  }

  void start_action(int node, action_kind kind, int gpu) {
    auto& s = slots_[node];
    auto& counts = outcome_.remediations;
    ++(kind == action_kind::reset     ? counts.reset
       : kind == action_kind::reboot  ? counts.reboot
       : kind == action_kind::replace ? counts.replace
                                      : counts.contact_support);
    // False: nothing faulty where it acts (the GPU it resets, or the node).
    const bool faulty = std::any_of(s.faults.begin(), s.faults.end(), [&](int id) {
      const auto& f = trace_.faults[id];
      return kind != action_kind::reset || (f.signal == signal_kind::xid && f.gpu == gpu);
    });
    outcome_.false_remediations += faulty ? 0 : 1;
    const auto& m = model();
    nanoseconds took = m.support_turnaround;
    if (kind == action_kind::reset)
      took = durations_.between(m.reset_min, m.reset_max);
    else if (kind == action_kind::reboot)
      took = durations_.between(m.reboot_min, m.reboot_max);
    else if (kind == action_kind::replace)
      took = m.replace;
    if (kind == action_kind::reboot || kind == action_kind::replace) {
      touch(node);
      s.down = true;
      s.replacing = kind == action_kind::replace;
    }
    push({now() + took, 0, event_kind::action_done, node, static_cast<int>(kind), gpu});
  }

  /// The validation Job's verdict: an unfixed fault on the GPU (on any GPU
  /// when `gpu` is -1) is found with model().validation_detects.
  bool validation_passes(int node, int gpu) {
    for (int id : slots_[node].faults) {
      const auto& f = trace_.faults[id];
      if (f.signal == signal_kind::xid && (gpu < 0 || f.gpu == gpu)
          && durations_.chance(model().validation_detects))
        return false;
    }
    return true;
  }

  /// The reset Job's line (seed 000 §1.2): the agent's healthy event.
  void emit_reset_occurred(int node, int gpu) {
    emit_line(node, "GPU reset occurred: " + slots_[node].uuids[gpu]);
  }

private:
  struct fault_state {
    bool fixed = false;
    bool recur_pending = false;
    std::unique_ptr<random_stream> stream;
  };

  struct node_slot {
    std::string name;
    int incarnation = 0; ///< a replace brings a new node
    std::array<std::string, gpus_per_node> uuids;
    bool whole_node_jobs = true;
    bool down = false; ///< rebooting, or waiting for its replacement
    bool replacing = false;
    std::uint8_t drained = 0; ///< GPUs the policy took away from work
    wall_time accounted{};
    std::vector<int> faults;   ///< unfixed node-local hardware faults
    std::vector<int> deferred; ///< faults whose onset fell into a replacement
    std::unique_ptr<agent::xid_event_builder> agent;
    int boot = 0;
    std::array<std::uint64_t, nics_per_node> link_downed{};
  };

  void push(sim_event e) {
    e.seq = ++seq_;
    queue_.push(e);
  }

  void advance_to(wall_time at) {
    if (at > now())
      clock_.advance(at - now());
  }

  void learn_uuids(int node) {
    auto& s = slots_[node];
    for (int g = 0; g < gpus_per_node; ++g)
      s.uuids[g] = gpu_uuid(node, s.incarnation, g);
    s.agent.reset();
  }

  random_stream& stream(int id) {
    auto& st = faults_[id];
    if (!st.stream)
      st.stream = std::make_unique<random_stream>(trace_.faults[id].stream_seed);
    return *st.stream;
  }

  nanoseconds recurrence_delay(int id) {
    const auto& m = model();
    return m.recurrence_min
           + to_ns(stream(id).exponential(
             static_cast<double>(m.recurrence_mean_extra.count())));
  }

  void recur_later(int id, nanoseconds delay) {
    auto& st = faults_[id];
    if (st.recur_pending)
      return;
    st.recur_pending = true;
    const auto& f = trace_.faults[id];
    push({now() + delay, 0, event_kind::fault_recur, f.node, id, -1,
          static_cast<std::uint64_t>(slots_[f.node].incarnation)});
  }

  // GPUs a node's unfixed faults keep failing while they work.
  std::uint8_t impact(const node_slot& s) const {
    std::uint8_t mask = 0;
    for (int id : s.faults) {
      const auto& f = trace_.faults[id];
      const bool one_gpu = f.signal == signal_kind::xid && !s.whole_node_jobs;
      mask |= one_gpu ? gpu_bit(f.gpu) : whole_node;
    }
    return mask;
  }

  // Integrates the node's lost GPU time up to now; called before any change.
  void touch(int node) {
    auto& s = slots_[node];
    const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now() - s.accounted).count();
    if (ms > 0) {
      const std::uint8_t out = s.down ? whole_node : s.drained;
      const auto hurt = static_cast<std::uint8_t>(impact(s) & ~out);
      out_ms_ += gpus_in(out) * ms;
      faulty_ms_ += gpus_in(hurt) * ms;
    }
    s.accounted = now();
  }

  void fix(int id, fixed_by how) {
    auto& st = faults_[id];
    if (st.fixed)
      return;
    const auto& f = trace_.faults[id];
    touch(f.node);
    st.fixed = true;
    auto& list = slots_[f.node].faults;
    list.erase(std::remove(list.begin(), list.end(), id), list.end());
    ++(how == fixed_by::policy    ? outcome_.faults_fixed
       : how == fixed_by::support ? outcome_.faults_fixed_by_support
                                  : outcome_.missed_faults);
    if (how == fixed_by::people)
      ++outcome_.missed_by_category[category_keys[static_cast<std::size_t>(f.what)]];
  }

  void dispatch(const sim_event& e) {
    switch (e.kind) {
      case event_kind::fault_onset: return onset(e.index);
      case event_kind::fault_recur: return recur(e.index, e.token);
      case event_kind::cable_flap: return cable_flap(e.index);
      case event_kind::port_up:
        if (slots_[e.node].incarnation == static_cast<int>(e.token))
          emit_port(e.node, e.nic, true);
        return;
      case event_kind::switch_down:
        if (now() < trace_.faults[e.index].repaired)
          emit_port(e.node, e.nic, false);
        return;
      case event_kind::switch_up: {
        const auto& f = trace_.faults[e.index];
        for (int n = f.first_node; n < f.end_node; ++n)
          emit_port(n, f.nic, true);
        return;
      }
      case event_kind::app_xid: {
        const auto& n = trace_.noise[e.index];
        return emit_xid(n.node, n.xid, n.gpu);
      }
      case event_kind::nic_flap: return nic_flap(trace_.noise[e.index]);
      case event_kind::found_check: return found_check(e.index);
      case event_kind::action_done:
        return action_done(e.node, static_cast<action_kind>(e.index), e.nic);
      case event_kind::policy_timer: return policy_->on_timer(e);
    }
  }

  void onset(int id) {
    const auto& f = trace_.faults[id];
    auto& s = slots_[f.node];
    if (f.signal == signal_kind::switch_outage) {
      for (int n = f.first_node; n < f.end_node; ++n)
        push({now()
                + stream(id).between(std::chrono::seconds{0}, model().switch_down_spread),
              0, event_kind::switch_down, n, id, f.nic});
      push({f.repaired, 0, event_kind::switch_up, f.node, id});
      return;
    }
    if (!f.hardware()) // software, contained SRAM: one XID, nothing to fix
      return emit_xid(f.node, f.xid, f.gpu);
    if (s.replacing) { // hits the new node once it is there
      s.deferred.push_back(id);
      return;
    }
    touch(f.node);
    s.faults.push_back(id);
    push({now() + model().found_otherwise_after, 0, event_kind::found_check, f.node, id});
    if (f.signal == signal_kind::port_flapping)
      return cable_flap(id);
    signal(id);
  }

  // The fault's own signal, now.
  void signal(int id) {
    const auto& f = trace_.faults[id];
    switch (f.signal) {
      case signal_kind::xid: return emit_xid(f.node, f.xid, f.gpu);
      case signal_kind::port_down: return emit_port(f.node, f.nic, false);
      case signal_kind::nic_gone: return emit_nic_gone(f.node, f.nic);
      default: return;
    }
  }

  void recur(int id, std::uint64_t incarnation) {
    auto& st = faults_[id];
    st.recur_pending = false;
    const auto& f = trace_.faults[id];
    const auto& s = slots_[f.node];
    if (st.fixed || s.incarnation != static_cast<int>(incarnation) || s.down)
      return;
    // A drained GPU runs no job to hit the fault: it shows once put back.
    if (f.signal == signal_kind::xid && (s.drained & gpu_bit(f.gpu)) != 0)
      return;
    signal(id);
  }

  void cable_flap(int id) {
    if (faults_[id].fixed)
      return;
    const auto& f = trace_.faults[id];
    const auto& m = model();
    auto& r = stream(id);
    const auto down = r.between(m.flap_down_min, m.flap_down_max);
    if (!slots_[f.node].down) {
      emit_port(f.node, f.nic, false);
      push({now() + down, 0, event_kind::port_up, f.node, id, f.nic,
            static_cast<std::uint64_t>(slots_[f.node].incarnation)});
    }
    push({now() + down + r.between(m.cable_flap_gap_min, m.cable_flap_gap_max), 0,
          event_kind::cable_flap, f.node, id});
  }

  void nic_flap(const noise_signal& n) {
    if (slots_[n.node].down)
      return;
    emit_port(n.node, n.nic, false);
    push({now() + n.down, 0, event_kind::port_up, n.node, -1, n.nic,
          static_cast<std::uint64_t>(slots_[n.node].incarnation)});
  }

  // Nobody fixed the fault in time: people find it (the job keeps crashing)
  // and repair the node by hand, unless a remediation is under way.
  void found_check(int id) {
    if (faults_[id].fixed)
      return;
    const auto& f = trace_.faults[id];
    if (slots_[f.node].down || policy_->acting_on(f.node)) {
      push({now() + std::chrono::hours{1}, 0, event_kind::found_check, f.node, id});
      return;
    }
    fix(id, fixed_by::people);
    out_ms_ +=
      std::int64_t{gpus_per_node}
      * std::chrono::duration_cast<std::chrono::milliseconds>(model().replace).count();
  }

  void action_done(int node, action_kind kind, int gpu) {
    auto& s = slots_[node];
    touch(node);
    const auto faults = s.faults;
    for (int id : faults) {
      const auto& f = trace_.faults[id];
      const bool fixed = kind == action_kind::replace || kind == action_kind::support
                         || (kind == action_kind::reboot && f.needs != fix_level::replace)
                         || (kind == action_kind::reset && f.needs == fix_level::reset
                             && f.gpu == gpu && f.signal == signal_kind::xid);
      if (fixed)
        fix(id, kind == action_kind::support ? fixed_by::support : fixed_by::policy);
    }
    if (kind == action_kind::reboot || kind == action_kind::replace) {
      s.down = false;
      s.replacing = false;
      ++s.boot;
      s.agent.reset();
      s.link_downed = {};
    }
    if (kind == action_kind::replace) {
      ++s.incarnation;
      s.drained = 0;
      learn_uuids(node);
      for (int id : s.deferred)
        push({now(), 0, event_kind::fault_onset, node, id});
      s.deferred.clear();
    }
    policy_->on_action_done(node, kind, gpu);
    if (kind == action_kind::reboot || kind == action_kind::replace)
      booted(node);
  }

  // A node just booted: its agents report what is still wrong at their
  // first poll (ports down, a NIC missing).
  void booted(int node) {
    const auto& s = slots_[node];
    for (int id : s.faults) {
      const auto sig = trace_.faults[id].signal;
      if (sig == signal_kind::port_down || sig == signal_kind::nic_gone)
        recur_later(id, model().agent_start);
    }
    for (int id : trace_.outages) {
      const auto& f = trace_.faults[id];
      if (node >= f.first_node && node < f.end_node && f.onset <= now()
          && now() < f.repaired)
        push({now() + model().agent_start, 0, event_kind::switch_down, node, id, f.nic});
    }
  }

  agent::xid_event_builder& agent_of(int node) {
    auto& s = slots_[node];
    if (!s.agent) {
      s.agent = std::make_unique<agent::xid_event_builder>(
        catalog_, agent::xid_event_options{s.name, boot_id(s)});
      for (int g = 0; g < gpus_per_node; ++g)
        s.agent->learn_gpu(gpu_pci[g], s.uuids[g]);
    }
    return *s.agent;
  }

  static std::string boot_id(const node_slot& s) {
    return "boot-" + std::to_string(s.incarnation) + "-" + std::to_string(s.boot);
  }

  void deliver(int node, health_event event) {
    ++outcome_.signals;
    policy_->on_signal(node, std::move(event));
  }

  void emit_line(int node, const std::string& line) {
    if (slots_[node].down)
      return;
    auto parsed = parser_.parse(line);
    if (auto event = agent_of(node).build(parsed, line, now()))
      deliver(node, std::move(*event));
  }

  void emit_xid(int node, int code, int gpu) { emit_line(node, xid_line(code, gpu)); }

  agent::nic_event_context nic_context(int node) const {
    const auto& s = slots_[node];
    return {s.name, processing_strategy::execute_remediation, boot_id(s), now()};
  }

  void emit_port(int node, int nic, bool up) {
    auto& s = slots_[node];
    if (s.down)
      return;
    const auto ctx = nic_context(node);
    const auto device = "mlx5_" + std::to_string(nic);
    deliver(node, agent::make_port_state_event(ctx, device, 1, "InfiniBand",
                                               up ? up_verdict_ : down_verdict_, "", {}));
    if (up || !model().link_downed_counter_events)
      return;
    auto& count = s.link_downed[nic];
    agent::counter_finding finding{agent::counter_finding::kind::increased, "link_downed",
                                   count, count + 1};
    ++count;
    deliver(node, agent::make_counter_event(ctx, device, 1, "InfiniBand", finding));
  }

  void emit_nic_gone(int node, int nic) {
    if (slots_[node].down)
      return;
    deliver(node, agent::make_disappeared_event(
                    nic_context(node), "mlx5_" + std::to_string(nic), "InfiniBand"));
  }

  const fleet_options& options_;
  const fleet_trace& trace_;
  const agent::xid_catalog& catalog_;
  policy_outcome& outcome_;
  manual_clock clock_;
  random_stream durations_;
  std::vector<fault_state> faults_;
  std::vector<node_slot> slots_;
  std::map<std::string, int> name_index_;
  std::priority_queue<sim_event, std::vector<sim_event>, later> queue_;
  std::uint64_t seq_ = 0;
  policy* policy_ = nullptr;
  agent::kernel_log_parser parser_;
  agent::port_verdict down_verdict_;
  agent::port_verdict up_verdict_;
  std::int64_t out_ms_ = 0;    ///< GPU-milliseconds out of service
  std::int64_t faulty_ms_ = 0; ///< GPU-milliseconds failing at work
};

/// The two policies a run compares: vigil's control-plane rules, driven
/// through the production remediation_machine, and reboot-every-fault.
std::unique_ptr<policy> make_vigil_policy(fleet_world& world);
std::unique_ptr<policy> make_baseline_policy(fleet_world& world);

} // namespace vigil::demo::fleet_sim
