// The control plane's actors under CAF's test coordinator: ingest → journal
// (a real SQLite journal) → fleet → node actor → patches applied to the API
// test server's object store through a gateway stand-in, and the breaker.
#define CAF_SUITE control
#include <caf/test/dsl.hpp>

#include <nlohmann/json.hpp>

#include "actors/control/breaker/breaker_actor.hpp"
#include "actors/control/drain/drain_resource.hpp"
#include "actors/control/fleet/fleet_actor.hpp"
#include "actors/control/ingest/ingest_actor.hpp"
#include "actors/control/leader/leader_actor.hpp"
#include "actors/gateway/kube_gateway_messages.hpp"
#include "actors/journal/journal_actor.hpp"
#include "messages/control_messages.hpp"
#include "runtime/actor_clock.hpp"
#include "runtime/kube/kube_object_store.hpp"
#include "tests/support/fresh_directory.hpp"

using namespace caf;
using namespace vigil;
using nlohmann::json;

namespace {

const control::taint gpu_taint{"vigil.dev/gpu-fault", "true",
                               control::taint_effect::no_schedule};

// Stands in for the gateway: applies requests to an object store as the API
// test server does, and can fail the next requests with a given status.
struct fake_gateway_state {
  std::shared_ptr<kube::object_store> store;
  std::vector<kube::kube_request> seen;
  std::vector<long> fail_next; ///< statuses to answer with, in order
  static inline const char* name = "fake_gateway";
};

kube::kube_result to_result(const kube::store_result& r, long ok_status) {
  if (r.ok())
    return kube::kube_response{ok_status, r.value->dump()};
  kube::kube_error e;
  e.status = r.error.code;
  e.reason = r.error.reason;
  e.message = r.error.message;
  return e;
}

// "spec.nodeName%3Dnode-1" → "spec.nodeName=node-1": the escapes vigil sends.
std::string unescape(std::string text) {
  for (auto [from, to] : {std::pair<const char*, const char*>{"%3D", "="}, {"%2C", ","}})
    for (auto at = text.find(from); at != std::string::npos; at = text.find(from))
      text.replace(at, 3, to);
  return text;
}

// GET /api/v1/pods?fieldSelector=…, POST …/pods/<name>/eviction, DELETE …/pods/<name>.
kube::kube_result pod_request(kube::object_store& store,
                              const kube::kube_request& request) {
  const auto* pods = store.find_type("", "v1", "pods");
  if (request.verb == "GET" && request.path == "/api/v1/pods") {
    kube::list_options options;
    const std::string field = "fieldSelector=";
    if (request.query.rfind(field, 0) == 0)
      options.field_selector = unescape(request.query.substr(field.size()));
    return to_result(store.list(*pods, "", options), 200);
  }
  // /api/v1/namespaces/<ns>/pods/<name>[/eviction]
  std::vector<std::string> parts;
  std::string part;
  for (char c : request.path.substr(1) + "/")
    if (c == '/') {
      parts.push_back(part);
      part.clear();
    } else {
      part += c;
    }
  if (parts.size() >= 6 && parts[2] == "namespaces" && parts[4] == "pods") {
    if (request.verb == "POST" && parts.size() == 7 && parts[6] == "eviction")
      return to_result(store.evict(parts[3], parts[5], json::parse(request.body)), 201);
    if (request.verb == "DELETE" && parts.size() == 6)
      return to_result(store.remove(*pods, parts[3], parts[5], {}), 200);
  }
  // /apis/coordination.k8s.io/v1/namespaces/<ns>/leases[/<name>]
  if (parts.size() >= 6 && parts[0] == "apis" && parts[1] == "coordination.k8s.io"
      && parts[5] == "leases") {
    const auto* leases = store.find_type("coordination.k8s.io", "v1", "leases");
    if (request.verb == "POST")
      return to_result(store.create(*leases, parts[4], json::parse(request.body)), 201);
    if (request.verb == "GET" && parts.size() == 7)
      return to_result(store.get(*leases, parts[4], parts[6]), 200);
    if (request.verb == "PUT" && parts.size() == 7)
      return to_result(
        store.update(*leases, parts[4], parts[6], json::parse(request.body), false), 200);
  }
  kube::kube_error e;
  e.status = 404;
  e.reason = "NotFound";
  return e;
}

behavior fake_gateway(stateful_actor<fake_gateway_state>* self,
                      std::shared_ptr<kube::object_store> store) {
  self->state.store = std::move(store);
  return {
    [=](const kube::kube_request& request) -> kube::kube_result {
      auto& st = self->state;
      st.seen.push_back(request);
      if (!st.fail_next.empty()) {
        kube::kube_error e;
        e.status = st.fail_next.front();
        e.reason = "Injected";
        st.fail_next.erase(st.fail_next.begin());
        return e;
      }
      const auto* nodes = st.store->find_type("", "v1", "nodes");
      const auto* events = st.store->find_type("", "v1", "events");
      const std::string node_prefix = "/api/v1/nodes/";
      if (request.path.rfind(node_prefix, 0) == 0) {
        auto rest = request.path.substr(node_prefix.size());
        bool status = false;
        if (auto slash = rest.find('/'); slash != std::string::npos) {
          status = rest.substr(slash + 1) == "status";
          rest = rest.substr(0, slash);
        }
        if (request.verb == "GET")
          return to_result(st.store->get(*nodes, "", rest), 200);
        auto kind = request.content_type == kube::content_type::merge_patch
                      ? kube::patch_type::merge
                      : kube::patch_type::strategic_merge;
        return to_result(
          st.store->patch(*nodes, "", rest, json::parse(request.body), kind, status),
          200);
      }
      if (request.verb == "POST" && request.path.find("/events") != std::string::npos)
        return to_result(st.store->create(*events, "default", json::parse(request.body)),
                         201);
      return pod_request(*st.store, request);
    },
  };
}

control::quarantine_policy policy() {
  control::quarantine_policy p;
  control::quarantine_rule r;
  r.name = "fatal-gpu";
  r.match.component_classes = {"GPU"};
  r.match.is_fatal = true;
  r.taints = {gpu_taint};
  control::quarantine_rule nic;
  nic.name = "fatal-nic";
  nic.match.component_classes = {"NIC"};
  nic.match.is_fatal = true;
  p.rules = {r, nic};
  return p;
}

health_event xid(const std::string& node, const std::string& uuid, bool healthy = false) {
  health_event e;
  e.id = node + "-" + uuid + (healthy ? "-recovered" : "-79");
  e.agent = "xid-monitor";
  e.component_class = "GPU";
  e.check_name = "SysLogsXIDError";
  e.is_fatal = !healthy;
  e.is_healthy = healthy;
  e.error_codes = {"79"};
  e.entities = {{"GPU_UUID", uuid}};
  e.node_name = node;
  return e;
}

health_event reset_needed(const std::string& node, const std::string& uuid) {
  auto e = xid(node, uuid);
  e.id = node + "-" + uuid + "-48";
  e.error_codes = {"48"};
  e.action = recommended_action::component_reset;
  return e;
}

health_event reboot_needed(const std::string& node, const std::string& uuid) {
  auto e = xid(node, uuid);
  e.action = recommended_action::restart_vm;
  return e;
}

// A running pod on `node`; `gpus` are its allocated GPUs (the devices
// annotation, seed 000 §3.1), and it requests as many nvidia.com/gpu.
json pod_object(const std::string& name, const std::string& node,
                std::vector<std::string> gpus = {}, json labels = json::object(),
                const std::string& owner_kind = "") {
  json pod = {
    {"metadata", {{"name", name}, {"labels", std::move(labels)}}},
    {"spec",
     {{"nodeName", node}, {"containers", {{{"name", "main"}, {"image", "trainer"}}}}}},
    {"status",
     {{"phase", "Running"}, {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
  if (!gpus.empty()) {
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] =
      std::to_string(gpus.size());
    json devices = {
      {"devices", {{{"resourceName", "nvidia.com/gpu"}, {"deviceIds", gpus}}}}};
    pod["metadata"]["annotations"][control::gpu_devices_annotation] = devices.dump();
  }
  if (!owner_kind.empty())
    pod["metadata"]["ownerReferences"] = {{{"apiVersion", "apps/v1"},
                                           {"kind", owner_kind},
                                           {"name", "owner"},
                                           {"uid", "owner-uid"},
                                           {"controller", true}}};
  return pod;
}

health_event port_state(const std::string& node, bool up, int n) {
  health_event e;
  e.id = node + "-mlx5_0-1-" + (up ? "up-" : "down-") + std::to_string(n);
  e.agent = "nic-monitor";
  e.component_class = "NIC";
  e.check_name = "InfiniBandStateCheck";
  e.is_fatal = !up;
  e.is_healthy = up;
  e.action = up ? recommended_action::none : recommended_action::restart_vm;
  e.entities = {{"NIC", "mlx5_0"}, {"NICPort", "1"}};
  e.node_name = node;
  return e;
}

json node_object(const std::string& name) {
  return {
    {"apiVersion", "v1"},
    {"kind", "Node"},
    {"metadata", {{"name", name}, {"labels", {{"nvidia.com/gpu.present", "true"}}}}},
    {"spec", json::object()}};
}

struct fixture : test_coordinator_fixture<> {
  std::shared_ptr<kube::object_store> store = [] {
    auto s = std::make_shared<kube::object_store>();
    s->create_system_namespaces();
    return s;
  }();
  std::shared_ptr<const vigil::clock> time =
    std::make_shared<caf_clock>(sys.clock(), from_unix(1'800'000'000, 0));
  std::string journal_path = vigil::test::fresh_directory() + "/journal.db";
  std::shared_ptr<journal_store> journal_db = [this] {
    auto s = make_sqlite_journal_store(journal_path);
    CAF_REQUIRE(s->open().has_value());
    return std::shared_ptr<journal_store>(std::move(s));
  }();
  actor writer = sys.spawn(journal_writer, journal_db);
  actor journal = sys.spawn(vigil::journal, journal_config{}, writer);
  actor gateway = sys.spawn(fake_gateway, store);
  actor breaker;
  actor fleet;
  actor ingest;
  std::shared_ptr<node_settings> settings = std::make_shared<node_settings>();
  bool elected = false; ///< fleet and ingest wait for leadership
  std::vector<control::ingest_reply> replies;

  fixture() {
    settings->quarantine = policy();
    for (int i = 1; i <= 4; ++i)
      CAF_REQUIRE(
        store->create(*nodes(), "", node_object("node-" + std::to_string(i))).ok());
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
  // Lets `d` of virtual time pass: drains re-list pods, retries come due.
  void advance(timespan d) {
    sched.advance_time(d);
    sched.run();
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

  void start(control::breaker_config breaker_config = {}) {
    breaker = sys.spawn(vigil::breaker, breaker_config, journal, time);
    fleet = sys.spawn(vigil::fleet, std::shared_ptr<const node_settings>(settings),
                      gateway, journal, breaker, time, false, elected);
    ingest_settings ingest_options;
    ingest_options.await_leadership = elected;
    ingest = sys.spawn(vigil::ingest, ingest_options, journal, fleet, time);
    sched.run();
    list_nodes();
  }

  // A new control plane over the same journal and cluster (a process restart).
  void restart(control::breaker_config breaker_config = {}) {
    anon_send_exit(fleet, exit_reason::user_shutdown);
    anon_send_exit(breaker, exit_reason::user_shutdown);
    anon_send_exit(ingest, exit_reason::user_shutdown);
    sched.run();
    start(breaker_config);
  }

  // What the Node watch delivers first: the whole list.
  void list_nodes() {
    auto list = store->list(*nodes(), "", {});
    CAF_REQUIRE(list.ok());
    self->send(fleet, kube_watch_event{1, "LISTED", list.value->dump(), ""});
    sched.run();
  }

  void post(std::vector<health_event> events) {
    ingest_request request;
    std::size_t line = 0;
    for (auto& e : events)
      request.items.push_back({++line, std::move(e), {}});
    request.reply = [this](control::ingest_reply r) { replies.push_back(std::move(r)); };
    self->send(ingest, ingest_atom::value, std::move(request));
    sched.run();
  }

  json node(const std::string& name) { return *store->get(*nodes(), "", name).value; }
  bool cordoned(const std::string& name) {
    return node(name)["spec"].value("unschedulable", false);
  }
  std::size_t journal_rows(const std::string& kind) {
    auto rows = journal_db->read({});
    CAF_REQUIRE(rows.has_value());
    return static_cast<std::size_t>(
      std::count_if(rows->begin(), rows->end(),
                    [&](const journal_record& r) { return r.kind == kind; }));
  }
  std::size_t requests(const std::string& verb) {
    auto& seen = deref<stateful_actor<fake_gateway_state>>(gateway).state.seen;
    return static_cast<std::size_t>(
      std::count_if(seen.begin(), seen.end(),
                    [&](const kube::kube_request& r) { return r.verb == verb; }));
  }
  // Asks an actor and runs the scheduler until it answered with a string.
  template <class... Ts>
  std::string ask(const actor& whom, Ts... xs) {
    self->send(whom, xs...);
    sched.run();
    std::string out;
    self->receive([&](const std::string& s) { out = s; },
                  [](const error& err) { CAF_FAIL("no answer: " << to_string(err)); });
    return out;
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(control_tests, fixture)

CAF_TEST(a_fatal_xid_quarantines_the_node_after_it_is_journaled) {
  start();
  post({xid("node-1", "GPU-a")});
  CAF_REQUIRE_EQUAL(replies.size(), 1u);
  CAF_CHECK_EQUAL(replies[0].http_status, 200);
  CAF_CHECK_EQUAL(journal_rows("event"), 1u);
  CAF_CHECK(cordoned("node-1"));
  auto n = node("node-1");
  CAF_CHECK_EQUAL(n["metadata"]["annotations"]["vigil.dev/cordoned"], "true");
  CAF_CHECK_EQUAL(n["spec"]["taints"].size(), 1u);
  CAF_CHECK_EQUAL(n["status"]["conditions"][0]["type"], "GPUHealthy");
  CAF_CHECK_EQUAL(n["status"]["conditions"][0]["status"], "False");
  CAF_CHECK_EQUAL(journal_rows(quarantine_row), 1u);
  CAF_CHECK_EQUAL(requests("POST"), 1u); // the Kubernetes Event
  CAF_CHECK(!cordoned("node-2"));
}

CAF_TEST(a_healthy_event_for_another_gpu_does_not_uncordon) {
  start();
  post({xid("node-1", "GPU-a")});
  post({xid("node-1", "GPU-b", true)});
  CAF_CHECK(cordoned("node-1"));
  post({xid("node-1", "GPU-a", true)});
  CAF_CHECK(!cordoned("node-1"));
  auto n = node("node-1");
  CAF_CHECK(!n["metadata"].contains("annotations")
            || !n["metadata"]["annotations"].contains("vigil.dev/cordoned"));
  CAF_CHECK(!n["spec"].contains("taints") || n["spec"]["taints"].empty());
  CAF_CHECK_EQUAL(n["status"]["conditions"][0]["status"], "True");
}

CAF_TEST(a_node_cordoned_by_someone_else_is_never_uncordoned) {
  CAF_REQUIRE(store
                ->patch(*nodes(), "", "node-2", json{{"spec", {{"unschedulable", true}}}},
                        kube::patch_type::merge, false)
                .ok());
  start();
  post({xid("node-2", "GPU-a")});
  post({xid("node-2", "GPU-a", true)});
  CAF_CHECK(cordoned("node-2"));
  // vigil's taint and condition are gone: only what it added was released.
  auto n = node("node-2");
  CAF_CHECK(!n["spec"].contains("taints") || n["spec"]["taints"].empty());
}

CAF_TEST(a_duplicate_event_is_acknowledged_and_not_processed_again) {
  start();
  post({xid("node-1", "GPU-a")});
  post({xid("node-1", "GPU-a", true)});
  CAF_CHECK(!cordoned("node-1"));
  // The unhealthy copy arrives again (an agent resending): stored once, ignored.
  post({xid("node-1", "GPU-a")});
  CAF_REQUIRE_EQUAL(replies.size(), 3u);
  CAF_CHECK_EQUAL(replies[2].http_status, 200);
  CAF_CHECK(replies[2].body.find("\"duplicate\"") != std::string::npos);
  CAF_CHECK(!cordoned("node-1"));
  CAF_CHECK_EQUAL(journal_rows("event"), 2u);
}

CAF_TEST(invalid_items_are_rejected_and_valid_ones_of_the_same_request_accepted) {
  start();
  ingest_request request;
  request.items.push_back({1, xid("node-3", "GPU-a"), {}});
  request.items.push_back({2, std::nullopt, "line 2: nodeName: missing or empty"});
  request.reply = [this](control::ingest_reply r) { replies.push_back(std::move(r)); };
  self->send(ingest, ingest_atom::value, std::move(request));
  sched.run();
  CAF_REQUIRE_EQUAL(replies.size(), 1u);
  CAF_CHECK_EQUAL(replies[0].http_status, 200);
  CAF_CHECK(replies[0].body.find("nodeName") != std::string::npos);
  CAF_CHECK(cordoned("node-3"));
}

CAF_TEST(the_breaker_trips_at_its_threshold_and_not_before) {
  control::breaker_config config;
  config.max_cordoned_percent = 50; // of 4 GPU nodes: 2 may be cordoned
  start(config);
  post({xid("node-1", "GPU-a")});
  post({xid("node-2", "GPU-a")});
  CAF_CHECK(cordoned("node-1"));
  CAF_CHECK(cordoned("node-2"));
  CAF_CHECK_EQUAL(journal_rows(breaker_row::tripped), 0u);
  post({xid("node-3", "GPU-a")});
  CAF_CHECK(!cordoned("node-3"));
  CAF_CHECK_EQUAL(journal_rows(breaker_row::tripped), 1u);
  // The event is still journaled and the node still reports its condition.
  CAF_CHECK_EQUAL(journal_rows("event"), 3u);
  auto held = node("node-3"); // a named copy: the check keeps references
  CAF_CHECK_EQUAL(held["status"]["conditions"][0]["status"], "False");
  // Releasing is always allowed while tripped.
  post({xid("node-1", "GPU-a", true)});
  CAF_CHECK(!cordoned("node-1"));
  // After an explicit reset the held node is quarantined on its next trigger.
  CAF_CHECK_EQUAL(ask(breaker, reset_atom::value), "reset");
  CAF_CHECK_EQUAL(journal_rows(breaker_row::reset), 1u);
  list_nodes();
  CAF_CHECK(cordoned("node-3"));
}

CAF_TEST(a_tripped_breaker_survives_a_restart) {
  control::breaker_config config;
  config.max_cordoned_nodes = 1;
  start(config);
  post({xid("node-1", "GPU-a")});
  post({xid("node-2", "GPU-a")});
  CAF_CHECK(!cordoned("node-2"));
  restart(config); // a new control plane over the same journal
  auto summary = ask(breaker, summary_atom::value);
  CAF_CHECK(json::parse(summary)["tripped"].get<bool>());
  CAF_CHECK(!cordoned("node-2"));
  // The rebuilt node-1 still knows its fault: a recovery releases it.
  post({xid("node-1", "GPU-a", true)});
  CAF_CHECK(!cordoned("node-1"));
}

CAF_TEST(a_crashed_node_actor_is_restarted_with_its_events_from_the_journal) {
  start();
  post({xid("node-1", "GPU-a"), xid("node-1", "GPU-b")});
  CAF_CHECK(cordoned("node-1"));
  // Find node-1's actor and kill it.
  auto& st = deref<fleet_actor>(fleet).state;
  CAF_REQUIRE_EQUAL(st.nodes.count("node-1"), 1u);
  anon_send_exit(st.nodes["node-1"], exit_reason::kill);
  sched.run();
  CAF_CHECK_EQUAL(st.stats.restarts, 1u);
  // One GPU recovers: still quarantined (the restarted actor remembers GPU-b).
  post({xid("node-1", "GPU-a", true)});
  CAF_CHECK(cordoned("node-1"));
  post({xid("node-1", "GPU-b", true)});
  CAF_CHECK(!cordoned("node-1"));
}

CAF_TEST(a_node_changed_meanwhile_is_reread_and_converged) {
  start();
  // Someone labels node-1 after vigil observed it: vigil's PATCH is stale.
  CAF_REQUIRE(store
                ->patch(*nodes(), "", "node-1",
                        json{{"metadata", {{"labels", {{"team", "x"}}}}}},
                        kube::patch_type::merge, false)
                .ok());
  post({xid("node-1", "GPU-a")});
  CAF_CHECK(cordoned("node-1"));
  auto relabelled = node("node-1");
  CAF_CHECK_EQUAL(relabelled["metadata"]["labels"]["team"], "x");
  auto node_summary = json::parse(ask(fleet, summary_atom::value, std::string("node-1")));
  CAF_CHECK_EQUAL(node_summary["conflicts"], 1);
  auto summary = json::parse(ask(fleet, summary_atom::value));
  CAF_CHECK_EQUAL(summary["nodes"], 4);
}

CAF_TEST(api_failures_are_retried_with_backoff) {
  start();
  deref<stateful_actor<fake_gateway_state>>(gateway).state.fail_next = {503, 503};
  post({xid("node-1", "GPU-a")});
  CAF_CHECK(!cordoned("node-1"));
  sched.trigger_timeouts(); // first retry: fails again
  sched.run();
  CAF_CHECK(!cordoned("node-1"));
  sched.trigger_timeouts();
  sched.run();
  CAF_CHECK(cordoned("node-1"));
}

CAF_TEST(dry_run_journals_decisions_and_writes_nothing) {
  settings->dry_run = true;
  start();
  auto patches_before = requests("PATCH");
  post({xid("node-1", "GPU-a")});
  CAF_CHECK(!cordoned("node-1"));
  CAF_CHECK_EQUAL(requests("PATCH"), patches_before);
  CAF_CHECK_EQUAL(journal_rows(quarantine_row), 1u);
}

CAF_TEST(a_partial_drain_evicts_only_the_pod_on_the_bad_gpu) {
  add_pod("train", pod_object("job-a", "node-1", {"GPU-a"}));
  add_pod("train", pod_object("job-b", "node-1", {"GPU-b"}));
  add_pod("train", pod_object("web", "node-1"));
  add_pod("monitoring", pod_object("exporter", "node-1", {"GPU-a"}, {}, "DaemonSet"));
  add_pod("train", pod_object("job-c", "node-2", {"GPU-c"}));
  start();
  post({reset_needed("node-1", "GPU-a")});
  CAF_CHECK(cordoned("node-1"));
  CAF_CHECK(terminating("train", "job-a"));
  CAF_CHECK(!terminating("train", "job-b"));
  CAF_CHECK(!terminating("train", "web"));
  CAF_CHECK(!terminating("monitoring", "exporter"));
  CAF_CHECK(!terminating("train", "job-c"));
  CAF_CHECK_EQUAL(drain_rows("started"), 1u);
  CAF_CHECK_EQUAL(drain_rows("succeeded"), 0u); // job-a is still in its grace period
  kubelet_finishes();
  advance(std::chrono::seconds{5});
  CAF_CHECK_EQUAL(drain_rows("succeeded"), 1u);
  auto summary = node_summary("node-1");
  CAF_CHECK_EQUAL(summary["drainedKey"], "partial:GPU-a");
  CAF_CHECK_EQUAL(summary["evictions"], 1);
  CAF_CHECK_EQUAL(summary["draining"], "");
  // A new control plane over the same journal knows the drain completed.
  restart();
  CAF_CHECK(cordoned("node-1"));
  CAF_CHECK_EQUAL(drain_rows("started"), 1u);
  auto rebuilt = node_summary("node-1");
  CAF_CHECK_EQUAL(rebuilt["drainedKey"], "partial:GPU-a");
}

CAF_TEST(a_full_drain_waits_for_the_disruption_budget_and_skips_daemonsets) {
  add_pod("train", pod_object("w0", "node-1", {"GPU-a"}, {{"app", "train"}}));
  add_pod("train", pod_object("w1", "node-2", {"GPU-a"}, {{"app", "train"}}));
  add_pod("serve", pod_object("api", "node-1"));
  add_pod("monitoring", pod_object("exporter", "node-1", {}, {}, "DaemonSet"));
  add_pod("kube-system", pod_object("dns", "node-1"));
  add_budget("train", "train", 2);
  start();
  post({reboot_needed("node-1", "GPU-a")});
  CAF_CHECK(terminating("serve", "api"));
  CAF_CHECK(!terminating("train", "w0")); // 429: the budget allows no disruption
  CAF_CHECK(!terminating("monitoring", "exporter"));
  CAF_CHECK(!terminating("kube-system", "dns"));
  // The owner scales up elsewhere: the budget now allows one disruption.
  add_pod("train", pod_object("w2", "node-3", {"GPU-a"}, {{"app", "train"}}));
  advance(std::chrono::seconds{5}); // the eviction's retry comes due
  CAF_CHECK(terminating("train", "w0"));
  kubelet_finishes();
  advance(std::chrono::seconds{5});
  CAF_CHECK_EQUAL(drain_rows("succeeded"), 1u);
  auto summary = node_summary("node-1");
  CAF_CHECK_EQUAL(summary["drainedKey"], "full");
  CAF_CHECK_EQUAL(summary["evictions"], 2);
  // A later partial drain in the same quarantine is skipped (seed 000 §3.1).
  post({reset_needed("node-1", "GPU-b")});
  CAF_CHECK_EQUAL(drain_rows("started"), 1u);
}

CAF_TEST(namespaces_drain_by_their_modes) {
  auto drain = std::make_shared<drain_settings>();
  drain->config.namespaces = {
    {"batch", control::drain_mode::allow_completion, {}},
    {"serve", control::drain_mode::delete_after_timeout, std::chrono::minutes{2}}};
  settings->drain = drain;
  add_pod("batch", pod_object("etl", "node-1"));
  add_pod("serve", pod_object("api", "node-1"));
  add_pod("train", pod_object("job", "node-1", {"GPU-a"}));
  start();
  post({reboot_needed("node-1", "GPU-a")});
  CAF_CHECK(terminating("train", "job"));  // Immediate: evicted now
  CAF_CHECK(!terminating("batch", "etl")); // AllowCompletion: never evicted
  CAF_CHECK(!terminating("serve", "api")); // DeleteAfterTimeout: not yet
  kubelet_finishes();
  advance(std::chrono::minutes{1});
  CAF_CHECK(!terminating("serve", "api"));
  advance(std::chrono::minutes{1}); // the namespace's timeout: deleted
  CAF_CHECK(terminating("serve", "api"));
  kubelet_finishes();
  // The batch pod finishes on its own; the drain sees it and is done.
  CAF_REQUIRE(store
                ->patch(*pods(), "batch", "etl",
                        json{{"status", {{"phase", "Succeeded"}}}},
                        kube::patch_type::merge, true)
                .ok());
  CAF_CHECK_EQUAL(drain_rows("succeeded"), 0u);
  advance(std::chrono::seconds{5});
  CAF_CHECK_EQUAL(drain_rows("succeeded"), 1u);
  auto rows = journal_db->read({});
  CAF_REQUIRE(rows.has_value());
  for (const auto& r : *rows)
    if (r.kind == control::drain_row && json::parse(r.body)["phase"] == "succeeded") {
      auto body = json::parse(r.body);
      CAF_CHECK_EQUAL(body["evictions"], 1);
      CAF_CHECK_EQUAL(body["deletions"], 1);
    }
}

CAF_TEST(a_recovery_cancels_a_drain) {
  add_pod("train", pod_object("w0", "node-1", {"GPU-a"}, {{"app", "train"}}));
  add_pod("train", pod_object("w1", "node-2", {"GPU-a"}, {{"app", "train"}}));
  add_budget("train", "train", 2);
  start();
  post({reboot_needed("node-1", "GPU-a")});
  {
    auto summary = node_summary("node-1"); // a named copy: the check keeps references
    CAF_CHECK_EQUAL(summary["draining"], "full");
  }
  post({xid("node-1", "GPU-a", true)});
  CAF_CHECK(!cordoned("node-1"));
  CAF_CHECK_EQUAL(drain_rows("cancelled"), 1u);
  {
    auto summary = node_summary("node-1"); // a named copy: the check keeps references
    CAF_CHECK_EQUAL(summary["draining"], "");
  }
  // No eviction is asked after the cancel.
  auto posts = requests("POST");
  add_pod("train", pod_object("w2", "node-3", {"GPU-a"}, {{"app", "train"}}));
  advance(std::chrono::minutes{5});
  CAF_CHECK_EQUAL(requests("POST"), posts);
  CAF_CHECK(!terminating("train", "w0"));
}

CAF_TEST(a_tripped_breaker_holds_new_drains) {
  control::breaker_config config;
  config.max_cordoned_nodes = 1;
  add_pod("train", pod_object("w0", "node-1", {"GPU-b"}));
  start(config);
  post({reset_needed("node-1", "GPU-a")}); // cordoned; nothing holds GPU-a
  CAF_CHECK_EQUAL(drain_rows("succeeded"), 1u);
  post({xid("node-2", "GPU-a")}); // trips the breaker
  CAF_CHECK(!cordoned("node-2"));
  post({reboot_needed("node-1", "GPU-b")}); // wants a full drain now
  {
    auto summary = node_summary("node-1"); // a named copy: the check keeps references
    CAF_CHECK_EQUAL(summary["drainsHeld"], 1);
  }
  CAF_CHECK(!terminating("train", "w0"));
  CAF_CHECK_EQUAL(ask(breaker, reset_atom::value), "reset");
  advance(std::chrono::seconds{60}); // the node actor asks again
  CAF_CHECK(terminating("train", "w0"));
}

CAF_TEST(dry_run_journals_the_drain_plan_and_evicts_nothing) {
  settings->dry_run = true;
  add_pod("train", pod_object("job-a", "node-1", {"GPU-a"}));
  start();
  post({reset_needed("node-1", "GPU-a")});
  CAF_CHECK_EQUAL(drain_rows("started"), 1u);
  CAF_CHECK_EQUAL(drain_rows("dry_run"), 1u);
  CAF_CHECK(!terminating("train", "job-a"));
}

CAF_TEST(a_flapping_nic_port_escalates_to_replace_vm) {
  start();
  for (int i = 0; i < 3; ++i) {
    advance(std::chrono::minutes{1});
    post({port_state("node-1", false, i)});
    CAF_CHECK(cordoned("node-1"));
    post({port_state("node-1", true, i)});
  }
  CAF_CHECK_EQUAL(journal_rows(correlation_row), 1u);
  auto rows = journal_db->read({});
  CAF_REQUIRE(rows.has_value());
  for (const auto& r : *rows)
    if (r.kind == correlation_row) {
      auto body = json::parse(r.body);
      CAF_CHECK_EQUAL(body["rule"], "nic-flap");
      CAF_CHECK_EQUAL(body["recommendedAction"], "REPLACE_VM");
    }
  auto summary = node_summary("node-1");
  CAF_CHECK_EQUAL(summary["ruleFirings"], 1);
}

CAF_TEST(a_port_down_without_recovery_attempts_is_dropped_and_replace_vm) {
  start();
  post({port_state("node-1", false, 0)});
  CAF_CHECK(cordoned("node-1"));
  CAF_CHECK_EQUAL(journal_rows(correlation_row), 0u);
  advance(std::chrono::minutes{4});
  CAF_CHECK_EQUAL(journal_rows(correlation_row), 1u);
  {
    auto summary = node_summary("node-1"); // a named copy: the check keeps references
    bool dropped = false;
    for (const auto& a : summary["active"])
      dropped = dropped || a["check"] == control::nic_port_dropped_check;
    CAF_CHECK(dropped);
  }
  // The port comes back: the drop's record goes with the port's.
  post({port_state("node-1", true, 0)});
  CAF_CHECK(!cordoned("node-1"));
}

CAF_TEST(nic_ports_down_on_many_nodes_are_one_fabric_incident_not_a_mass_quarantine) {
  start();
  post({port_state("node-1", false, 0)});
  post({port_state("node-2", false, 0)});
  CAF_CHECK(cordoned("node-1"));
  CAF_CHECK(cordoned("node-2"));
  post({port_state("node-3", false, 0)}); // the third node within 5 min: the fabric
  CAF_CHECK_EQUAL(journal_rows(fabric_row), 1u);
  CAF_CHECK(!cordoned("node-1"));
  CAF_CHECK(!cordoned("node-2"));
  CAF_CHECK(!cordoned("node-3"));
  post({port_state("node-4", false, 0)}); // joins the open incident
  CAF_CHECK(!cordoned("node-4"));
  // Ports still down after the drop rule's time: the fabric explains them.
  advance(std::chrono::minutes{5});
  CAF_CHECK(!cordoned("node-1"));
  CAF_CHECK(!cordoned("node-4"));
  CAF_CHECK_EQUAL(journal_rows(correlation_row), 0u);
  CAF_CHECK_EQUAL(journal_rows("event"), 4u); // every event is still journaled
  CAF_CHECK_EQUAL(journal_rows(breaker_row::tripped), 0u);
}

CAF_TEST(only_the_lease_holder_acts_and_a_standby_takes_over_an_expired_lease) {
  // replica-b holds a fresh Lease (renewed "now" on the virtual clock).
  const auto* leases = store->find_type("coordination.k8s.io", "v1", "leases");
  auto lease_of = [this](const std::string& holder) {
    return json{{"apiVersion", "coordination.k8s.io/v1"},
                {"kind", "Lease"},
                {"metadata", {{"name", "vigil-control"}, {"namespace", "vigil"}}},
                {"spec",
                 {{"holderIdentity", holder},
                  {"leaseDurationSeconds", 15},
                  {"renewTime", format_rfc3339(time->wall_now())}}}};
  };
  CAF_REQUIRE(store->create(*leases, "vigil", lease_of("replica-b")).ok());
  elected = true;
  start();
  control::lease_config lease;
  lease.identity = "replica-a";
  auto elector =
    sys.spawn(leader_elector, lease, gateway, std::vector<actor>{fleet, ingest}, time);
  sched.run();
  post({xid("node-1", "GPU-a")});
  CAF_REQUIRE_EQUAL(replies.size(), 1u);
  CAF_CHECK_EQUAL(replies[0].http_status, 503); // standing by: the agent retries
  CAF_CHECK_EQUAL(journal_rows("event"), 0u);
  CAF_CHECK(!cordoned("node-1"));
  // replica-b stops renewing: after the Lease's duration replica-a takes over,
  // rebuilds from the journal and acts.
  advance(std::chrono::seconds{16});
  list_nodes();
  auto summary = json::parse(ask(elector, summary_atom::value));
  CAF_CHECK_EQUAL(summary["leading"], true);
  auto held = *store->get(*leases, "vigil", "vigil-control").value;
  CAF_CHECK_EQUAL(held["spec"]["holderIdentity"], "replica-a");
  CAF_CHECK_EQUAL(held["spec"]["leaseTransitions"], 1);
  post({xid("node-1", "GPU-a")});
  CAF_CHECK_EQUAL(replies.back().http_status, 200);
  CAF_CHECK(cordoned("node-1"));
  // Another replica takes the Lease (a partition healed the wrong way):
  // replica-a sees it on its next look and stands by.
  auto taken = lease_of("replica-c");
  taken["metadata"]["resourceVersion"] = held["metadata"]["resourceVersion"];
  CAF_REQUIRE(store->update(*leases, "vigil", "vigil-control", taken, false).ok());
  advance(std::chrono::seconds{2});
  auto standby = json::parse(ask(fleet, summary_atom::value));
  CAF_CHECK_EQUAL(standby["standby"], true);
  CAF_CHECK_EQUAL(standby["nodes"], 0);
  post({xid("node-2", "GPU-a")});
  CAF_CHECK_EQUAL(replies.back().http_status, 503);
  anon_send_exit(elector, exit_reason::user_shutdown);
  sched.run();
}

CAF_TEST(a_leader_creates_the_lease_and_releases_it_when_it_stops) {
  elected = true;
  start();
  control::lease_config lease;
  lease.identity = "replica-a";
  auto elector =
    sys.spawn(leader_elector, lease, gateway, std::vector<actor>{fleet, ingest}, time);
  sched.run();
  list_nodes();
  const auto* leases = store->find_type("coordination.k8s.io", "v1", "leases");
  auto created = *store->get(*leases, "vigil", "vigil-control").value;
  CAF_CHECK_EQUAL(created["spec"]["holderIdentity"], "replica-a");
  post({xid("node-1", "GPU-a")});
  CAF_CHECK(cordoned("node-1"));
  // An orderly shutdown gives the Lease up: a successor takes it at once.
  anon_send_exit(elector, exit_reason::user_shutdown);
  sched.run();
  auto released = *store->get(*leases, "vigil", "vigil-control").value;
  CAF_CHECK_EQUAL(released["spec"]["holderIdentity"], "");
  auto step = control::next_lease_step(*control::read_lease(released.dump()),
                                       control::lease_config{}, time->wall_now());
  CAF_CHECK(step.what == control::lease_step::kind::update);
}

CAF_TEST_FIXTURE_SCOPE_END()
