#include "runtime/demo/fleet_simulation.hpp"

#include <algorithm>
#include <array>
#include <bitset>
#include <cmath>
#include <cstdio>
#include <deque>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "actors/agent/nic/nic_events.hpp"
#include "actors/agent/nic/nic_health.hpp"
#include "actors/agent/xid/xid_catalog.hpp"
#include "actors/agent/xid/xid_events.hpp"
#include "actors/agent/xid/xid_parser.hpp"
#include "actors/control/remediation/remediation_machine.hpp"
#include "actors/control/remediation/remediation_plan.hpp"
#include "actors/control/rules/drain_plan.hpp"
#include "actors/control/rules/quarantine_rules.hpp"
#include "runtime/clock.hpp"

namespace vigil::demo {

namespace {

using std::chrono::nanoseconds;

constexpr int gpus_per_node = 8;
constexpr int nics_per_node = 8;
constexpr std::uint8_t whole_node = 0xFF;
constexpr int max_nodes = 100000;
constexpr int max_days = 3650;
/// Time zero of every run: the manual clock's default start.
const wall_time epoch = from_unix(1'700'000'000, 0);

/// HGX H100 bus addresses of GPUs 0..7.
constexpr std::array<const char*, gpus_per_node> gpu_pci = {
  "0000:18:00", "0000:2a:00", "0000:3a:00", "0000:5d:00",
  "0000:9a:00", "0000:ab:00", "0000:ba:00", "0000:db:00"};

int gpus_in(std::uint8_t mask) {
  return static_cast<int>(std::bitset<8>(mask).count());
}

std::uint8_t gpu_bit(int gpu) {
  return static_cast<std::uint8_t>(1u << gpu);
}

/// Whole milliseconds, so that every time in a run is exact.
nanoseconds to_ns(double seconds) {
  return std::chrono::milliseconds{std::llround(seconds * 1000.0)};
}

// Randomness: mt19937_64's output is fixed by the standard; the std
// distributions are not, so these few are written out.

std::uint64_t mix(std::uint64_t x) { // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

class random_stream {
public:
  explicit random_stream(std::uint64_t seed) : engine_(seed) {}

  /// [0, 1) from the top 53 bits.
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  bool chance(double p) { return uniform() < p; }
  int below(int n) { return std::min(n - 1, static_cast<int>(uniform() * n)); }
  /// By inversion.
  double exponential(double mean) { return -mean * std::log1p(-uniform()); }
  nanoseconds between(std::chrono::seconds lo, std::chrono::seconds hi) {
    return to_ns(static_cast<double>(lo.count())
                 + static_cast<double>((hi - lo).count()) * uniform());
  }
  template <std::size_t N>
  std::size_t weighted(const std::array<double, N>& weights) {
    double total = 0;
    for (double w : weights)
      total += w;
    double pick = uniform() * total;
    for (std::size_t i = 0; i < N; ++i) {
      if (pick < weights[i])
        return i;
      pick -= weights[i];
    }
    return N - 1;
  }

private:
  std::mt19937_64 engine_;
};

// The trace: faults with their ground truth, and noise.

enum class category {
  faulty_gpu,
  hbm,
  software,
  network,
  host_maintenance,
  sram,
  gsp,
  nic,
  other_host
};
constexpr std::size_t category_count = 9;
constexpr std::array<const char*, category_count> category_keys = {
  "faultyGpu", "hbm", "software", "network",  "hostMaintenance",
  "sram",      "gsp", "nic",      "otherHost"};
constexpr std::array<const char*, category_count> category_labels = {
  "faulty GPU", "HBM", "software", "network",   "host maintenance",
  "SRAM",       "GSP", "NIC",      "other host"};

std::array<double, category_count> category_weights(const fleet_model& m) {
  return {
    m.faulty_gpu_percent,       m.hbm_percent,  m.software_percent, m.network_percent,
    m.host_maintenance_percent, m.sram_percent, m.gsp_percent,      m.nic_percent,
    m.other_host_percent};
}

/// The least action that fixes a fault; none: nothing is faulty; external:
/// not the node's fault (a leaf switch), repaired by others.
enum class fix_level { none, reset, reboot, replace, external };

enum class signal_kind { xid, port_flapping, port_down, nic_gone, switch_outage, silent };

struct fault {
  category what = category::software;
  signal_kind signal = signal_kind::xid;
  fix_level needs = fix_level::none;
  int node = 0;
  wall_time onset{};
  int xid = 0;
  int gpu = -1;
  int nic = -1;
  std::uint64_t stream_seed = 0; ///< its recurrences and flaps
  int first_node = 0;            ///< switch outage: nodes [first_node, end_node)
  int end_node = 0;
  wall_time repaired{};

  /// A node-local hardware fault: some action on the node fixes it.
  bool hardware() const {
    return needs == fix_level::reset || needs == fix_level::reboot
           || needs == fix_level::replace;
  }
};

struct noise_signal {
  wall_time at{};
  int node = 0;
  bool flap = false; ///< a NIC flap, else an application XID
  int xid = 0;
  int gpu = 0;
  int nic = 0;
  nanoseconds down{};
};

struct fleet_trace {
  std::vector<fault> faults;
  std::vector<noise_signal> noise;
  std::vector<bool> whole_node_jobs;
  std::vector<int> outages; ///< indexes of switch-outage faults
};

constexpr std::array<int, 3> app_xid_codes = {13, 31, 43};
constexpr std::array<double, 3> app_xid_weights = {50, 30, 20};
/// Every XID the model emits; the catalog must have each.
constexpr std::array<int, 10> model_xids = {13, 31, 43, 48, 79, 94, 95, 119, 120, 154};

fix_level draw_fix(random_stream& r, const fix_odds& odds) {
  const double u = r.uniform();
  if (u < odds.reset)
    return fix_level::reset;
  if (u < odds.reset + odds.reboot)
    return fix_level::reboot;
  return fix_level::replace;
}

/// Poisson arrivals over the horizon.
std::vector<wall_time> arrivals(random_stream& r, double per_1000_node_days, int nodes,
                                int days) {
  std::vector<wall_time> out;
  if (!(per_1000_node_days > 0))
    return out;
  const double mean_gap = 86400.0 * 1000.0 / (per_1000_node_days * nodes);
  const double horizon = 86400.0 * days;
  for (double t = r.exponential(mean_gap); t < horizon; t += r.exponential(mean_gap))
    out.push_back(epoch + to_ns(t));
  return out;
}

void describe(fault& f, const fleet_model& m, random_stream& r, int nodes) {
  f.gpu = r.below(gpus_per_node);
  f.nic = r.below(nics_per_node);
  switch (f.what) {
    case category::faulty_gpu:
      f.xid = 79;
      f.needs = draw_fix(r, m.faulty_gpu_fix);
      break;
    case category::hbm:
      f.xid = 48;
      f.needs = draw_fix(r, m.hbm_fix);
      break;
    case category::software: f.xid = app_xid_codes[r.weighted(app_xid_weights)]; break;
    case category::network:
      if (r.chance(m.network_switch_fraction)) {
        f.signal = signal_kind::switch_outage;
        f.needs = fix_level::external;
        f.first_node = f.node / m.nodes_per_leaf * m.nodes_per_leaf;
        f.end_node = std::min(nodes, f.first_node + m.nodes_per_leaf);
        f.repaired =
          f.onset
          + to_ns(r.exponential(static_cast<double>(m.switch_repair_mean.count())));
      } else {
        f.signal = r.chance(m.cable_flapping_fraction) ? signal_kind::port_flapping
                                                       : signal_kind::port_down;
        f.needs = fix_level::replace;
      }
      break;
    case category::host_maintenance:
      f.xid = 154;
      f.needs = draw_fix(r, m.host_maintenance_fix);
      break;
    case category::sram:
      if (r.chance(m.sram_uncontained_fraction)) {
        f.xid = 95;
        f.needs = draw_fix(r, m.sram_fix);
      } else {
        f.xid = 94; // contained: the application restarts, nothing to repair
      }
      break;
    case category::gsp:
      f.xid = r.chance(0.5) ? 119 : 120;
      f.needs = draw_fix(r, m.gsp_fix);
      break;
    case category::nic:
      f.signal = signal_kind::nic_gone;
      f.needs = fix_level::replace;
      break;
    case category::other_host:
      f.xid = 79;
      f.signal =
        r.chance(m.other_host_silent_fraction) ? signal_kind::silent : signal_kind::xid;
      f.needs = draw_fix(r, m.other_host_fix);
      break;
  }
}

fleet_trace make_trace(const fleet_options& o) {
  const auto& m = o.model;
  fleet_trace t;
  // One stream per part, so that changing one rate leaves the others' draws.
  random_stream jobs(mix(o.seed ^ 0x6a6f6273ull));
  for (int n = 0; n < o.nodes; ++n)
    t.whole_node_jobs.push_back(jobs.chance(m.whole_node_job_fraction));
  random_stream faults(mix(o.seed ^ 0x6661756c7473ull));
  const auto weights = category_weights(m);
  for (auto at : arrivals(faults, m.interruptions_per_1000_node_days, o.nodes, o.days)) {
    fault f;
    f.onset = at;
    f.node = faults.below(o.nodes);
    f.what = static_cast<category>(faults.weighted(weights));
    f.stream_seed = mix(o.seed ^ mix(t.faults.size() + 1));
    describe(f, m, faults, o.nodes);
    if (f.signal == signal_kind::switch_outage)
      t.outages.push_back(static_cast<int>(t.faults.size()));
    t.faults.push_back(f);
  }
  random_stream xids(mix(o.seed ^ 0x78696473ull));
  for (auto at : arrivals(xids, m.app_xids_per_1000_node_days, o.nodes, o.days)) {
    noise_signal n;
    n.at = at;
    n.node = xids.below(o.nodes);
    n.xid = app_xid_codes[xids.weighted(app_xid_weights)];
    n.gpu = xids.below(gpus_per_node);
    t.noise.push_back(n);
  }
  random_stream flaps(mix(o.seed ^ 0x666c617073ull));
  for (auto at : arrivals(flaps, m.nic_flaps_per_1000_node_days, o.nodes, o.days)) {
    noise_signal n;
    n.at = at;
    n.node = flaps.below(o.nodes);
    n.flap = true;
    n.nic = flaps.below(nics_per_node);
    n.down = flaps.between(m.flap_down_min, m.flap_down_max);
    t.noise.push_back(n);
  }
  return t;
}

/// The kernel log line of one XID, as the driver writes it.
std::string xid_line(int code, int gpu) {
  const std::string head =
    std::string("NVRM: Xid (PCI:") + gpu_pci[gpu] + "): " + std::to_string(code) + ", ";
  const std::string app = head + "pid=4242, name=python3, ";
  switch (code) {
    case 13: return app + "Graphics Exception: ESR 0x514730=0x201f0000 0x514734=0x0";
    case 31:
      return app
             + "Ch 00000008, intr 10000000. MMU Fault: ENGINE GRAPHICS "
               "GPCCLIENT_T1_0 faulted @ 0x7f3a_00000000. Fault is of type "
               "FAULT_PDE ACCESS_TYPE_READ";
    case 43: return app + "Ch 00000010";
    case 48:
      return app
             + "An uncorrectable double bit error (DBE) has been detected on GPU "
               "in the framebuffer at partition 6, subpartition 0.";
    case 79: return head + "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.";
    case 94: return app + "Contained: SM (0x1). RST: No, D-RST: No";
    case 95: return app + "Uncontained: FBHUB. RST: Yes, D-RST: No";
    case 119:
      return app
             + "Timeout after 6s of waiting for RPC response from GPU0 GSP! "
               "Expected function 76 (GSP_RM_CONTROL) (0x20800a4c 0x4).";
    case 120: return app + "GSP task timeout @ pc:0x4bd36ec, task: 1";
    case 154:
      return head
             + "pid='<unknown>', name=<unknown>, GPU recovery action changed "
               "from 0x0 (None) to 0x2 (Node Reboot Required)";
    default: return app + "XID " + std::to_string(code);
  }
}

std::string gpu_uuid(int node, int incarnation, int gpu) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "GPU-%08x-%04x-4000-8000-%012x",
                static_cast<unsigned>(node), static_cast<unsigned>(incarnation & 0xffff),
                static_cast<unsigned>(gpu));
  return buf;
}

// The world: nodes, their hardware and ground truth, the agents' signals,
// time and the accounting. A policy decides; the world carries it out.

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

// vigil: the control plane's rules as the fleet, node and remediation code
// runs them (actors/control/fleet, node, node_remediation), without actors.

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
    std::vector<health_event> events{std::move(event)};
    if (outcome.escalate && !events.front().is_healthy) {
      ++world_.outcome().rule_firings;
      events.front().action = *outcome.escalate;
    }
    for (auto& derived : outcome.derived)
      events.push_back(std::move(derived));
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

// The baseline: every unhealthy signal drains the node and reboots it; the
// (cap + 1)-th reboot within the window is a replace. No breaker.

class baseline_policy final : public policy {
public:
  explicit baseline_policy(fleet_world& world)
    : world_(world), nodes_(static_cast<std::size_t>(world.size())),
      shadow_(world.model().breaker) {}

  void on_signal(int node, health_event event) override {
    auto& st = nodes_[node];
    if (event.is_healthy || st.busy)
      return;
    st.busy = true;
    // breakerTrips: would these cordons have tripped vigil's breaker?
    if (shadow_.admit_cordon(world_.name(node), world_.size(), world_.now())
        == control::breaker_refusal::trips_now) {
      ++world_.outcome().breaker_trips;
      shadow_.reset();
    }
    ++world_.outcome().cordons;
    ++world_.outcome().drains;
    world_.take_out(node, whole_node);
    world_.timer(world_.now() + world_.drain_time(node), node, 0, 0);
  }

  void on_timer(const sim_event& t) override {
    auto& st = nodes_[t.node];
    const auto now = world_.now();
    while (!st.reboots.empty()
           && st.reboots.front() <= now - world_.model().baseline_reboot_window)
      st.reboots.pop_front();
    if (static_cast<int>(st.reboots.size()) >= world_.model().baseline_max_reboots)
      return world_.start_action(t.node, action_kind::replace, -1);
    st.reboots.push_back(now);
    world_.start_action(t.node, action_kind::reboot, -1);
  }

  void on_action_done(int node, action_kind kind, int) override {
    auto& st = nodes_[node];
    st.busy = false;
    if (kind == action_kind::replace)
      st.reboots.clear();
    world_.put_back(node);
  }

  bool acting_on(int node) const override { return nodes_[node].busy; }

private:
  struct node_state {
    bool busy = false; ///< draining, rebooting or replacing
    std::deque<wall_time> reboots;
  };

  fleet_world& world_;
  std::vector<node_state> nodes_;
  control::circuit_breaker shadow_;
};

// Options, summary, output.

status check_fix(const char* field, const fix_odds& odds) {
  const bool negative = odds.reset < 0 || odds.reboot < 0 || odds.replace < 0;
  if (negative || std::abs(odds.reset + odds.reboot + odds.replace - 1.0) > 1e-6)
    return failure{std::string("model.") + field,
                   "shares must be non-negative and add up to 1"};
  return ok();
}

status check_range(const char* field, std::chrono::seconds lo, std::chrono::seconds hi) {
  if (lo.count() < 0 || hi < lo)
    return failure{std::string("model.") + field,
                   "must be at least its minimum (and >= 0)"};
  return ok();
}

status validate(const fleet_options& o, const agent::xid_catalog& catalog) {
  if (o.nodes < 1)
    return failure{"--nodes", "must be at least 1"};
  if (o.nodes > max_nodes)
    return failure{"--nodes", "must be at most " + std::to_string(max_nodes)};
  if (o.days < 1)
    return failure{"--days", "must be at least 1"};
  if (o.days > max_days)
    return failure{"--days", "must be at most " + std::to_string(max_days)};
  const auto& m = o.model;
  const std::initializer_list<std::pair<const char*, double>> rates = {
    {"interruptions_per_1000_node_days", m.interruptions_per_1000_node_days},
    {"faulty_gpu_percent", m.faulty_gpu_percent},
    {"hbm_percent", m.hbm_percent},
    {"software_percent", m.software_percent},
    {"network_percent", m.network_percent},
    {"host_maintenance_percent", m.host_maintenance_percent},
    {"sram_percent", m.sram_percent},
    {"gsp_percent", m.gsp_percent},
    {"nic_percent", m.nic_percent},
    {"other_host_percent", m.other_host_percent},
    {"app_xids_per_1000_node_days", m.app_xids_per_1000_node_days},
    {"nic_flaps_per_1000_node_days", m.nic_flaps_per_1000_node_days}};
  for (const auto& [field, value] : rates)
    if (!(value >= 0) || !std::isfinite(value))
      return failure{std::string("model.") + field, "must be a number >= 0"};
  double percent = 0;
  for (double w : category_weights(m))
    percent += w;
  if (m.interruptions_per_1000_node_days > 0 && !(percent > 0))
    return failure{"model.faulty_gpu_percent", "the category percentages are all 0"};
  const std::initializer_list<std::pair<const char*, double>> fractions = {
    {"whole_node_job_fraction", m.whole_node_job_fraction},
    {"sram_uncontained_fraction", m.sram_uncontained_fraction},
    {"network_switch_fraction", m.network_switch_fraction},
    {"cable_flapping_fraction", m.cable_flapping_fraction},
    {"other_host_silent_fraction", m.other_host_silent_fraction},
    {"validation_detects", m.validation_detects}};
  for (const auto& [field, value] : fractions)
    if (!(value >= 0 && value <= 1))
      return failure{std::string("model.") + field, "must be between 0 and 1"};
  for (auto s :
       {check_fix("faulty_gpu_fix", m.faulty_gpu_fix), check_fix("hbm_fix", m.hbm_fix),
        check_fix("sram_fix", m.sram_fix), check_fix("gsp_fix", m.gsp_fix),
        check_fix("host_maintenance_fix", m.host_maintenance_fix),
        check_fix("other_host_fix", m.other_host_fix),
        check_range("reset_max", m.reset_min, m.reset_max),
        check_range("reboot_max", m.reboot_min, m.reboot_max),
        check_range("flap_down_max", m.flap_down_min, m.flap_down_max),
        check_range("cable_flap_gap_max", m.cable_flap_gap_min, m.cable_flap_gap_max)})
    if (!s)
      return s;
  const std::initializer_list<std::pair<const char*, std::chrono::seconds>> positive = {
    {"drain_single_gpu_pod", m.drain_single_gpu_pod},
    {"drain_whole_node", m.drain_whole_node},
    {"replace", m.replace},
    {"support_turnaround", m.support_turnaround},
    {"validation", m.validation},
    {"recurrence_min", m.recurrence_min},
    {"found_otherwise_after", m.found_otherwise_after},
    {"switch_repair_mean", m.switch_repair_mean},
    {"agent_start", m.agent_start},
    {"breaker_operator_reset", m.breaker_operator_reset}};
  for (const auto& [field, value] : positive)
    if (value.count() <= 0)
      return failure{std::string("model.") + field, "must be at least 1 second"};
  if (m.recurrence_mean_extra.count() < 0)
    return failure{"model.recurrence_mean_extra", "must not be negative"};
  if (m.switch_down_spread.count() < 0)
    return failure{"model.switch_down_spread", "must not be negative"};
  if (m.flap_down_min.count() + m.cable_flap_gap_min.count() <= 0)
    return failure{"model.cable_flap_gap_min",
                   "a bad cable's flaps need time between them"};
  if (m.nodes_per_leaf < 1)
    return failure{"model.nodes_per_leaf", "must be at least 1"};
  if (m.baseline_max_reboots < 0)
    return failure{"model.baseline_max_reboots", "must be at least 0"};
  for (int code : model_xids)
    if (catalog.find(code) == nullptr)
      return failure{"xid_catalog.csv", "has no XID " + std::to_string(code)};
  return ok();
}

trace_summary summarise(const fleet_options& o, const fleet_trace& t,
                        const agent::xid_catalog& catalog) {
  trace_summary s;
  s.nodes = o.nodes;
  s.days = o.days;
  s.seed = o.seed;
  for (const char* key : category_keys)
    s.faults_by_category[key] = 0;
  for (const auto& f : t.faults) {
    ++s.faults;
    ++s.faults_by_category[category_keys[static_cast<std::size_t>(f.what)]];
    s.hardware_faults += f.hardware() ? 1 : 0;
    s.switch_outages += f.signal == signal_kind::switch_outage ? 1 : 0;
  }
  for (const auto& n : t.noise)
    ++(n.flap ? s.nic_flaps : s.app_xids);
  agent::kernel_log_parser parser;
  agent::xid_event_builder builder(catalog, {"gpu-node-0000", "boot"});
  for (int code : model_xids) {
    const auto line = xid_line(code, 0);
    auto event = builder.build(parser.parse(line), line, epoch);
    s.xid_actions[code] = event ? std::string(to_string(event->action)) : "";
  }
  return s;
}

nlohmann::json outcome_json(const policy_outcome& o) {
  return {{"gpuHoursLost", o.gpu_hours_lost},
          {"gpuHoursOutOfService", o.gpu_hours_out_of_service},
          {"gpuHoursFaultyInService", o.gpu_hours_faulty_in_service},
          {"remediations",
           {{"reset", o.remediations.reset},
            {"reboot", o.remediations.reboot},
            {"replace", o.remediations.replace},
            {"contactSupport", o.remediations.contact_support}}},
          {"falseRemediations", o.false_remediations},
          {"missedFaults", o.missed_faults},
          {"missedByCategory", o.missed_by_category},
          {"breakerTrips", o.breaker_trips},
          {"faultsFixed", o.faults_fixed},
          {"faultsFixedBySupport", o.faults_fixed_by_support},
          {"signals", o.signals},
          {"cordons", o.cordons},
          {"drains", o.drains},
          {"escalations", o.escalations},
          {"ruleFirings", o.rule_firings},
          {"fabricIncidents", o.fabric_incidents}};
}

} // namespace

expected<fleet_model> read_fleet_model(const std::string& yaml_text, fleet_model base) {
  auto& m = base;
  const std::map<std::string, double*> numbers = {
    {"interruptions_per_1000_node_days", &m.interruptions_per_1000_node_days},
    {"faulty_gpu_percent", &m.faulty_gpu_percent},
    {"hbm_percent", &m.hbm_percent},
    {"software_percent", &m.software_percent},
    {"network_percent", &m.network_percent},
    {"host_maintenance_percent", &m.host_maintenance_percent},
    {"sram_percent", &m.sram_percent},
    {"gsp_percent", &m.gsp_percent},
    {"nic_percent", &m.nic_percent},
    {"other_host_percent", &m.other_host_percent},
    {"app_xids_per_1000_node_days", &m.app_xids_per_1000_node_days},
    {"nic_flaps_per_1000_node_days", &m.nic_flaps_per_1000_node_days},
    {"whole_node_job_fraction", &m.whole_node_job_fraction},
    {"sram_uncontained_fraction", &m.sram_uncontained_fraction},
    {"network_switch_fraction", &m.network_switch_fraction},
    {"cable_flapping_fraction", &m.cable_flapping_fraction},
    {"other_host_silent_fraction", &m.other_host_silent_fraction},
    {"validation_detects", &m.validation_detects}};
  const std::map<std::string, int*> integers = {
    {"nodes_per_leaf", &m.nodes_per_leaf},
    {"baseline_max_reboots", &m.baseline_max_reboots}};
  const std::map<std::string, std::chrono::seconds*> durations = {
    {"drain_single_gpu_pod", &m.drain_single_gpu_pod},
    {"drain_whole_node", &m.drain_whole_node},
    {"reset_min", &m.reset_min},
    {"reset_max", &m.reset_max},
    {"reboot_min", &m.reboot_min},
    {"reboot_max", &m.reboot_max},
    {"replace", &m.replace},
    {"support_turnaround", &m.support_turnaround},
    {"validation", &m.validation},
    {"recurrence_min", &m.recurrence_min},
    {"recurrence_mean_extra", &m.recurrence_mean_extra},
    {"found_otherwise_after", &m.found_otherwise_after},
    {"switch_repair_mean", &m.switch_repair_mean},
    {"switch_down_spread", &m.switch_down_spread},
    {"flap_down_min", &m.flap_down_min},
    {"flap_down_max", &m.flap_down_max},
    {"cable_flap_gap_min", &m.cable_flap_gap_min},
    {"cable_flap_gap_max", &m.cable_flap_gap_max},
    {"agent_start", &m.agent_start},
    {"breaker_operator_reset", &m.breaker_operator_reset},
    {"baseline_reboot_window", &m.baseline_reboot_window}};
  const std::map<std::string, fix_odds*> fixes = {
    {"faulty_gpu_fix", &m.faulty_gpu_fix},
    {"hbm_fix", &m.hbm_fix},
    {"sram_fix", &m.sram_fix},
    {"gsp_fix", &m.gsp_fix},
    {"host_maintenance_fix", &m.host_maintenance_fix},
    {"other_host_fix", &m.other_host_fix}};
  const std::map<std::string, bool*> flags = {
    {"nvswitch_fabric", &m.nvswitch_fabric},
    {"link_downed_counter_events", &m.link_downed_counter_events}};
  try {
    const auto root = YAML::Load(yaml_text);
    if (root.IsNull())
      return base;
    if (!root.IsMap())
      return failure{"model", "expected a mapping of fleet_model fields"};
    for (const auto& item : root) {
      if (!item.first.IsScalar())
        return failure{"model", "keys must be field names"};
      const auto key = item.first.Scalar();
      const auto where = "model." + key;
      const auto& value = item.second;
      auto number = [&](double& out) -> status {
        if (!value.IsScalar() || !YAML::convert<double>::decode(value, out))
          return failure{where, "expected a number"};
        return ok();
      };
      if (auto n = numbers.find(key); n != numbers.end()) {
        if (auto st = number(*n->second); !st)
          return st.error();
      } else if (auto i = integers.find(key); i != integers.end()) {
        if (!value.IsScalar() || !YAML::convert<int>::decode(value, *i->second))
          return failure{where, "expected a whole number"};
      } else if (auto d = durations.find(key); d != durations.end()) {
        long long seconds = 0;
        if (!value.IsScalar() || !YAML::convert<long long>::decode(value, seconds))
          return failure{where, "expected whole seconds"};
        *d->second = std::chrono::seconds{seconds};
      } else if (auto f = fixes.find(key); f != fixes.end()) {
        if (!value.IsMap())
          return failure{where, "expected {reset: R, reboot: B, replace: P}"};
        fix_odds odds;
        for (const auto& share : value) {
          const auto name = share.first.IsScalar() ? share.first.Scalar() : "";
          double* slot = name == "reset"     ? &odds.reset
                         : name == "reboot"  ? &odds.reboot
                         : name == "replace" ? &odds.replace
                                             : nullptr;
          double parsed = 0;
          if (slot == nullptr)
            return failure{where,
                           "unknown share '" + name + "' (reset, reboot, replace)"};
          if (!share.second.IsScalar()
              || !YAML::convert<double>::decode(share.second, parsed))
            return failure{where + "." + name, "expected a number"};
          *slot = parsed;
        }
        *f->second = odds;
      } else if (auto b = flags.find(key); b != flags.end()) {
        if (!value.IsScalar() || !YAML::convert<bool>::decode(value, *b->second))
          return failure{where, "expected true or false"};
      } else if (key == "gpu_product") {
        if (!value.IsScalar())
          return failure{where, "expected a string"};
        m.gpu_product = value.Scalar();
      } else {
        return failure{where, "unknown field"};
      }
    }
  } catch (const YAML::Exception& e) {
    return failure{"model", std::string("is not valid YAML: ") + e.what()};
  }
  return base;
}

expected<fleet_result> simulate_fleet(const fleet_options& options,
                                      const agent::xid_catalog& catalog) {
  if (auto valid = validate(options, catalog); !valid)
    return valid.error();
  const auto trace = make_trace(options);
  fleet_result result;
  result.trace = summarise(options, trace, catalog);
  {
    fleet_world world(options, trace, catalog, result.vigil);
    vigil_policy vigil(world);
    world.run(vigil);
  }
  {
    fleet_world world(options, trace, catalog, result.baseline);
    baseline_policy baseline(world);
    world.run(baseline);
  }
  return result;
}

nlohmann::json to_json(const fleet_result& result) {
  const auto& t = result.trace;
  nlohmann::json actions = nlohmann::json::object();
  for (const auto& [code, action] : t.xid_actions)
    actions[std::to_string(code)] = action;
  return {{"vigil", outcome_json(result.vigil)},
          {"baseline", outcome_json(result.baseline)},
          {"trace",
           {{"nodes", t.nodes},
            {"days", t.days},
            {"seed", t.seed},
            {"nodeDays", static_cast<std::int64_t>(t.nodes) * t.days},
            {"faults", t.faults},
            {"faultsByCategory", t.faults_by_category},
            {"hardwareFaults", t.hardware_faults},
            {"switchOutages", t.switch_outages},
            {"appXids", t.app_xids},
            {"nicFlaps", t.nic_flaps},
            {"xidActions", actions}}}};
}

std::string to_table(const fleet_result& result) {
  const auto& t = result.trace;
  const auto& v = result.vigil;
  const auto& b = result.baseline;
  std::string out;
  char line[160];
  std::snprintf(line, sizeof line,
                "fleet simulation: %d nodes x %d days (%lld node-days), seed %llu\n",
                t.nodes, t.days, static_cast<long long>(t.nodes) * t.days,
                static_cast<unsigned long long>(t.seed));
  out += line;
  out += "trace: " + std::to_string(t.faults) + " interruptions (";
  for (std::size_t i = 0; i < category_count; ++i)
    out += std::string(i ? ", " : "") + category_labels[i] + " "
           + std::to_string(t.faults_by_category.at(category_keys[i]));
  out += "), " + std::to_string(t.app_xids) + " application XIDs, "
         + std::to_string(t.nic_flaps) + " NIC flaps\n\n";
  std::snprintf(line, sizeof line, "%-26s %12s %20s\n", "", "vigil",
                "reboot every fault");
  out += line;
  auto hours = [&](const char* label, double a, double c) {
    std::snprintf(line, sizeof line, "%-26s %12.1f %20.1f\n", label, a, c);
    out += line;
  };
  auto count = [&](const char* label, int a, int c) {
    std::snprintf(line, sizeof line, "%-26s %12d %20d\n", label, a, c);
    out += line;
  };
  hours("GPU-hours lost", v.gpu_hours_lost, b.gpu_hours_lost);
  hours("  out of service", v.gpu_hours_out_of_service, b.gpu_hours_out_of_service);
  hours("  faulty, at work", v.gpu_hours_faulty_in_service,
        b.gpu_hours_faulty_in_service);
  count("GPU resets", v.remediations.reset, b.remediations.reset);
  count("reboots", v.remediations.reboot, b.remediations.reboot);
  count("replacements", v.remediations.replace, b.remediations.replace);
  count("contact support", v.remediations.contact_support,
        b.remediations.contact_support);
  count("false remediations", v.false_remediations, b.false_remediations);
  count("missed faults", v.missed_faults, b.missed_faults);
  count("breaker trips", v.breaker_trips, b.breaker_trips);
  return out;
}

} // namespace vigil::demo
