// The shared fixture of the control plane's actor tests under CAF's test
// coordinator: ingest → journal (a real SQLite journal) → fleet → node actor →
// patches applied to the API test server's object store through a gateway
// stand-in, and the breaker. Each test file defines its CAF_SUITE before it
// includes <caf/test/dsl.hpp> and this header; the helpers' out-of-line
// definitions are in control_fixture.cpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <caf/test/dsl.hpp>

#include <nlohmann/json.hpp>

#include "actors/control/breaker/breaker_actor.hpp"
#include "actors/control/drain/drain_resource.hpp"
#include "actors/control/fleet/fleet_actor.hpp"
#include "actors/control/ingest/ingest_actor.hpp"
#include "actors/control/remediation/remediation_machine.hpp"
#include "actors/control/remediation/remediation_resource.hpp"
#include "actors/gateway/kube_gateway_messages.hpp"
#include "actors/journal/journal_actor.hpp"
#include "actors/protocol/control_messages.hpp"
#include "runtime/actor_clock.hpp"
#include "runtime/sim/kube/kube_object_store.hpp"
#include "tests/support/flaky_journal_store.hpp"
#include "tests/support/fresh_directory.hpp"

namespace vigil::test {

using namespace caf;
using nlohmann::json;

// Stands in for the gateway: applies requests to an object store as the API
// test server does, and can fail the next requests with a given status.
struct fake_gateway_state {
  std::shared_ptr<kube::object_store> store;
  std::vector<kube::kube_request> seen;
  std::vector<long> fail_next; ///< statuses to answer with, in order
  static inline const char* name = "fake_gateway";
};

using fake_gateway_actor = stateful_actor<fake_gateway_state, kube_gateway_handle::base>;

/// Answers requests from `store`; has no watches (the tests hand the fleet
/// its watch events) and answers a watch with an error.
kube_gateway_handle::behavior_type
fake_gateway(fake_gateway_actor* self, std::shared_ptr<kube::object_store> store);

/// Two rules: a fatal GPU event taints and cordons, a fatal NIC event cordons.
control::quarantine_policy policy();

/// A fatal XID 79 on GPU `uuid` of `node`, or its recovery.
health_event xid(const std::string& node, const std::string& uuid, bool healthy = false);
/// An XID 48 that asks for a GPU reset (COMPONENT_RESET).
health_event reset_needed(const std::string& node, const std::string& uuid);
/// A fatal XID that asks for a reboot (RESTART_VM).
health_event reboot_needed(const std::string& node, const std::string& uuid);

// A running pod on `node`; `gpus` are its allocated GPUs (the devices
// annotation, seed 000 §3.1), and it requests as many nvidia.com/gpu.
json pod_object(const std::string& name, const std::string& node,
                std::vector<std::string> gpus = {}, json labels = json::object(),
                const std::string& owner_kind = "");

/// Port 1 of mlx5_0 on `node` down (fatal, RESTART_VM) or up again; `n`
/// tells the events of a sequence apart.
health_event port_state(const std::string& node, bool up, int n);

/// A GPU Node (an H100) with no taints.
json node_object(const std::string& name);

struct control_fixture : test_coordinator_fixture<> {
  std::shared_ptr<kube::object_store> store = [] {
    auto s = std::make_shared<kube::object_store>();
    s->create_system_namespaces();
    return s;
  }();
  std::shared_ptr<const vigil::clock> time =
    std::make_shared<caf_clock>(sys.clock(), from_unix(1'800'000'000, 0));
  std::string journal_path = vigil::test::fresh_directory() + "/journal.db";
  /// A real SQLite journal that can fail its appends (a database outage).
  std::shared_ptr<vigil::test::flaky_journal_store> journal_db = [this] {
    auto s = std::make_shared<vigil::test::flaky_journal_store>(
      make_sqlite_journal_store(journal_path));
    CAF_REQUIRE(s->open().has_value());
    return s;
  }();
  journal_writer_handle writer =
    sys.spawn(journal_writer, std::shared_ptr<journal_store>(journal_db));
  journal_handle journal = sys.spawn(vigil::journal, journal_config{}, writer);
  kube_gateway_handle gateway = sys.spawn(fake_gateway, store);
  breaker_handle breaker;
  actor fleet;
  actor ingest;
  std::shared_ptr<node_settings> settings = std::make_shared<node_settings>();
  bool elected = false;           ///< fleet and ingest wait for leadership
  ingest_settings ingest_options; ///< for the next start()
  std::vector<control::ingest_reply> replies;

  control_fixture() {
    settings->quarantine = policy();
    // Remediation has tests of its own; elsewhere the node stops at the drain.
    settings->remediation.enabled = false;
    // So has the validation after a fix; the other remediation tests end at the CR.
    settings->remediation.validation.after_reset = false;
    settings->remediation.validation.after_reboot = false;
    for (auto [plural, kind] :
         {std::pair<const char*, const char*>{"gpuresets", "GPUReset"},
          {"rebootnodes", "RebootNode"},
          {"terminatenodes", "TerminateNode"}})
      store->register_type(
        {"vigil.dev", "v1alpha1", plural, kind, false, true, {}, true});
    for (int i = 1; i <= 4; ++i)
      CAF_REQUIRE(
        store->create(*nodes(), "", node_object("node-" + std::to_string(i))).ok());
  }

  // The coordinator's shutdown fires every pending timer until none is left:
  // actors with periodic timers (a CR poll) must be gone first.
  ~control_fixture() {
    for (auto* a : {&fleet, &ingest})
      if (*a)
        anon_send_exit(*a, exit_reason::user_shutdown);
    if (breaker)
      anon_send_exit(breaker, exit_reason::user_shutdown);
    run();
  }

  const kube::resource_type* nodes() { return store->find_type("", "v1", "nodes"); }
  const kube::resource_type* pods() { return store->find_type("", "v1", "pods"); }
  const kube::resource_type* budgets() {
    return store->find_type("policy", "v1", "poddisruptionbudgets");
  }

  void add_pod(const std::string& ns, json pod) {
    CAF_REQUIRE(store->create(*pods(), ns, std::move(pod)).ok());
  }
  // A budget over app=<app> pods in `ns` needing `min_available` of them.
  void add_budget(const std::string& ns, const std::string& app, int min_available) {
    json budget = {{"metadata", {{"name", app + "-pdb"}}},
                   {"spec",
                    {{"selector", {{"matchLabels", {{"app", app}}}}},
                     {"minAvailable", min_available}}}};
    CAF_REQUIRE(store->create(*budgets(), ns, std::move(budget)).ok());
  }
  bool terminating(const std::string& ns, const std::string& name) {
    auto pod = store->get(*pods(), ns, name);
    return !pod.ok() || (*pod.value)["metadata"].contains("deletionTimestamp");
  }
  // The kubelet's part: pods in their grace period go for good.
  void kubelet_finishes() {
    for (const auto& [ns, name] : store->terminating_pods())
      store->finish_pod_deletion(ns, name);
  }
  /// Timers fire only when a test lets time pass (advance): for tests with
  /// periodic timers (a CR poll, the janitor's passes), which would make
  /// sched.run() go on for ever.
  bool jobs_only = false;
  void run() {
    if (!jobs_only) {
      sched.run();
      return;
    }
    while (sched.try_run_once()) {
    }
  }
  // Lets `d` of virtual time pass: drains re-list pods, retries come due.
  void advance(timespan d) {
    sched.advance_time(d);
    run();
  }
  /// The body of the first "started" drain row.
  json drain_started_row() {
    auto rows = journal_db->read({});
    CAF_REQUIRE(rows.has_value());
    for (const auto& r : *rows)
      if (r.kind == control::drain_row) {
        auto body = json::parse(r.body);
        if (body["phase"] == "started")
          return body;
      }
    CAF_FAIL("no drain started");
    return {};
  }

  std::size_t drain_rows(const std::string& phase) {
    auto rows = journal_db->read({});
    CAF_REQUIRE(rows.has_value());
    return static_cast<std::size_t>(
      std::count_if(rows->begin(), rows->end(), [&](const journal_record& r) {
        return r.kind == control::drain_row && json::parse(r.body)["phase"] == phase;
      }));
  }
  json node_summary(const std::string& name) {
    return json::parse(ask(fleet, summary_atom::value, name));
  }

  // The janitor's part of the cluster: its namespace and a GPUReset to do.
  void janitor_namespace() {
    const auto* namespaces = store->find_type("", "v1", "namespaces");
    if (!store->get(*namespaces, "", "vigil-system").ok())
      store->create(*namespaces, "", {{"metadata", {{"name", "vigil-system"}}}});
  }
  void add_gpu_reset(const std::string& name, const std::string& node,
                     const std::string& uuid) {
    janitor_namespace();
    json cr = {{"apiVersion", "vigil.dev/v1alpha1"},
               {"kind", "GPUReset"},
               {"metadata", {{"name", name}}},
               {"spec", {{"nodeName", node}, {"gpuUUIDs", {uuid}}}}};
    CAF_REQUIRE(
      store->create(*store->find_type("vigil.dev", "v1alpha1", "gpuresets"), "", cr)
        .ok());
  }
  void add_reboot_node(const std::string& name, const std::string& node) {
    janitor_namespace();
    json cr = {{"apiVersion", "vigil.dev/v1alpha1"},
               {"kind", "RebootNode"},
               {"metadata", {{"name", name}}},
               {"spec", {{"nodeName", node}}}};
    CAF_REQUIRE(
      store->create(*store->find_type("vigil.dev", "v1alpha1", "rebootnodes"), "", cr)
        .ok());
  }
  // The kubelet's part: `node` reports boot ID `id`, Ready or not.
  void boot(const std::string& node, const std::string& id, const std::string& ready) {
    CAF_REQUIRE(
      store
        ->patch(*nodes(), "", node,
                json{{"status",
                      {{"nodeInfo", {{"bootID", id}}},
                       {"conditions", {{{"type", "Ready"}, {"status", ready}}}}}}},
                kube::patch_type::merge, true)
        .ok());
  }
  // The Job controller's part: the Job's status becomes `status`.
  void job_status(const std::string& name, json status) {
    CAF_REQUIRE(store
                  ->patch(*store->find_type("batch", "v1", "jobs"), "vigil-system", name,
                          json{{"status", std::move(status)}}, kube::patch_type::merge,
                          true)
                  .ok());
  }

  // The maintenance CRs of one kind ("gpuresets", "rebootnodes"; an
  // operator's own kind in its group and version).
  std::vector<json> crs(const std::string& plural, const std::string& group = "vigil.dev",
                        const std::string& version = "v1alpha1") {
    auto list = store->list(*store->find_type(group, version, plural), "", {});
    CAF_REQUIRE(list.ok());
    return (*list.value)["items"].get<std::vector<json>>();
  }
  // The janitor's part, played by the test: the CR reaches `phase`.
  void cr_phase(const std::string& plural, const std::string& name,
                const std::string& phase, const std::string& failure = "") {
    json status = {{"phase", phase}};
    if (!failure.empty())
      status["failureReason"] = failure;
    cr_status("vigil.dev", "v1alpha1", plural, name, std::move(status));
  }
  // Any CR's controller, played by the test: its status becomes `status`.
  void cr_status(const std::string& group, const std::string& version,
                 const std::string& plural, const std::string& name, json status) {
    CAF_REQUIRE(store
                  ->patch(*store->find_type(group, version, plural), "", name,
                          json{{"status", std::move(status)}}, kube::patch_type::merge,
                          true)
                  .ok());
  }
  /// How many Kubernetes Events with this reason were posted about `node`.
  std::size_t events_posted(const std::string& reason, const std::string& node = "") {
    auto events = store->list(*store->find_type("", "v1", "events"), "default", {});
    CAF_REQUIRE(events.ok());
    std::size_t n = 0;
    for (const auto& ev : (*events.value)["items"])
      n += ev.value("reason", "") == reason
           && (node.empty() || ev["involvedObject"].value("name", "") == node);
    return n;
  }
  std::vector<std::string> remediation_phases() {
    auto rows = journal_db->read({});
    CAF_REQUIRE(rows.has_value());
    std::vector<std::string> out;
    for (const auto& r : *rows)
      if (r.kind == control::remediation_row) {
        auto body = json::parse(r.body);
        out.push_back(body["phase"].get<std::string>() + " "
                      + body["group"].get<std::string>());
      }
    return out;
  }
  std::string remediation_annotation(const std::string& name) {
    auto n = node(name);
    auto a = n["metadata"].value("annotations", json::object());
    return a.value(std::string{control::remediation_state_annotation}, "");
  }

  void start(control::breaker_config breaker_config = {}) {
    breaker = sys.spawn(vigil::breaker, breaker_config, journal, time);
    fleet = sys.spawn(vigil::fleet, std::shared_ptr<const node_settings>(settings),
                      gateway, journal, breaker, time, false, elected);
    ingest_settings options = ingest_options;
    options.await_leadership = elected;
    ingest = sys.spawn(vigil::ingest, options, journal, fleet, time);
    run();
    list_nodes();
  }

  // A new control plane over the same journal and cluster (a process restart).
  void restart(control::breaker_config breaker_config = {}) {
    anon_send_exit(fleet, exit_reason::user_shutdown);
    anon_send_exit(breaker, exit_reason::user_shutdown);
    anon_send_exit(ingest, exit_reason::user_shutdown);
    run();
    start(breaker_config);
  }

  /// The ingest actor's figures (stats_atom).
  json ingest_figures() {
    self->send(ingest, stats_atom::value);
    run();
    json figures;
    self->receive([&](const std::string& s) { figures = json::parse(s); });
    return figures;
  }
  /// The journal actor's figures.
  journal_stats journal_figures() {
    self->send(journal, stats_atom::value);
    run();
    journal_stats figures;
    self->receive([&](const journal_stats& s) { figures = s; });
    return figures;
  }

  // What the Node watch delivers first: the whole list.
  void list_nodes() {
    auto list = store->list(*nodes(), "", {});
    CAF_REQUIRE(list.ok());
    self->send(fleet, kube_watch_event{1, "LISTED",
                                       std::make_shared<const json>(*list.value), ""});
    run();
  }

  void post(std::vector<health_event> events) {
    ingest_request request;
    std::size_t line = 0;
    for (auto& e : events)
      request.items.push_back({++line, std::move(e), {}});
    request.reply = [this](control::ingest_reply r) { replies.push_back(std::move(r)); };
    self->send(ingest, ingest_atom::value, std::move(request));
    run();
  }

  json node(const std::string& name) { return *store->get(*nodes(), "", name).value; }
  bool cordoned(const std::string& name) {
    return node(name)["spec"].value("unschedulable", false);
  }
  /// The status of the node's condition of `type`; "" when it has none.
  std::string condition_status(const std::string& name, const std::string& type) {
    auto n = node(name);
    for (const auto& c :
         n.value("status", json::object()).value("conditions", json::array()))
      if (c.value("type", "") == type)
        return c.value("status", "");
    return "";
  }
  /// The effect of the node's taint `key`; "" when it has none.
  std::string taint_effect_of(const std::string& name, const std::string& key) {
    auto n = node(name);
    for (const auto& t : n["spec"].value("taints", json::array()))
      if (t.value("key", "") == key)
        return t.value("effect", "");
    return "";
  }
  std::size_t journal_rows(const std::string& kind) {
    auto rows = journal_db->read({});
    CAF_REQUIRE(rows.has_value());
    return static_cast<std::size_t>(
      std::count_if(rows->begin(), rows->end(),
                    [&](const journal_record& r) { return r.kind == kind; }));
  }
  std::size_t requests(const std::string& verb) {
    auto& seen = deref<fake_gateway_actor>(gateway).state.seen;
    return static_cast<std::size_t>(
      std::count_if(seen.begin(), seen.end(),
                    [&](const kube::kube_request& r) { return r.verb == verb; }));
  }
  /// Requests whose path contains `part`.
  std::size_t requests_to(const std::string& part) {
    auto& seen = deref<fake_gateway_actor>(gateway).state.seen;
    return static_cast<std::size_t>(
      std::count_if(seen.begin(), seen.end(), [&](const kube::kube_request& r) {
        return r.path.find(part) != std::string::npos;
      }));
  }
  // Asks an actor and runs the scheduler until it answered with a string.
  template <class Handle, class... Ts>
  std::string ask(const Handle& whom, Ts... xs) {
    self->send(whom, xs...);
    run();
    std::string out;
    self->receive([&](const std::string& s) { out = s; },
                  [](const error& err) { CAF_FAIL("no answer: " << to_string(err)); });
    return out;
  }
};

} // namespace vigil::test
