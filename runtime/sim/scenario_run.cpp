#include "runtime/sim/scenario_run.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <ostream>

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <spdlog/sinks/base_sink.h>

#include "actors/agent/xid/xid_catalog.hpp"
#include "actors/control/node/node_actor.hpp"
#include "actors/control/node/node_resource.hpp"
#include "messages/json_path.hpp"
#include "runtime/actor_clock.hpp"
#include "runtime/control_plane.hpp"
#include "runtime/logging.hpp"
#include "runtime/sim/cluster_simulator.hpp"
#include "runtime/sim/kube/kube_client_in_process.hpp"
#include "runtime/sim/simulated_cluster.hpp"

namespace vigil::demo {

namespace {

using json = nlohmann::json;

// The demo's clock starts here: the same timestamps in every run.
const wall_time demo_epoch = from_unix(1'795'420'800, 0); // 2026-11-23T08:00:00Z

std::string clock_text(std::chrono::nanoseconds since_start) {
  const auto s = std::chrono::duration_cast<std::chrono::seconds>(since_start).count();
  char text[32];
  std::snprintf(text, sizeof text, "+%02lld:%02lld:%02lld",
                static_cast<long long>(s / 3600), static_cast<long long>(s / 60 % 60),
                static_cast<long long>(s % 60));
  return text;
}

// The timeline: every component's log line, stamped with the demo's clock.
class timeline_sink final : public spdlog::sinks::base_sink<std::mutex> {
public:
  timeline_sink(std::ostream* out, std::function<std::string()> stamp)
    : out_(out), stamp_(std::move(stamp)) {}

protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (out_ == nullptr)
      return;
    *out_ << stamp_() << "  "
          << std::string(msg.logger_name.data(), msg.logger_name.size()) << ": "
          << std::string(msg.payload.data(), msg.payload.size()) << "\n";
  }
  void flush_() override {
    if (out_ != nullptr)
      out_->flush();
  }

private:
  std::ostream* out_;
  std::function<std::string()> stamp_;
};

// Runs actors and fires timers in order until virtual time `until`.
class virtual_time {
public:
  explicit virtual_time(caf::actor_system& system)
    : sched_(dynamic_cast<caf::scheduler::test_coordinator&>(system.scheduler())) {}

  steady_time now() const { return sched_.clock().now(); }

  void run_until(steady_time until) {
    for (;;) {
      while (sched_.try_run_once()) {
      }
      const auto& schedule = sched_.clock().schedule();
      if (schedule.empty() || schedule.begin()->first > until)
        break;
      sched_.clock().trigger_timeout();
    }
    if (sched_.clock().current_time < until)
      sched_.clock().current_time = until;
    while (sched_.try_run_once()) {
    }
  }

  void drain() {
    while (sched_.try_run_once()) {
    }
  }

private:
  caf::scheduler::test_coordinator& sched_;
};

cluster_view observe(const kube::object_store& store) {
  cluster_view view;
  for (auto [plural, kind] :
       {std::pair<const char*, const char*>{"gpuresets", "GPUReset"},
        {"rebootnodes", "RebootNode"},
        {"terminatenodes", "TerminateNode"}}) {
    const auto* type = store.find_type("vigil.dev", "v1alpha1", plural);
    auto listed = type ? store.list(*type, "", {}) : kube::store_result{};
    if (!listed.ok())
      continue;
    for (const auto& cr : (*listed.value)["items"]) {
      remediation_view r;
      r.kind = kind;
      r.name = json_text(cr, {"metadata", "name"});
      r.node = json_text(cr, {"spec", "nodeName"});
      if (const json* gpus = json_at(cr, {"spec", "gpuUUIDs"});
          gpus && gpus->is_array() && !gpus->empty() && (*gpus)[0].is_string())
        r.gpu_uuid = (*gpus)[0].get<std::string>();
      r.outcome = json_text(cr, {"status", "phase"});
      if (r.outcome.empty())
        r.outcome = "Pending";
      view.remediations.push_back(r);
    }
  }
  auto nodes = store.list(*store.find_type("", "v1", "nodes"), "", {});
  if (nodes.ok())
    for (const auto& n : (*nodes.value)["items"]) {
      const json* unschedulable = json_at(n, {"spec", "unschedulable"});
      json conditions = json::array();
      if (const json* c = json_at(n, {"status", "conditions"}); c && c->is_array())
        for (const auto& cond : *c)
          conditions.push_back({{"type", cond.value("type", "")},
                                {"status", cond.value("status", "")},
                                {"reason", cond.value("reason", "")}});
      view.nodes.push_back(
        {{"name", json_text(n, {"metadata", "name"})},
         {"cordoned", unschedulable != nullptr && unschedulable->is_boolean()
                        && unschedulable->get<bool>()},
         {"cordonedByVigil",
          json_at(n, {"metadata", "annotations", control::node_annotation::cordoned})
            != nullptr},
         {"conditions", conditions}});
    }
  return view;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items)
    out += (out.empty() ? "" : ", ") + i;
  return out.empty() ? "none" : out;
}

std::string describe(const remediation_view& r) {
  return r.kind + " " + r.node + (r.gpu_uuid.empty() ? "" : " " + r.gpu_uuid) + " "
         + r.outcome;
}

// The scenario's actions of one step, at their times: a flap is its
// down/up transitions.
std::vector<std::pair<std::chrono::seconds, caf::message>>
timed_actions(const scenario_step& step) {
  std::vector<std::pair<std::chrono::seconds, caf::message>> timed;
  for (const auto& a : step.actions)
    for (int node : a.nodes) {
      switch (a.what) {
        case scenario_action::kind::xid:
          timed.emplace_back(a.at,
                             caf::make_message(xid_atom::value, node, a.gpu, a.codes));
          break;
        case scenario_action::kind::fail_reset:
          timed.emplace_back(a.at, caf::make_message(failreset_atom::value, node, a.gpu));
          break;
        case scenario_action::kind::fail_validation:
          timed.emplace_back(a.at, caf::make_message(failvalid_atom::value, node));
          break;
        case scenario_action::kind::nic_down:
        case scenario_action::kind::nic_up:
          timed.emplace_back(a.at,
                             caf::make_message(nic_atom::value, node, a.nic,
                                               a.what == scenario_action::kind::nic_up));
          break;
        case scenario_action::kind::nic_flap:
          for (int k = 0; k < 2 * a.times; ++k)
            timed.emplace_back(
              a.at + k * a.every,
              caf::make_message(nic_atom::value, node, a.nic, k % 2 == 1));
          break;
      }
    }
  std::stable_sort(timed.begin(), timed.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  return timed;
}

// What the journal says about one step: fabric incidents (an incident is
// journaled again each time it grows: counted once) and the nodes vigil
// cordoned at any moment of it.
void read_step_rows(journal_store& journal, std::int64_t after_seq,
                    step_observation& seen) {
  journal_query rows;
  rows.after_seq = after_seq;
  rows.limit = 1000000;
  std::set<std::string> incidents;
  auto read = journal.read(rows);
  if (!read)
    return;
  for (const auto& row : *read) {
    auto body = json::parse(row.body, nullptr, false);
    if (!body.is_object())
      continue;
    if (row.kind == fabric_row)
      incidents.insert(body.value("opened", row.body));
    if (row.kind == quarantine_row && body.value("cordon", false))
      seen.cordoned_during.insert(row.node);
  }
  seen.fabric_incidents = static_cast<int>(incidents.size());
}

// One run of a scenario on a virtual clock: the cluster, the control plane
// and the simulator on CAF's test coordinator. Members are declared so that
// the store outlives the actor system; the destructor stops every actor and
// drives the coordinator until they are gone, whichever way the run ends.
class virtual_run {
public:
  virtual_run(const vigil_config& base, const scenario& plan, const demo_options& options,
              std::ostream& out)
    : plan_(plan), system_(testing(cfg_)), driver_(system_), start_(driver_.now()),
      time_(std::make_shared<caf_clock>(system_.clock(), demo_epoch)) {
    config_ = base;
    config_.control.leader_election = false; // one replica
    config_.control.dry_run = false;
    config_.janitor.in_process = true;
    system_.await_actors_before_shutdown(false); // the destructor has stopped them
    redirect_logs(
      std::make_shared<timeline_sink>(options.json_output ? nullptr : &out, [this] {
        return clock_text(driver_.now() - start_);
      }));
  }

  ~virtual_run() {
    redirect_logs(nullptr);
    if (simulator_)
      caf::anon_send_exit(simulator_, caf::exit_reason::user_shutdown);
    for (const auto& [name, actor] : actors_)
      caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
    driver_.drain();
    if (journal_)
      journal_->close();
  }

  /// Opens the journal (refusing one that holds rows: the demo starts from
  /// a fresh cluster), populates the cluster, spawns everything.
  status start(const std::string& journal_url) {
    auto store = make_journal_store(journal_url);
    if (!store)
      return store.error();
    if (auto opened = (*store)->open(); !opened)
      return opened.error();
    journal_ = std::move(*store);
    if (auto last = journal_->last_seq(); last && *last > 0)
      return failure{"--journal",
                     journal_->describe()
                       + " already holds rows: the demo needs an empty journal"};
    auto catalog = agent::xid_catalog::load(agent::xid_catalog::default_dir());
    if (!catalog)
      return catalog.error();
    config_.journal.url = journal_url;
    simulator_settings sim;
    sim.spec.nodes = plan_.nodes;
    sim.seed = plan_.seed;
    sim.reset_min = plan_.reset_job.low;
    sim.reset_max = plan_.reset_job.high;
    sim.reboot_min = plan_.reboot_job.low;
    sim.reboot_max = plan_.reboot_job.high;
    auto time = time_;
    api_.with_store([&](kube::object_store& s) {
      s.set_clock([time] { return unix_seconds(time->wall_now()); });
      populate(s, sim.spec);
    });
    control_plane_options plane_options;
    plane_options.own_threads = false;
    plane_options.memory_keeper = false;
    plane_options.replica_identity = "vigil-demo";
    auto plane = spawn_control_plane(system_, config_, journal_, api_.client(), time_,
                                     plane_options);
    if (!plane)
      return plane.error();
    actors_ = plane->named;
    simulator_ = system_.spawn(
      cluster_simulator, sim,
      store_access([this](const std::function<void(kube::object_store&)>& f) {
        api_.with_store(f);
      }),
      plane->actors.ingest, *catalog, std::shared_ptr<const clock>(time_), record_);
    // The fleet lists the Nodes and replays the (empty) journal.
    driver_.run_until(driver_.now() + std::chrono::seconds{30});
    if (!record_->failure.empty())
      return failure{"simulator", record_->failure};
    return ok();
  }

  /// Plays one step and checks it.
  step_result play(const scenario_step& step) {
    const auto step_start = driver_.now();
    const auto evictions_before = record_->evictions.size();
    const auto last = journal_->last_seq();
    const std::int64_t seq_before = last ? *last : 0;
    std::set<std::string> crs_before;
    for (const auto& r : observe(api_.store()).remediations)
      crs_before.insert(r.kind + "/" + r.name);
    for (const auto& [when, message] : timed_actions(step)) {
      driver_.run_until(step_start + when);
      caf::anon_send(simulator_, message);
    }
    driver_.run_until(step_start + step.run_for);

    step_observation seen;
    for (auto k = evictions_before; k < record_->evictions.size(); ++k)
      seen.evicted.push_back(record_->evictions[k].ns + "/" + record_->evictions[k].pod);
    seen.after = observe(api_.store());
    for (const auto& r : seen.after.remediations)
      if (crs_before.count(r.kind + "/" + r.name) == 0)
        seen.new_remediations.push_back(r);
    read_step_rows(*journal_, seq_before, seen);
    return check_step(step, seen);
  }

  json summary(const json& steps, bool all_passed) const {
    const auto final_view = observe(api_.store());
    json out = {
      {"scenario", plan_.name},
      {"passed", all_passed},
      {"virtualSeconds",
       std::chrono::duration_cast<std::chrono::seconds>(driver_.now() - start_).count()},
      {"journal", journal_->describe()}, // never a password
      {"steps", steps},
      {"remediations", json::array()},
      {"evictions", json::array()},
      {"nodes", final_view.nodes},
      {"events",
       {{"sent", record_->events_sent}, {"acknowledged", record_->events_acknowledged}}}};
    for (const auto& r : final_view.remediations)
      out["remediations"].push_back({{"kind", r.kind},
                                     {"name", r.name},
                                     {"node", r.node},
                                     {"gpuUUID", r.gpu_uuid},
                                     {"outcome", r.outcome}});
    for (const auto& e : record_->evictions)
      out["evictions"].push_back({{"namespace", e.ns}, {"pod", e.pod}, {"node", e.node}});
    return out;
  }

private:
  static caf::actor_system_config& testing(caf::actor_system_config& cfg) {
    cfg.set("scheduler.policy", caf::atom("testing"));
    cfg.set("logger.verbosity", caf::atom("quiet"));
    return cfg;
  }

  const scenario& plan_;
  vigil_config config_;
  std::shared_ptr<journal_store> journal_;
  kube::in_process_api api_; ///< before system_: the simulator uses it to the end
  caf::actor_system_config cfg_;
  caf::actor_system system_;
  virtual_time driver_;
  steady_time start_;
  std::shared_ptr<caf_clock> time_;
  std::shared_ptr<simulation_record> record_ = std::make_shared<simulation_record>();
  std::vector<std::pair<std::string, caf::actor>> actors_;
  caf::actor simulator_;
};

// The scenario on a virtual clock. Returns the summary JSON.
} // namespace

expected<json> run_virtual(const vigil_config& base, const scenario& plan,
                           const demo_options& options, std::ostream& out) {
  std::string journal_url = options.journal_url;
  if (journal_url.empty()) {
    std::string dir = (std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp");
    dir += "/vigil-demo-XXXXXX";
    if (mkdtemp(dir.data()) == nullptr)
      return failure{"--journal", "no temporary directory for the SQLite journal"};
    journal_url = "sqlite:" + dir + "/journal.db";
  }
  virtual_run run(base, plan, options, out);
  if (auto started = run.start(journal_url); !started)
    return started.error();
  json steps = json::array();
  bool all_passed = true;
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    const auto& step = plan.steps[i];
    if (!options.json_output)
      out << "\n== step " << (i + 1) << ": " << step.name << "\n";
    auto result = run.play(step);
    all_passed = all_passed && result.passed;
    if (!options.json_output)
      out << "== " << (result.passed ? "PASSED" : "FAILED") << ": " << result.detail
          << "\n";
    steps.push_back(
      {{"name", result.name}, {"passed", result.passed}, {"detail", result.detail}});
  }
  return run.summary(steps, all_passed);
}

step_result check_step(const scenario_step& step, const step_observation& seen) {
  step_result result;
  result.name = step.name;
  std::vector<std::string> crs;
  for (const auto& r : seen.new_remediations)
    crs.push_back(describe(r));
  result.detail = "evicted: " + join(seen.evicted) + "; remediations: " + join(crs);
  auto fail = [&](const std::string& why) {
    result.passed = false;
    result.detail += "; EXPECTED " + why;
  };
  const auto& e = step.expect;
  if (e.evicted) {
    auto want = *e.evicted;
    auto got = seen.evicted;
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    if (want != got)
      fail("evicted: " + join(want));
  }
  if (e.remediations) {
    std::vector<bool> used(seen.new_remediations.size(), false);
    for (const auto& want : *e.remediations) {
      const auto node = node_name(want.node);
      const auto gpu = want.gpu ? gpu_uuid(want.node, *want.gpu) : std::string();
      bool found = false;
      for (std::size_t i = 0; i < seen.new_remediations.size() && !found; ++i) {
        const auto& r = seen.new_remediations[i];
        if (!used[i] && r.kind == want.kind && r.node == node
            && (gpu.empty() || r.gpu_uuid == gpu)
            && (want.outcome.empty() || r.outcome == want.outcome))
          used[i] = found = true;
      }
      if (!found)
        fail(want.kind + " on " + node + (gpu.empty() ? "" : " " + gpu)
             + (want.outcome.empty() ? "" : " ending " + want.outcome));
    }
    if (std::count(used.begin(), used.end(), false) > 0)
      fail(std::to_string(e.remediations->size()) + " remediation(s), saw "
           + std::to_string(seen.new_remediations.size()));
  }
  for (const auto& [node, want] : e.cordoned) {
    std::optional<bool> cordoned;
    for (const auto& n : seen.after.nodes)
      if (n["name"] == node_name(node))
        cordoned = n["cordoned"].get<bool>();
    if (!cordoned)
      fail(node_name(node) + " to exist");
    else if (*cordoned != want)
      fail(node_name(node) + (want ? " cordoned" : " not cordoned"));
  }
  if (e.quarantined) {
    int n = 0;
    for (const auto& node : seen.after.nodes)
      n += node["cordonedByVigil"].get<bool>() ? 1 : 0;
    if (n != *e.quarantined)
      fail(std::to_string(*e.quarantined) + " node(s) quarantined by vigil, saw "
           + std::to_string(n));
  }
  if (e.cordoned_during) {
    std::set<std::string> want;
    for (int n : *e.cordoned_during)
      want.insert(node_name(n));
    if (want != seen.cordoned_during) {
      std::vector<std::string> names(seen.cordoned_during.begin(),
                                     seen.cordoned_during.end());
      fail("cordoned during the step: " + join({want.begin(), want.end()}) + ", saw "
           + join(names));
    }
  }
  if (e.fabric_incidents && *e.fabric_incidents != seen.fabric_incidents)
    fail(std::to_string(*e.fabric_incidents) + " fabric incident(s), saw "
         + std::to_string(seen.fabric_incidents));
  return result;
}

} // namespace vigil::demo
