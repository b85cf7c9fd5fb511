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
#include "actors/control/remediation/remediation_machine.hpp"
#include "actors/control/remediation/remediation_resource.hpp"
#include "actors/gateway/kube_gateway_messages.hpp"
#include "actors/janitor/janitor_actor.hpp"
#include "actors/journal/journal_actor.hpp"
#include "messages/control_messages.hpp"
#include "runtime/actor_clock.hpp"
#include "runtime/kube/kube_object_store.hpp"
#include "tests/support/flaky_journal_store.hpp"
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
  // /apis/vigil.dev/v1alpha1/<plural>[/<name>[/status]]: the maintenance CRs
  if (parts.size() >= 4 && parts[0] == "apis" && parts[1] == "vigil.dev") {
    const auto* type = store.find_type("vigil.dev", "v1alpha1", parts[3]);
    if (type == nullptr)
      return kube::kube_error{404, "NotFound", "no such resource", {}};
    if (request.verb == "POST" && parts.size() == 4)
      return to_result(store.create(*type, "", json::parse(request.body)), 201);
    if (request.verb == "GET" && parts.size() == 4)
      return to_result(store.list(*type, "", {}), 200);
    if (request.verb == "GET" && parts.size() == 5)
      return to_result(store.get(*type, "", parts[4]), 200);
    if (request.verb == "PATCH" && parts.size() >= 5)
      return to_result(store.patch(*type, "", parts[4], json::parse(request.body),
                                   kube::patch_type::merge, parts.size() == 6),
                       200);
  }
  // /apis/batch/v1/namespaces/<ns>/jobs[/<name>]
  if (parts.size() >= 6 && parts[0] == "apis" && parts[1] == "batch"
      && parts[5] == "jobs") {
    const auto* jobs = store.find_type("batch", "v1", "jobs");
    if (request.verb == "POST" && parts.size() == 6)
      return to_result(store.create(*jobs, parts[4], json::parse(request.body)), 201);
    if (request.verb == "GET" && parts.size() == 7)
      return to_result(store.get(*jobs, parts[4], parts[6]), 200);
    if (request.verb == "DELETE" && parts.size() == 7)
      return to_result(store.remove(*jobs, parts[4], parts[6], {}), 200);
  }
  // /api/v1/namespaces/<ns>/pods?labelSelector=…: a Job's pods
  if (request.verb == "GET" && parts.size() == 5 && parts[2] == "namespaces"
      && parts[4] == "pods") {
    kube::list_options options;
    const std::string label = "labelSelector=";
    if (request.query.rfind(label, 0) == 0)
      options.label_selector = unescape(request.query.substr(label.size()));
    return to_result(store.list(*pods, parts[3], options), 200);
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
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata",
           {{"name", name},
            {"labels",
             {{"nvidia.com/gpu.present", "true"},
              {"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}}}}},
          {"spec", json::object()}};
}

// The path to the API server, which can be cut: while cut, requests are
// held unanswered (a partition); on healing they fail as the client's
// timeout would fail them.
struct partition_state {
  bool cut = false;
  std::vector<response_promise> held;
  static inline const char* name = "partition";
};

behavior partitionable(stateful_actor<partition_state>* self, actor gateway) {
  return {
    [=](kube::kube_request& request) -> result<kube::kube_result> {
      auto rp = self->make_response_promise();
      if (self->state.cut) {
        self->state.held.push_back(rp);
        return rp;
      }
      self->request(gateway, infinite, std::move(request))
        .then([rp](kube::kube_result& r) mutable { rp.deliver(std::move(r)); });
      return rp;
    },
    [=](bool cut) {
      self->state.cut = cut;
      if (cut)
        return;
      kube::kube_error timeout;
      timeout.reason = "Transport";
      timeout.message = "timed out";
      for (auto& rp : self->state.held)
        rp.deliver(kube::kube_result{timeout});
      self->state.held.clear();
    },
  };
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
  /// A real SQLite journal that can fail its appends (a database outage).
  std::shared_ptr<vigil::test::flaky_journal_store> journal_db = [this] {
    auto s = std::make_shared<vigil::test::flaky_journal_store>(
      make_sqlite_journal_store(journal_path));
    CAF_REQUIRE(s->open().has_value());
    return s;
  }();
  actor writer = sys.spawn(journal_writer, std::shared_ptr<journal_store>(journal_db));
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
    // Remediation has tests of its own; elsewhere the node stops at the drain.
    settings->remediation.enabled = false;
    // So has the validation after a fix; the other remediation tests end at the CR.
    settings->remediation.validation.after_reset = false;
    settings->remediation.validation.after_reboot = false;
    for (auto [plural, kind] :
         {std::pair<const char*, const char*>{"gpuresets", "GPUReset"},
          {"rebootnodes", "RebootNode"},
          {"terminatenodes", "TerminateNode"}})
      store->register_type({"vigil.dev", "v1alpha1", plural, kind, false, true, {}});
    for (int i = 1; i <= 4; ++i)
      CAF_REQUIRE(
        store->create(*nodes(), "", node_object("node-" + std::to_string(i))).ok());
  }

  // The coordinator's shutdown fires every pending timer until none is left:
  // actors with periodic timers (a CR poll) must be gone first.
  ~fixture() {
    for (auto* a : {&fleet, &breaker, &ingest})
      if (*a)
        anon_send_exit(*a, exit_reason::user_shutdown);
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
  // The Job controller's part: the Job's status becomes `status`.
  void job_status(const std::string& name, json status) {
    CAF_REQUIRE(store
                  ->patch(*store->find_type("batch", "v1", "jobs"), "vigil-system", name,
                          json{{"status", std::move(status)}}, kube::patch_type::merge,
                          true)
                  .ok());
  }

  // The maintenance CRs of one kind ("gpuresets", "rebootnodes").
  std::vector<json> crs(const std::string& plural) {
    auto list = store->list(*store->find_type("vigil.dev", "v1alpha1", plural), "", {});
    CAF_REQUIRE(list.ok());
    return (*list.value)["items"].get<std::vector<json>>();
  }
  // The janitor's part, played by the test: the CR reaches `phase`.
  void cr_phase(const std::string& plural, const std::string& name,
                const std::string& phase, const std::string& failure = "") {
    json status = {{"phase", phase}};
    if (!failure.empty())
      status["failureReason"] = failure;
    CAF_REQUIRE(store
                  ->patch(*store->find_type("vigil.dev", "v1alpha1", plural), "", name,
                          json{{"status", status}}, kube::patch_type::merge, true)
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
    ingest_settings ingest_options;
    ingest_options.await_leadership = elected;
    ingest = sys.spawn(vigil::ingest, ingest_options, journal, fleet, time);
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

  // What the Node watch delivers first: the whole list.
  void list_nodes() {
    auto list = store->list(*nodes(), "", {});
    CAF_REQUIRE(list.ok());
    self->send(fleet, kube_watch_event{1, "LISTED", list.value->dump(), ""});
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
    run();
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
  CAF_CHECK_EQUAL(events_posted("QuarantineHeld", "node-3"), 1u);
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

// Before the fleet has listed the Nodes the percentage limit has no
// denominator: a new cordon waits, unanswered, for the count instead of going
// uncounted (or being refused).
CAF_TEST(cordons_wait_for_the_gpu_node_count) {
  auto fresh = sys.spawn(vigil::breaker, control::breaker_config{}, journal, time);
  run();
  self->send(fresh, admit_atom::value, std::string("node-1"));
  run();
  CAF_CHECK(self->mailbox().empty());
  anon_send(fresh, gpunodes_atom::value, std::uint64_t{4});
  run();
  std::string answer = "none";
  self->receive([&](const std::string& s) { answer = s; });
  CAF_CHECK_EQUAL(answer, "");
  anon_send_exit(fresh, exit_reason::user_shutdown);
  run();
}

// Journal first (issue #7 item 1): while the database refuses appends no
// event is acknowledged; the request is answered 503 with Retry-After at the
// ingest deadline, nothing is acted on, and the agent's resend is accepted
// once the journal is back.
CAF_TEST(ingest_answers_503_with_retry_after_while_the_journal_is_down) {
  start();
  journal_db->failures = 1000;
  post({xid("node-1", "GPU-a")});
  CAF_CHECK(replies.empty()); // nothing claimed stored
  advance(std::chrono::seconds{5});
  CAF_REQUIRE_EQUAL(replies.size(), 1u);
  CAF_CHECK_EQUAL(replies[0].http_status, 503);
  CAF_CHECK(replies[0].retry_after_seconds.has_value());
  CAF_CHECK(!cordoned("node-1"));
  CAF_CHECK_EQUAL(journal_rows("event"), 0u);
  journal_db->failures = 0;
  advance(std::chrono::seconds{30}); // the journal's reconnect backoff
  post({xid("node-1", "GPU-a")});    // the agent resends
  CAF_CHECK_EQUAL(replies.back().http_status, 200);
  CAF_CHECK_EQUAL(journal_rows("event"), 1u);
  CAF_CHECK(cordoned("node-1"));
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

// The cordons counted in the window survive a restart too: a control plane
// restarted right after a cordon does not grant a fresh budget.
CAF_TEST(the_breakers_window_survives_a_restart) {
  control::breaker_config config;
  config.max_cordoned_nodes = 1;
  start(config);
  post({xid("node-1", "GPU-a")});
  CAF_CHECK(cordoned("node-1"));
  restart(config);
  auto summary = json::parse(ask(breaker, summary_atom::value)); // a named copy
  CAF_CHECK_EQUAL(summary["cordonsInWindow"], 1);
  post({xid("node-2", "GPU-a")});
  CAF_CHECK(!cordoned("node-2"));
  CAF_CHECK_EQUAL(journal_rows(breaker_row::tripped), 1u);
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

// issue #7 item 2 / ARCHITECTURE.md §3: each GPU's XID history lives in its
// own gpu actor (each NIC port's in a nic_port actor), spawned by the node
// actor on the first event that names it; a restarted node rebuilds them from
// the journal, so the repeated-XID rule still counts the bursts before it.
CAF_TEST(repeated_fatal_xids_on_one_gpu_escalate_in_its_gpu_actor_across_a_restart) {
  start();
  {
    auto idle = node_summary("node-1");
    CAF_CHECK_EQUAL(idle.value("gpuActors", -1), 0);
  }
  auto burst = [&](int n) {
    auto e = xid("node-1", "GPU-a");
    e.id += "-" + std::to_string(n);
    e.generated = time->wall_now();
    post({e});
    advance(std::chrono::minutes{10}); // each one its own burst
  };
  for (int n = 0; n < 4; ++n)
    burst(n);
  CAF_CHECK_EQUAL(journal_rows(correlation_row), 0u);
  burst(4); // the fifth burst within 24 h
  CAF_CHECK_EQUAL(journal_rows(correlation_row), 1u);
  {
    auto summary = node_summary("node-1");
    CAF_CHECK_EQUAL(summary.value("gpuActors", -1), 1);
    CAF_CHECK_EQUAL(summary.value("nicPortActors", -1), 0);
  }
  auto& st = deref<fleet_actor>(fleet).state;
  anon_send_exit(st.nodes["node-1"], exit_reason::kill);
  sched.run();
  CAF_CHECK_EQUAL(st.stats.restarts, 1u);
  // The rebuilt gpu actor holds the five bursts: a sixth still escalates
  // (a fresh history would count one).
  burst(5);
  CAF_CHECK_EQUAL(journal_rows(correlation_row), 2u);
  post({port_state("node-1", false, 0)});
  auto summary = node_summary("node-1");
  CAF_CHECK_EQUAL(summary.value("gpuActors", -1), 1);
  CAF_CHECK_EQUAL(summary.value("nicPortActors", -1), 1);
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
  CAF_CHECK_EQUAL(settings->counters->pod_deletions.load(), 1u); // /metrics
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
  advance(std::chrono::seconds{60}); // held again: said once
  CAF_CHECK_EQUAL(events_posted("DrainHeldByBreaker", "node-1"), 1u);
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
  // The port is up again, but the flap verdict stays until a reboot or a
  // new node (seed 002 §6.3): the node stays out.
  CAF_CHECK(cordoned("node-1"));
  CAF_CHECK_EQUAL(events_posted("CorrelationRuleFired", "node-1"), 1u);
  {
    auto summary = node_summary("node-1");
    bool flapping = false;
    for (const auto& a : summary["active"])
      flapping = flapping || a["check"] == control::nic_port_flapping_check;
    CAF_CHECK(flapping);
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
  auto fleet_summary = json::parse(ask(fleet, summary_atom::value)); // a named copy
  CAF_CHECK_EQUAL(fleet_summary["ruleFiringsNicFlap"], 1);
  CAF_CHECK_EQUAL(fleet_summary["ruleFiringsRepeatedXid"], 0);
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
  // A restart replays the port-downs and, where the journal has it, the
  // incident that covered them: still no quarantine.
  restart();
  advance(std::chrono::minutes{5});
  for (const char* n : {"node-1", "node-2", "node-3", "node-4"})
    CAF_CHECK(!cordoned(n));
}

// The fabric window survives a restart: a port-down just after it joins the
// two its peers reported just before, and the three are one incident.
CAF_TEST(a_fabric_incident_forms_across_a_restart) {
  start();
  post({port_state("node-1", false, 0)});
  post({port_state("node-2", false, 0)});
  CAF_CHECK(cordoned("node-2"));
  restart();
  advance(std::chrono::minutes{1});
  post({port_state("node-3", false, 0)});
  CAF_CHECK_EQUAL(journal_rows(fabric_row), 1u);
  for (const char* n : {"node-1", "node-2", "node-3"})
    CAF_CHECK(!cordoned(n));
}

// The NIC monitor's link_downed rise comes with each DOWN; with the fabric
// hold, the first nodes of an incident are never cordoned at all.
CAF_TEST(a_held_link_down_is_claimed_by_the_fabric_incident_that_forms) {
  settings->correlation.fabric_hold = std::chrono::seconds{30};
  start();
  auto rise = [](const std::string& node) {
    auto e = port_state(node, false, 0);
    e.id += "-link_downed";
    e.check_name = "InfiniBandDegradationCheck";
    e.error_codes = {"link_downed"};
    e.action = recommended_action::replace_vm;
    e.metadata = {{"previous", "0"}, {"current", "1"}};
    return e;
  };
  // A lone link down quarantines its node once the hold is over.
  post({port_state("node-4", false, 0), rise("node-4")});
  advance(std::chrono::seconds{29});
  CAF_CHECK(!cordoned("node-4"));
  advance(std::chrono::seconds{2});
  CAF_CHECK(cordoned("node-4"));
  // Later, outside that one's window, three nodes at once: the incident
  // claims every report before it reaches a node.
  advance(std::chrono::minutes{10});
  post({port_state("node-1", false, 0), rise("node-1")});
  post({port_state("node-2", false, 0), rise("node-2")});
  advance(std::chrono::seconds{10});
  CAF_CHECK(!cordoned("node-1"));
  post({port_state("node-3", false, 0), rise("node-3")});
  CAF_CHECK_EQUAL(journal_rows(fabric_row), 1u);
  advance(std::chrono::minutes{1});
  for (const char* n : {"node-1", "node-2", "node-3"}) {
    CAF_CHECK(!cordoned(n));
    CAF_CHECK_EQUAL(events_posted("FabricIncident", n), 1u);
  }
  CAF_CHECK_EQUAL(events_posted("FabricIncident", "node-4"), 0u);
  CAF_CHECK_EQUAL(drain_rows("started"), 1u); // node-4's only
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

// A leader cut off from the API server stops acting at its renew deadline
// on its own clock, before its Lease can expire and a successor start, even
// though its Lease request never comes back; healed, it leads again.
CAF_TEST(a_partitioned_leader_stops_at_its_renew_deadline) {
  elected = true;
  start();
  auto path = sys.spawn(partitionable, gateway);
  control::lease_config lease;
  lease.identity = "replica-a";
  auto elector =
    sys.spawn(leader_elector, lease, path, std::vector<actor>{fleet, ingest}, time);
  sched.run();
  list_nodes();
  auto leading = [&] {
    auto summary = json::parse(ask(elector, summary_atom::value));
    return summary["leading"].get<bool>();
  };
  CAF_REQUIRE_EQUAL(leading(), true);
  anon_send(path, true);
  advance(std::chrono::seconds{8});
  CAF_CHECK_EQUAL(leading(), true); // within the deadline: still the leader
  advance(std::chrono::seconds{2});
  CAF_CHECK_EQUAL(leading(), false);
  auto fleet_summary = json::parse(ask(fleet, summary_atom::value)); // a named copy
  CAF_CHECK_EQUAL(fleet_summary["standby"], true);
  post({xid("node-1", "GPU-a")});
  CAF_CHECK_EQUAL(replies.back().http_status, 503);
  CAF_CHECK(!cordoned("node-1"));
  // The partition heals: the held request fails, the next look renews.
  anon_send(path, false);
  sched.run();
  advance(std::chrono::seconds{2});
  list_nodes();
  CAF_CHECK_EQUAL(leading(), true);
  post({xid("node-1", "GPU-a")});
  CAF_CHECK(cordoned("node-1"));
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

// ---- remediation (issue #8) ----

CAF_TEST(a_reset_xid_creates_one_gpureset_once_the_node_is_drained) {
  settings->remediation.enabled = true;
  jobs_only = true;
  start();
  post({reset_needed("node-1", "GPU-a")});
  CAF_CHECK(cordoned("node-1"));
  auto resets = crs("gpuresets");
  CAF_REQUIRE_EQUAL(resets.size(), 1u);
  auto spec = resets[0]["spec"];
  CAF_CHECK_EQUAL(spec["nodeName"], "node-1");
  CAF_CHECK_EQUAL(spec["gpuUUIDs"], json::array({"GPU-a"}));
  CAF_CHECK_EQUAL(spec["sourceEventId"], "node-1-GPU-a-48");
  // seed 000 §4.1: the group and its CR on the Node.
  auto state = control::decode_remediation_state(remediation_annotation("node-1"));
  CAF_REQUIRE(state.has_value());
  const auto* group = control::find_group(*state, "reset-GPU-a");
  CAF_REQUIRE(group != nullptr);
  CAF_CHECK_EQUAL(group->maintenance_cr, resets[0]["metadata"]["name"]);
  CAF_CHECK_EQUAL(crs("rebootnodes").size(), 0u);
  CAF_CHECK_EQUAL(drain_rows("skipped") + drain_rows("succeeded"), 1u);
}

CAF_TEST(the_four_ordering_cases_hold_through_the_mailbox) {
  settings->remediation.enabled = true;
  jobs_only = true;
  start();
  post({reset_needed("node-1", "GPU-a")});
  auto again = reset_needed("node-1", "GPU-a");
  again.id = "node-1-GPU-a-48-again";
  post({again});                           // case 2: same GPU, in flight → skipped
  post({reset_needed("node-1", "GPU-b")}); // case 2: another GPU → waits
  CAF_CHECK_EQUAL(crs("gpuresets").size(), 1u);
  post({reboot_needed("node-1", "GPU-c")}); // case 3: a reboot during a reset waits
  CAF_CHECK_EQUAL(crs("rebootnodes").size(), 0u);
  auto reset_a = crs("gpuresets")[0]["metadata"]["name"].get<std::string>();
  cr_phase("gpuresets", reset_a, "Succeeded");
  advance(std::chrono::seconds{10}); // the CR poll
  // The reboot runs next; GPU-b's waiting reset was covered by it.
  CAF_CHECK_EQUAL(crs("rebootnodes").size(), 1u);
  CAF_CHECK_EQUAL(crs("gpuresets").size(), 1u);
  post({reset_needed("node-1", "GPU-d")}); // case 4: a reset during a reboot → covered
  CAF_CHECK_EQUAL(crs("gpuresets").size(), 1u);
  auto phases = remediation_phases();
  auto has = [&](const std::string& p) {
    return std::find(phases.begin(), phases.end(), p) != phases.end();
  };
  CAF_CHECK(has("created reset-GPU-a"));
  CAF_CHECK(has("succeeded reset-GPU-a"));
  CAF_CHECK(has("covered reset-GPU-b"));
  CAF_CHECK(has("created restart"));
  CAF_CHECK(!has("created reset-GPU-b"));
  CAF_CHECK(!has("created reset-GPU-d"));
  auto state = control::decode_remediation_state(remediation_annotation("node-1"));
  CAF_REQUIRE(state.has_value());
  const auto* covered = control::find_group(*state, "reset-GPU-d");
  CAF_REQUIRE(covered != nullptr); // recorded with the reboot's CR (case 4)
  CAF_CHECK_EQUAL(to_string(covered->kind), "RebootNode");
}

CAF_TEST(a_failed_reset_falls_back_to_a_reboot_whose_success_uncordons) {
  settings->remediation.enabled = true;
  jobs_only = true;
  start();
  post({reset_needed("node-1", "GPU-a")});
  auto reset = crs("gpuresets")[0]["metadata"]["name"].get<std::string>();
  cr_phase("gpuresets", reset, "Failed", "reset_command_failed");
  advance(std::chrono::seconds{10});
  auto reboots = crs("rebootnodes");
  CAF_REQUIRE_EQUAL(reboots.size(), 1u);
  CAF_CHECK(cordoned("node-1"));
  // The janitor saw a new boot ID and the node Ready: the reboot closes the loop.
  cr_phase("rebootnodes", reboots[0]["metadata"]["name"].get<std::string>(), "Succeeded");
  advance(std::chrono::seconds{10});
  CAF_CHECK(!cordoned("node-1"));
  CAF_CHECK_EQUAL(remediation_annotation("node-1"), "");
  auto summary = node_summary("node-1");
  CAF_CHECK_EQUAL(summary["active"].size(), 0u);
}

CAF_TEST(the_healthy_event_after_a_reset_releases_the_node) {
  settings->remediation.enabled = true;
  jobs_only = true;
  start();
  post({reset_needed("node-1", "GPU-a")});
  auto reset = crs("gpuresets")[0]["metadata"]["name"].get<std::string>();
  cr_phase("gpuresets", reset, "Succeeded");
  advance(std::chrono::seconds{10});
  CAF_CHECK(cordoned("node-1"));
  auto healthy = xid("node-1", "GPU-a", true); // the agent read "GPU reset occurred"
  post({healthy});
  CAF_CHECK(!cordoned("node-1"));
  CAF_CHECK_EQUAL(remediation_annotation("node-1"), "");
  // Verified: no escalation when the deadline would have passed.
  advance(std::chrono::seconds{3600});
  CAF_CHECK_EQUAL(crs("rebootnodes").size(), 0u);
}

CAF_TEST(a_healthy_event_before_the_reset_is_seen_done_still_verifies_it) {
  settings->remediation.enabled = true;
  jobs_only = true;
  start();
  post({reset_needed("node-1", "GPU-a")});
  auto support = xid("node-1", "GPU-b");
  support.id = "node-1-GPU-b-support";
  support.action = recommended_action::contact_support;
  post({support}); // keeps the node quarantined throughout
  // The reset Job logs its line before the janitor has restored the labels.
  post({xid("node-1", "GPU-a", true)});
  cr_phase("gpuresets", crs("gpuresets")[0]["metadata"]["name"].get<std::string>(),
           "Succeeded");
  advance(std::chrono::seconds{10});
  advance(settings->remediation.escalation.verify_reset_timeout + std::chrono::hours{1});
  CAF_CHECK(cordoned("node-1"));
  CAF_CHECK_EQUAL(crs("rebootnodes").size(), 0u); // no reboot under GPU-b's pods
  auto phases = remediation_phases();
  CAF_CHECK(std::find(phases.begin(), phases.end(), "verified reset-GPU-a")
            != phases.end());
}

CAF_TEST(a_reset_not_verified_in_time_escalates_to_a_reboot) {
  settings->remediation.enabled = true;
  jobs_only = true;
  start();
  post({reset_needed("node-1", "GPU-a")});
  auto reset = crs("gpuresets")[0]["metadata"]["name"].get<std::string>();
  cr_phase("gpuresets", reset, "Succeeded");
  advance(std::chrono::seconds{10});
  CAF_CHECK_EQUAL(crs("rebootnodes").size(), 0u);
  advance(settings->remediation.escalation.verify_reset_timeout);
  CAF_CHECK_EQUAL(crs("rebootnodes").size(), 1u);
}

// seed 001 step 5: the node returns only once the CR is done (the janitor
// restored the operand labels), even when the GPU's healthy event came first.
CAF_TEST(the_node_stays_cordoned_until_its_reset_cr_is_done) {
  settings->remediation.enabled = true;
  jobs_only = true;
  start();
  post({reset_needed("node-1", "GPU-a")});
  post({xid("node-1", "GPU-a", true)}); // the Job's "GPU reset occurred" line
  CAF_CHECK(cordoned("node-1"));
  cr_phase("gpuresets", crs("gpuresets")[0]["metadata"]["name"].get<std::string>(),
           "Succeeded");
  advance(std::chrono::seconds{10});
  CAF_CHECK(!cordoned("node-1"));
}

// seed 003, proof of recovery before return: a Job on the node must pass.
CAF_TEST(a_reset_is_validated_before_the_node_returns) {
  settings->remediation.enabled = true;
  settings->remediation.validation.after_reset = true;
  jobs_only = true;
  janitor_namespace();
  start();
  post({reset_needed("node-1", "GPU-a")});
  const auto reset = crs("gpuresets")[0]["metadata"]["name"].get<std::string>();
  cr_phase("gpuresets", reset, "Succeeded");
  post({xid("node-1", "GPU-a", true)});
  advance(std::chrono::seconds{10});
  CAF_CHECK(cordoned("node-1"));
  const auto job_name = control::validation_job_name(reset);
  auto job =
    store->get(*store->find_type("batch", "v1", "jobs"), "vigil-system", job_name);
  CAF_REQUIRE(job.ok());
  const auto& spec = (*job.value)["spec"]["template"]["spec"];
  CAF_CHECK_EQUAL(spec["nodeName"], "node-1");
  CAF_CHECK_EQUAL((*job.value)["metadata"]["labels"]["app.kubernetes.io/managed-by"],
                  "vigil");
  CAF_CHECK_EQUAL(spec["containers"][0]["env"][0]["value"], "GPU-a");
  advance(std::chrono::seconds{60});
  CAF_CHECK(cordoned("node-1")); // still running
  job_status(job_name, {{"succeeded", 1}});
  advance(std::chrono::seconds{10});
  CAF_CHECK(!cordoned("node-1"));
  auto phases = remediation_phases();
  CAF_CHECK(std::find(phases.begin(), phases.end(), "validated reset-GPU-a")
            != phases.end());
  CAF_CHECK_EQUAL(settings->counters->validations_passed.load(), 1u);
}

// A reset that "succeeded" while the GPU still fails: the failed validation
// is a fault, and the reboot it climbs to comes after a full drain.
CAF_TEST(a_failed_validation_climbs_the_ladder) {
  settings->remediation.enabled = true;
  settings->remediation.validation.after_reset = true;
  jobs_only = true;
  janitor_namespace();
  start();
  post({reset_needed("node-1", "GPU-a")});
  const auto reset = crs("gpuresets")[0]["metadata"]["name"].get<std::string>();
  cr_phase("gpuresets", reset, "Succeeded");
  post({xid("node-1", "GPU-a", true)});
  advance(std::chrono::seconds{10});
  job_status(control::validation_job_name(reset),
             {{"failed", 1},
              {"conditions",
               {{{"type", "Failed"},
                 {"status", "True"},
                 {"reason", "BackoffLimitExceeded"},
                 {"message", "Job has reached the specified backoff limit"}}}}});
  advance(std::chrono::seconds{10});
  CAF_CHECK(cordoned("node-1"));
  CAF_CHECK_EQUAL(crs("rebootnodes").size(), 1u);
  auto phases = remediation_phases();
  CAF_CHECK(std::find(phases.begin(), phases.end(), "validation_failed reset-GPU-a")
            != phases.end());
  CAF_CHECK_EQUAL(settings->counters->validations_failed.load(), 1u);
  const auto summary = node_summary("node-1");
  CAF_CHECK_EQUAL(summary["uncordons"].get<int>(), 0); // never returned in between
  const auto check = summary["active"][0]["check"].get<std::string>();
  CAF_CHECK_EQUAL(check, "RemediationValidation");
}

// A GPU node whose agent went quiet: a condition and an Event, never a
// cordon; a heartbeat (or an event) sets it right again.
CAF_TEST(a_silent_agent_is_noticed_and_its_return_too) {
  settings->agent_silence = std::chrono::seconds{300};
  jobs_only = true;
  start();
  auto agent_condition = [&](const std::string& name) -> std::string {
    auto n = node(name);
    for (const auto& c :
         n.value("status", json::object()).value("conditions", json::array()))
      if (c.value("type", "") == control::agent_condition_type)
        return c.value("status", "");
    return "";
  };
  advance(std::chrono::seconds{200});
  self->send(fleet, agent_heard_atom::value, std::string{"node-1"});
  advance(std::chrono::seconds{160}); // 360 s: node-1 heard at 200 s
  CAF_CHECK_EQUAL(agent_condition("node-1"), "");
  CAF_CHECK_EQUAL(agent_condition("node-2"), "False");
  CAF_CHECK(!cordoned("node-2"));
  CAF_CHECK_EQUAL(events_posted("AgentSilent", "node-2"), 1u);
  advance(std::chrono::seconds{600});
  CAF_CHECK_EQUAL(events_posted("AgentSilent", "node-2"), 1u); // once
  self->send(fleet, agent_heard_atom::value, std::string{"node-2"});
  run();
  CAF_CHECK_EQUAL(agent_condition("node-2"), "True");
  CAF_CHECK_EQUAL(events_posted("AgentReporting", "node-2"), 1u);
}

CAF_TEST(attempt_caps_survive_a_restart) {
  settings->remediation.enabled = true;
  settings->remediation.escalation.max_resets_per_gpu = 1;
  jobs_only = true;
  start();
  post({reset_needed("node-1", "GPU-a")});
  auto reset = crs("gpuresets")[0]["metadata"]["name"].get<std::string>();
  cr_phase("gpuresets", reset, "Succeeded");
  advance(std::chrono::seconds{10});
  post({xid("node-1", "GPU-a", true)});
  CAF_CHECK(!cordoned("node-1"));
  restart();
  // The same GPU fails again: its one reset in 24 h is spent, so a reboot.
  auto again = reset_needed("node-1", "GPU-a");
  again.id = "node-1-GPU-a-48-later";
  advance(std::chrono::seconds{3600});
  post({again});
  CAF_CHECK_EQUAL(crs("gpuresets").size(), 1u);
  CAF_CHECK_EQUAL(crs("rebootnodes").size(), 1u);
}

// A cap climb whose new rung must wait out its cooldown is journaled and
// counted once: the deferred start runs the escalated request.
CAF_TEST(a_climb_deferred_by_a_cooldown_is_counted_once) {
  settings->remediation.enabled = true;
  settings->remediation.escalation.max_resets_per_gpu = 1;
  jobs_only = true;
  start();
  post({reboot_needed("node-1", "GPU-b")});
  auto reboot = crs("rebootnodes")[0]["metadata"]["name"].get<std::string>();
  cr_phase("rebootnodes", reboot, "Succeeded");
  advance(std::chrono::seconds{10});
  CAF_REQUIRE(!cordoned("node-1"));
  post({reset_needed("node-1", "GPU-a")});
  auto reset = crs("gpuresets")[0]["metadata"]["name"].get<std::string>();
  cr_phase("gpuresets", reset, "Succeeded");
  advance(std::chrono::seconds{10});
  post({xid("node-1", "GPU-a", true)});
  CAF_REQUIRE(!cordoned("node-1"));
  // GPU-a fails again: its reset is spent, so a reboot, which the cooldown
  // after the first one holds back for a while.
  auto again = reset_needed("node-1", "GPU-a");
  again.id = "node-1-GPU-a-48-again";
  post({again});
  CAF_CHECK_EQUAL(crs("rebootnodes").size(), 1u);
  CAF_CHECK_EQUAL(settings->counters->escalations.load(), 1u);
  advance(settings->remediation.escalation.cooldown);
  CAF_CHECK_EQUAL(crs("rebootnodes").size(), 2u);
  CAF_CHECK_EQUAL(crs("gpuresets").size(), 1u);
  CAF_CHECK_EQUAL(settings->counters->escalations.load(), 1u);
  auto phases = remediation_phases();
  CAF_CHECK_EQUAL(
    std::count_if(phases.begin(), phases.end(),
                  [](const std::string& p) { return p.rfind("escalated", 0) == 0; }),
    1);
}

CAF_TEST(replace_vm_goes_to_the_provider_hook_and_escalates_to_support_unanswered) {
  settings->remediation.enabled = true;
  settings->remediation.options.replace = control::replace_target::provider_hook;
  jobs_only = true;
  start();
  auto e = xid("node-1", "GPU-a");
  e.action = recommended_action::replace_vm;
  post({e});
  CAF_CHECK(cordoned("node-1"));
  CAF_CHECK_EQUAL(crs("terminatenodes").size(), 0u);
  auto n = node("node-1");
  auto annotations = n["metadata"].value("annotations", json::object());
  CAF_CHECK(annotations.contains("vigil.dev/replace-requested"));
  advance(settings->remediation.escalation.verify_replace_timeout);
  auto phases = remediation_phases();
  CAF_CHECK(std::find(phases.begin(), phases.end(), "handed_to_provider replace")
            != phases.end());
  CAF_CHECK(std::find(phases.begin(), phases.end(), "manual ") != phases.end());
  CAF_CHECK(cordoned("node-1"));
}

CAF_TEST(a_pool_runs_at_most_its_budget_of_remediations_at_once) {
  settings->remediation.enabled = true;
  jobs_only = true;
  control::breaker_config budget;
  budget.max_concurrent_per_pool = 1; // nodes without the rack label share pool ""
  start(budget);
  post({reset_needed("node-1", "GPU-a")});
  post({reset_needed("node-2", "GPU-b")});
  CAF_CHECK(cordoned("node-2"));
  CAF_REQUIRE_EQUAL(crs("gpuresets").size(), 1u); // node-2's waits for the budget
  auto phases = remediation_phases();
  CAF_CHECK(std::find(phases.begin(), phases.end(), "held reset-GPU-b") != phases.end());
  cr_phase("gpuresets", crs("gpuresets")[0]["metadata"]["name"].get<std::string>(),
           "Succeeded");
  advance(std::chrono::seconds{10}); // node-1's poll sees it done: the budget is free
  CAF_CHECK_EQUAL(crs("gpuresets").size(), 1u);
  advance(settings->retry_max); // node-2 asks again
  CAF_CHECK_EQUAL(crs("gpuresets").size(), 2u);
}

// A node actor that goes down holding a remediation slot (crash, lost
// leadership) gives the slot back: the breaker monitors whoever holds one.
CAF_TEST(a_slot_whose_holder_is_gone_returns_to_the_pool) {
  control::breaker_config budget;
  budget.max_concurrent_per_pool = 1;
  start(budget);
  auto holder = sys.spawn(
    [](event_based_actor* s, actor breaker) -> behavior {
      s->request(breaker, infinite, remedy_atom::value, std::string("node-1"),
                 std::string("rack-a"))
        .then([](const std::string& refusal) { CAF_CHECK_EQUAL(refusal, ""); });
      return {[](int) {}}; // stays up, holding its slot
    },
    breaker);
  run();
  CAF_CHECK_NOT_EQUAL(
    ask(breaker, remedy_atom::value, std::string("node-2"), std::string("rack-a")), "");
  anon_send_exit(holder, exit_reason::kill);
  run();
  CAF_CHECK_EQUAL(
    ask(breaker, remedy_atom::value, std::string("node-2"), std::string("rack-a")), "");
}

CAF_TEST(a_dry_run_drain_keeps_the_remediation_dry_too) {
  settings->remediation.enabled = true;
  auto drain = std::make_shared<drain_settings>(*settings->drain);
  drain->dry_run = true;
  settings->drain = drain;
  jobs_only = true;
  start();
  add_pod("default", pod_object("job-a", "node-1", {"GPU-a"}));
  post({reset_needed("node-1", "GPU-a")});
  CAF_CHECK(!terminating("default", "job-a"));
  CAF_CHECK_EQUAL(crs("gpuresets").size(), 0u); // the pod still holds the GPU
}

CAF_TEST(remediation_dry_run_journals_the_plan_and_creates_nothing) {
  settings->remediation.enabled = true;
  settings->remediation.dry_run = true;
  jobs_only = true;
  start();
  post({reset_needed("node-1", "GPU-a")});
  CAF_CHECK(cordoned("node-1")); // the quarantine stage is live
  CAF_CHECK_EQUAL(crs("gpuresets").size(), 0u);
  auto phases = remediation_phases();
  CAF_CHECK(std::find(phases.begin(), phases.end(), "created reset-GPU-a")
            != phases.end());
  CAF_CHECK_EQUAL(remediation_annotation("node-1"), "");
}

CAF_TEST(a_terminatenode_nobody_finishes_times_out_to_an_operator) {
  settings->remediation.enabled = true;
  jobs_only = true;
  start();
  auto e = xid("node-1", "GPU-a");
  e.action = recommended_action::replace_vm;
  post({e});
  CAF_REQUIRE_EQUAL(crs("terminatenodes").size(), 1u);
  // A replacement takes hours: the reset/reboot timeout does not apply.
  advance(settings->remediation.cr_timeout + std::chrono::seconds{10});
  auto phases = remediation_phases();
  CAF_CHECK(std::find(phases.begin(), phases.end(), "failed replace") == phases.end());
  advance(settings->remediation.terminate_timeout - settings->remediation.cr_timeout);
  phases = remediation_phases();
  CAF_CHECK(std::find(phases.begin(), phases.end(), "failed replace") != phases.end());
  CAF_CHECK(std::find(phases.begin(), phases.end(), "manual ") != phases.end());
  CAF_CHECK(cordoned("node-1"));
}

CAF_TEST(contact_support_creates_nothing_and_keeps_the_quarantine) {
  settings->remediation.enabled = true;
  jobs_only = true;
  start();
  auto e = xid("node-1", "GPU-a");
  e.action = recommended_action::contact_support;
  post({e});
  CAF_CHECK(cordoned("node-1"));
  CAF_CHECK_EQUAL(crs("gpuresets").size() + crs("rebootnodes").size(), 0u);
  auto phases = remediation_phases();
  CAF_REQUIRE_EQUAL(phases.size(), 1u);
  CAF_CHECK_EQUAL(phases[0], "manual ");
  auto events = store->list(*store->find_type("", "v1", "events"), "default", {});
  CAF_REQUIRE(events.ok());
  bool told = false;
  for (const auto& ev : (*events.value)["items"])
    told = told || ev.value("reason", "") == "RemediationNeedsOperator";
  CAF_CHECK(told);
}

// ---- the janitor's controllers (issue #8 item 4), the test playing the
// GPU operator, the Job controller and the kubelet ----

CAF_TEST(the_janitor_resets_a_gpu_and_restores_only_its_own_labels) {
  jobs_only = true;
  auto metrics = std::make_shared<janitor_metrics>();
  janitor_settings js;
  js.metrics = metrics;
  auto n = node("node-1");
  for (auto label : janitor::operand_deploy_labels)
    n["metadata"]["labels"][std::string{label}] = "true";
  CAF_REQUIRE(store->update(*nodes(), "", "node-1", n, false).ok());
  json operand = pod_object("dcgm-xyz", "node-1", {}, {{"app", "nvidia-dcgm"}});
  add_pod("gpu-operator", operand);
  add_gpu_reset("reset-1", "node-1", "GPU-a");
  auto janitor = sys.spawn(janitor_controllers, js, gateway, time);
  run();
  auto labels = node("node-1")["metadata"]["labels"];
  CAF_CHECK_EQUAL(labels.value("nvidia.com/gpu.deploy.dcgm", ""), "false");
  auto status = [&] { return crs("gpuresets")[0]["status"]; };
  CAF_CHECK_EQUAL(status().value("phase", std::string{}), "TearingDown");
  // The GPU operator removes its operand.
  store->remove(*pods(), "gpu-operator", "dcgm-xyz", {});
  kubelet_finishes();
  advance(js.poll);
  CAF_CHECK_EQUAL(status().value("phase", std::string{}), "Resetting");
  auto job_name = status()["jobName"].get<std::string>();
  auto job =
    store->get(*store->find_type("batch", "v1", "jobs"), "vigil-system", job_name);
  CAF_REQUIRE(job.ok());
  auto pod_spec = (*job.value)["spec"]["template"]["spec"];
  CAF_CHECK_EQUAL(pod_spec.value("nodeName", ""), "node-1");
  // Someone else sets one of the labels while the reset runs.
  CAF_REQUIRE(
    store
      ->patch(*nodes(), "", "node-1",
              json{{"metadata",
                    {{"labels", {{"nvidia.com/gpu.deploy.dcgm-exporter", "pinned"}}}}}},
              kube::patch_type::merge, false)
      .ok());
  // The Job completes.
  job_status(job_name, {{"succeeded", 1},
                        {"conditions", {{{"type", "Complete"}, {"status", "True"}}}}});
  advance(js.poll);
  labels = node("node-1")["metadata"]["labels"];
  CAF_CHECK_EQUAL(labels.value("nvidia.com/gpu.deploy.dcgm", ""), "true");
  CAF_CHECK_EQUAL(labels.value("nvidia.com/gpu.deploy.device-plugin", ""), "true");
  CAF_CHECK_EQUAL(labels.value("nvidia.com/gpu.deploy.dcgm-exporter", ""), "pinned");
  // seed 001 step 5: not done before the operands run again.
  advance(js.poll);
  CAF_CHECK_EQUAL(status().value("phase", std::string{}), "Restoring");
  // The GPU operator redeploys what the labels ask for (not the exporter:
  // its label is someone else's now); one by one.
  add_pod("gpu-operator", pod_object("dcgm-abc", "node-1", {}, {{"app", "nvidia-dcgm"}}));
  add_pod("gpu-operator", pod_object("device-plugin-abc", "node-1", {},
                                     {{"app", "nvidia-device-plugin-daemonset"}}));
  advance(js.poll);
  CAF_CHECK_EQUAL(status().value("phase", std::string{}), "Restoring");
  add_pod("gpu-operator",
          pod_object("gfd-abc", "node-1", {}, {{"app", "gpu-feature-discovery"}}));
  advance(js.poll);
  CAF_CHECK_EQUAL(status().value("phase", std::string{}), "Succeeded");
  CAF_CHECK(!crs("gpuresets")[0]["metadata"].contains("finalizers")
            || crs("gpuresets")[0]["metadata"]["finalizers"].empty());
  // seed 001 "Metrics", with its labels and status values.
  auto text = render_janitor_metrics(*metrics);
  const std::string gpu =
    "node=\"node-1\",gpu_type=\"NVIDIA-H100-80GB-HBM3\",gpu_id=\"GPU-a\"";
  CAF_CHECK(text.find("gpu_reset_requests_total{" + gpu + "} 1\n") != std::string::npos);
  CAF_CHECK(
    text.find("gpu_reset_requests_completed_total{" + gpu + ",status=\"success\"} 1\n")
    != std::string::npos);
  CAF_CHECK(text.find("gpu_reset_duration_seconds_count{node=\"node-1\",gpu_type="
                      "\"NVIDIA-H100-80GB-HBM3\",status=\"success\"} 1\n")
            != std::string::npos);
  anon_send_exit(janitor, exit_reason::user_shutdown);
  run();
}

CAF_TEST(the_janitor_restores_labels_after_a_failed_reset) {
  jobs_only = true;
  janitor_settings js;
  auto metrics = js.metrics;
  add_gpu_reset("reset-2", "node-2", "GPU-b");
  auto janitor = sys.spawn(janitor_controllers, js, gateway, time);
  run();
  advance(js.poll); // no operands: straight to the Job
  auto status = [&] { return crs("gpuresets")[0]["status"]; };
  CAF_REQUIRE_EQUAL(status().value("phase", std::string{}), "Resetting");
  auto job_name = status()["jobName"].get<std::string>();
  job_status(
    job_name,
    {{"failed", 1},
     {"conditions",
      {{{"type", "Failed"}, {"status", "True"}, {"reason", "BackoffLimitExceeded"}}}}});
  advance(js.poll);
  advance(js.poll);
  CAF_CHECK_EQUAL(status().value("phase", std::string{}), "Failed");
  CAF_CHECK_EQUAL(status().value("failureReason", std::string{}), "job_failed");
  auto labels = node("node-2")["metadata"]["labels"];
  for (auto label : janitor::operand_deploy_labels)
    CAF_CHECK(!labels.contains(std::string{label})); // absent before, absent again
  auto text = render_janitor_metrics(*metrics);
  CAF_CHECK(
    text.find("gpu_reset_requests_completed_total{node=\"node-2\",gpu_type="
              "\"NVIDIA-H100-80GB-HBM3\",gpu_id=\"GPU-b\",status=\"failure\"} 1\n")
    != std::string::npos);
  CAF_CHECK(text.find("gpu_reset_failure_reasons_total{node=\"node-2\",gpu_type="
                      "\"NVIDIA-H100-80GB-HBM3\",reason=\"job_failed\"} 1\n")
            != std::string::npos);
  anon_send_exit(janitor, exit_reason::user_shutdown);
  run();
}

CAF_TEST(the_janitor_calls_a_reboot_done_when_the_boot_id_changed_and_the_node_is_ready) {
  jobs_only = true;
  janitor_settings js;
  auto boot = [&](const std::string& id, const std::string& ready) {
    CAF_REQUIRE(
      store
        ->patch(*nodes(), "", "node-3",
                json{{"status",
                      {{"nodeInfo", {{"bootID", id}}},
                       {"conditions", {{{"type", "Ready"}, {"status", ready}}}}}}},
                kube::patch_type::merge, true)
        .ok());
  };
  boot("boot-1", "True");
  janitor_namespace();
  json cr = {{"apiVersion", "vigil.dev/v1alpha1"},
             {"kind", "RebootNode"},
             {"metadata", {{"name", "reboot-3"}}},
             {"spec", {{"nodeName", "node-3"}}}};
  CAF_REQUIRE(
    store->create(*store->find_type("vigil.dev", "v1alpha1", "rebootnodes"), "", cr)
      .ok());
  auto janitor = sys.spawn(janitor_controllers, js, gateway, time);
  run();
  auto status = [&] { return crs("rebootnodes")[0]["status"]; };
  CAF_CHECK_EQUAL(status().value("phase", std::string{}), "Rebooting");
  CAF_CHECK_EQUAL(status().value("bootIdBefore", std::string{}), "boot-1");
  boot("boot-2", "False"); // back, not Ready yet
  advance(js.poll);
  CAF_CHECK_EQUAL(status().value("phase", std::string{}), "Rebooting");
  boot("boot-2", "True");
  advance(js.poll);
  CAF_CHECK_EQUAL(status().value("phase", std::string{}), "Succeeded");
  CAF_CHECK_EQUAL(status().value("bootIdAfter", std::string{}), "boot-2");
  CAF_CHECK(render_janitor_metrics(*js.metrics)
              .find("reboot_node_requests_completed_total{node=\"node-3\",status="
                    "\"success\"} 1\n")
            != std::string::npos);
  anon_send_exit(janitor, exit_reason::user_shutdown);
  run();
}

// The API server with one status write of a GPUReset lost on the way (the
// client's timeout): every other request goes through to `gateway`.
struct lossy_gateway_state {
  std::string lose; ///< the path of the status write to lose, once
  bool lost = false;
  static inline const char* name = "lossy_gateway";
};

behavior lossy_gateway(stateful_actor<lossy_gateway_state>* self, actor gateway,
                       std::string lose) {
  self->state.lose = std::move(lose);
  return {
    [=](kube::kube_request& request) -> result<kube::kube_result> {
      auto& st = self->state;
      if (!st.lost && request.verb == "PATCH" && request.path == st.lose) {
        st.lost = true;
        kube::kube_error timeout;
        timeout.reason = "Transport";
        timeout.message = "timed out";
        return kube::kube_result{timeout};
      }
      auto rp = self->make_response_promise();
      self->request(gateway, infinite, std::move(request))
        .then([rp](kube::kube_result& r) mutable { rp.deliver(std::move(r)); });
      return rp;
    },
  };
}

// issue #20 item 6: deleting a GPUReset mid-reset brings the operands back;
// the janitor's finalizer holds the CR until the labels are restored.
CAF_TEST(a_gpureset_deleted_mid_reset_gets_its_labels_restored_before_it_goes) {
  jobs_only = true;
  janitor_settings js;
  auto n = node("node-1");
  for (auto label : janitor::operand_deploy_labels)
    n["metadata"]["labels"][std::string{label}] = "true";
  CAF_REQUIRE(store->update(*nodes(), "", "node-1", n, false).ok());
  add_pod("gpu-operator", pod_object("dcgm-xyz", "node-1", {}, {{"app", "nvidia-dcgm"}}));
  add_gpu_reset("reset-4", "node-1", "GPU-a");
  auto janitor = sys.spawn(janitor_controllers, js, gateway, time);
  run();
  auto cr = crs("gpuresets")[0];
  CAF_CHECK_EQUAL(cr["metadata"]["finalizers"],
                  json::array({"vigil.dev/restore-operand-labels"}));
  CAF_CHECK_EQUAL(cr["status"].value("phase", std::string{}), "TearingDown");
  CAF_CHECK_EQUAL(cr["status"]["savedLabels"].value("nvidia.com/gpu.deploy.dcgm", ""),
                  "true");
  CAF_CHECK_EQUAL(
    node("node-1")["metadata"]["labels"].value("nvidia.com/gpu.deploy.dcgm", ""),
    "false");
  // Someone deletes the CR: the API server only marks it.
  const auto* resets = store->find_type("vigil.dev", "v1alpha1", "gpuresets");
  CAF_REQUIRE(store->remove(*resets, "", "reset-4", {}).ok());
  CAF_CHECK(crs("gpuresets")[0]["metadata"].contains("deletionTimestamp"));
  advance(js.poll);
  CAF_CHECK(crs("gpuresets").empty());
  auto labels = node("node-1")["metadata"]["labels"];
  for (auto label : janitor::operand_deploy_labels)
    CAF_CHECK_EQUAL(labels.value(std::string{label}, ""), "true");
  anon_send_exit(janitor, exit_reason::user_shutdown);
  run();
}

// issue #20 item 6: a status write that is lost leaves the labels untouched;
// the saved values are never the "false" vigil writes.
CAF_TEST(a_lost_status_write_never_loses_the_labels_to_restore) {
  jobs_only = true;
  janitor_settings js;
  auto n = node("node-1");
  for (auto label : janitor::operand_deploy_labels)
    n["metadata"]["labels"][std::string{label}] = "true";
  CAF_REQUIRE(store->update(*nodes(), "", "node-1", n, false).ok());
  add_gpu_reset("reset-5", "node-1", "GPU-a");
  // The first status write of the GPUReset is lost.
  auto lossy =
    sys.spawn(lossy_gateway, gateway,
              std::string{"/apis/vigil.dev/v1alpha1/gpuresets/reset-5/status"});
  auto janitor = sys.spawn(janitor_controllers, js, lossy, time);
  run();
  CAF_REQUIRE(deref<stateful_actor<lossy_gateway_state>>(lossy).state.lost);
  auto labels = node("node-1")["metadata"]["labels"];
  for (auto label : janitor::operand_deploy_labels)
    CAF_CHECK_EQUAL(labels.value(std::string{label}, ""), "true"); // untouched
  CAF_CHECK(!crs("gpuresets")[0].contains("status")
            || crs("gpuresets")[0]["status"].value("phase", "") == "");
  advance(js.poll);
  auto status = crs("gpuresets")[0]["status"];
  CAF_CHECK_EQUAL(status.value("phase", std::string{}), "TearingDown");
  for (auto label : janitor::operand_deploy_labels)
    CAF_CHECK_EQUAL(status["savedLabels"].value(std::string{label}, ""), "true");
  labels = node("node-1")["metadata"]["labels"];
  CAF_CHECK_EQUAL(labels.value("nvidia.com/gpu.deploy.device-plugin", ""), "false");
  anon_send_exit(janitor, exit_reason::user_shutdown);
  anon_send_exit(lossy, exit_reason::user_shutdown);
  run();
}

CAF_TEST_FIXTURE_SCOPE_END()
