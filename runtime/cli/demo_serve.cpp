// `vigil demo --serve`: the simulated cluster and the control plane in real
// time until interrupted. The API test server answers kubectl, the ingest
// endpoint takes anyone's HealthEvents, and a read-only introspection API
// shows what vigil holds: /api/nodes, /api/nodes/{name}, /api/actors,
// /api/breaker.
#include "runtime/cli/demo_serve.hpp"

#include <cstdio>
#include <deque>
#include <fstream>

#include <caf/all.hpp>

#include "actors/control/console/console_api.hpp" // http::request as a message
#include "actors/control/node/node_actor.hpp"
#include "actors/control/node/node_resource.hpp"
#include "actors/control/remediation/remediation_state.hpp"
#include "actors/journal/journal_messages.hpp"
#include "actors/protocol/atoms.hpp"
#include "actors/protocol/control_messages.hpp"
#include "messages/json_path.hpp"
#include "runtime/actor_clock.hpp"
#include "runtime/bootstrap.hpp"
#include "runtime/control_plane.hpp"
#include "runtime/http/http_host.hpp"
#include "runtime/logging.hpp"
#include "runtime/replay/replay_analysis.hpp"
#include "runtime/sim/cluster_simulator.hpp"
#include "runtime/sim/kube/kube_test_server.hpp"
#include "runtime/sim/kube/test_certificates.hpp"

namespace vigil::demo {

namespace {

using json = nlohmann::json;

// 32 hex digits from the kernel's generator; "" when it cannot be read.
std::string random_token() {
  unsigned char bytes[16] = {};
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  if (!urandom.read(reinterpret_cast<char*>(bytes), sizeof bytes))
    return {};
  std::string out;
  char hex[3];
  for (auto b : bytes) {
    std::snprintf(hex, sizeof hex, "%02x", b);
    out += hex;
  }
  return out;
}

// An annotation holding JSON, parsed (its text when not JSON); `absent` when
// the node has none.
json annotation_json(const json& node, const char* key, json absent = nullptr) {
  const json* a = json_at(node, {"metadata", "annotations", key});
  if (a == nullptr || !a->is_string())
    return absent;
  auto parsed = json::parse(a->get<std::string>(), nullptr, false);
  return parsed.is_discarded() ? json(a->get<std::string>()) : parsed;
}

json node_entry(const json& node) {
  const json* unschedulable = json_at(node, {"spec", "unschedulable"});
  const json* taints = json_at(node, {"spec", "taints"});
  return {
    {"name", json_text(node, {"metadata", "name"})},
    {"cordoned", unschedulable != nullptr && unschedulable->is_boolean()
                   && unschedulable->get<bool>()},
    {"cordonedByVigil",
     json_at(node, {"metadata", "annotations", control::node_annotation::cordoned})
       != nullptr},
    {"taints", taints != nullptr ? *taints : json::array()},
    {"activeEvents",
     annotation_json(node, control::node_annotation::quarantine, json::array())},
    {"remediation", annotation_json(node, control::remediation_state_annotation.data())}};
}

struct introspection_state {
  kube::kube_test_server* api = nullptr;
  control_actors actors;
  caf::actor simulator;
  std::shared_ptr<journal_store> journal_reader; ///< its own connection
  cluster_spec spec;
  static inline const char* name = "introspection";
};

using introspection_actor = caf::stateful_actor<introspection_state>;

http::response json_reply(int status, const json& body) {
  http::response r;
  r.status = status;
  r.body = body.dump(2) + "\n";
  return r;
}

json list_nodes(introspection_actor* self) {
  json out = json::array();
  self->state.api->with_store([&](kube::object_store& store) {
    auto nodes = store.list(*store.find_type("", "v1", "nodes"), "", {});
    if (nodes.ok())
      for (const auto& n : (*nodes.value)["items"])
        out.push_back(node_entry(n));
  });
  return out;
}

// How many of a node's journal rows /api/nodes/{name} shows: its newest.
constexpr std::size_t timeline_rows = 1000;

// The node's newest `count` journal rows, oldest first (the store reads
// forward from a seq, so page through and keep the tail).
std::deque<journal_record> latest_rows(journal_store& journal, const std::string& node,
                                       std::size_t count) {
  std::deque<journal_record> tail;
  journal_query query;
  query.node = node;
  query.limit = count;
  for (;;) {
    auto rows = journal.read(query);
    if (!rows || rows->empty())
      return tail;
    for (auto& r : *rows) {
      query.after_seq = r.seq;
      tail.push_back(std::move(r));
      if (tail.size() > count)
        tail.pop_front();
    }
    if (rows->size() < count)
      return tail;
  }
}

// /api/nodes/{name}: the node, its GPUs, NIC ports, pods and journal timeline.
void describe_node(introspection_actor* self, const std::string& name,
                   http::responder reply) {
  auto& st = self->state;
  json out;
  st.api->with_store([&](kube::object_store& store) {
    auto node = store.get(*store.find_type("", "v1", "nodes"), "", name);
    if (!node.ok())
      return;
    out = node_entry(*node.value);
    kube::list_options on_node;
    on_node.field_selector = "spec.nodeName=" + name;
    json pods = json::array();
    auto listed = store.list(*store.find_type("", "v1", "pods"), "", on_node);
    if (listed.ok())
      for (const auto& p : (*listed.value)["items"])
        pods.push_back(
          {{"namespace", json_text(p, {"metadata", "namespace"})},
           {"name", json_text(p, {"metadata", "name"})},
           {"phase", json_text(p, {"status", "phase"})},
           {"terminating", json_at(p, {"metadata", "deletionTimestamp"}) != nullptr}});
    out["pods"] = pods;
  });
  if (out.is_null())
    return reply(json_reply(404, {{"error", "no such node: " + name}}));
  // GPUs and NIC ports exist only for the nodes the simulator made.
  const int index = node_number(name);
  const bool simulated = index >= 1 && index <= st.spec.nodes;
  json gpus = json::array();
  if (simulated)
    for (const auto& g : node_metadata(st.spec, index).gpus)
      gpus.push_back(
        {{"index", g.gpu_id}, {"uuid", g.uuid}, {"pciAddress", g.pci_address}});
  out["gpus"] = gpus;
  json timeline = json::array();
  for (const auto& r : latest_rows(*st.journal_reader, name, timeline_rows)) {
    auto body = json::parse(r.body, nullptr, false);
    timeline.push_back({{"seq", r.seq},
                        {"recordedAt", format_rfc3339(r.recorded_at)},
                        {"kind", r.kind},
                        {"body", body.is_discarded() ? json(r.body) : body}});
  }
  out["timeline"] = timeline;
  if (!simulated) {
    out["nicPorts"] = json::array();
    return reply(json_reply(200, out));
  }
  self->request(st.simulator, std::chrono::seconds{5}, summary_atom::value, index)
    .then(
      [=](const std::string& ports) mutable {
        out["nicPorts"] = json::parse(ports, nullptr, false);
        reply(json_reply(200, out));
      },
      [=](const caf::error&) mutable {
        out["nicPorts"] = nullptr;
        reply(json_reply(200, out));
      });
}

// /api/actors: each actor's own report of its mailbox (only an actor may read
// its mailbox); node actors through the fleet.
void list_actors(introspection_actor* self, http::responder reply) {
  auto& st = self->state;
  struct gather {
    json actors = json::array();
    std::size_t waiting = 0;
    http::responder reply;
  };
  auto g = std::make_shared<gather>();
  g->reply = std::move(reply);
  std::vector<std::pair<std::string, std::string>> nodes; // (name, kind)
  for (const auto& n : list_nodes(self))
    nodes.emplace_back(n["name"].get<std::string>(), "node");
  auto done = [g] {
    if (--g->waiting == 0)
      g->reply(json_reply(200, g->actors));
  };
  auto ask = [&](const auto& who, const std::string& name, const std::string& kind,
                 auto... request) {
    ++g->waiting;
    self->request(who, std::chrono::seconds{5}, request...)
      .then(
        [=](const std::string& summary) {
          auto s = json::parse(summary, nullptr, false);
          g->actors.push_back({{"name", name},
                               {"kind", kind},
                               {"mailboxDepth", s.value("mailboxDepth", json())}});
          done();
        },
        [=](const caf::error&) {
          g->actors.push_back(
            {{"name", name}, {"kind", kind}, {"mailboxDepth", nullptr}});
          done();
        });
  };
  ++g->waiting; // until every request is out
  ask(st.actors.fleet, "fleet", "fleet", summary_atom::value);
  ask(st.actors.breaker, "breaker", "breaker", summary_atom::value);
  ask(st.actors.ingest, "ingest", "ingest", stats_atom::value);
  ++g->waiting;
  self->request(st.actors.journal, std::chrono::seconds{5}, stats_atom::value)
    .then(
      [=](const journal_stats& s) {
        g->actors.push_back(
          {{"name", "journal"}, {"kind", "journal"}, {"mailboxDepth", s.mailbox_depth}});
        done();
      },
      [=](const caf::error&) {
        g->actors.push_back(
          {{"name", "journal"}, {"kind", "journal"}, {"mailboxDepth", nullptr}});
        done();
      });
  for (const auto& [name, kind] : nodes)
    ask(st.actors.fleet, "node/" + name, kind, summary_atom::value, name);
  done();
}

caf::behavior introspection(introspection_actor* self, kube::kube_test_server* api,
                            control_actors actors, caf::actor simulator,
                            std::shared_ptr<journal_store> journal_reader,
                            cluster_spec spec) {
  self->state.api = api;
  self->state.actors = std::move(actors);
  self->state.simulator = std::move(simulator);
  self->state.journal_reader = std::move(journal_reader);
  self->state.spec = spec;
  return {
    [=](http::request& req, http::responder& reply) {
      if (req.method != "GET")
        return reply(json_reply(405, {{"error", "read-only: GET only"}}));
      const std::string nodes_prefix = "/api/nodes/";
      if (req.path == "/api/nodes")
        return reply(json_reply(200, list_nodes(self)));
      if (req.path.rfind(nodes_prefix, 0) == 0)
        return describe_node(self, req.path.substr(nodes_prefix.size()),
                             std::move(reply));
      if (req.path == "/api/actors")
        return list_actors(self, std::move(reply));
      if (req.path == "/api/breaker") {
        self
          ->request(self->state.actors.breaker, std::chrono::seconds{5},
                    summary_atom::value)
          .then(
            [=](const std::string& s) {
              reply(json_reply(200, json::parse(s, nullptr, false)));
            },
            [=](const caf::error& e) {
              reply(json_reply(503, {{"error", caf::to_string(e)}}));
            });
        return;
      }
      reply(json_reply(
        404, {{"error", "no such endpoint: " + req.path},
              {"endpoints",
               {"/api/nodes", "/api/nodes/{name}", "/api/actors", "/api/breaker"}}}));
    },
  };
}

} // namespace

int run_demo_serve(command_context& ctx, const scenario& plan,
                   const std::string& journal) {
  auto fail = [&](const failure& f) {
    ctx.err << "vigil demo --serve: " << f.to_string() << "\n";
    return 1;
  };
  block_handled_signals(); // before the API server's and client's threads
  const auto api_token = random_token();
  const auto ingest_token = random_token();
  if (api_token.empty() || ingest_token.empty())
    return fail({"--serve", "cannot read /dev/urandom for the demo's tokens"});
  // HTTPS: kubectl sends a bearer token over TLS only.
  auto pki = kube::make_test_pki();
  if (!pki)
    return fail(pki.error());
  std::string scratch = (std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp");
  scratch += "/vigil-demo-XXXXXX";
  if (mkdtemp(scratch.data()) == nullptr)
    return fail({"--serve", "no temporary directory for the demo's files"});
  const auto ca_file = scratch + "/ca.crt";
  std::ofstream(ca_file) << pki->ca_cert_pem;
  kube::test_server_options server_options;
  server_options.tls = true;
  server_options.cert_pem = pki->server_cert_pem;
  server_options.key_pem = pki->server_key_pem;
  server_options.tokens = {api_token};
  auto api = kube::kube_test_server::start(server_options);
  if (!api)
    return fail(api.error());
  std::shared_ptr<kube::kube_test_server> server = std::move(*api);
  simulator_settings sim;
  sim.spec.nodes = plan.nodes;
  sim.seed = plan.seed;
  sim.reset_min = plan.reset_job.low;
  sim.reset_max = plan.reset_job.high;
  sim.reboot_min = plan.reboot_job.low;
  sim.reboot_max = plan.reboot_job.high;
  server->with_store([&](kube::object_store& s) { populate(s, sim.spec); });

  const std::string journal_url =
    journal.empty() ? "sqlite:" + scratch + "/journal.db" : journal;
  auto writer_store = make_journal_store(journal_url);
  if (!writer_store)
    return fail(writer_store.error());
  if (auto opened = (*writer_store)->open(); !opened)
    return fail(opened.error());
  auto reader_store = make_journal_store(journal_url);
  if (!reader_store)
    return fail(reader_store.error());
  if (auto opened = (*reader_store)->open(); !opened)
    return fail(opened.error());
  if (auto last = (*writer_store)->last_seq(); last && *last > 0)
    return fail(
      {"--journal", (*writer_store)->describe()
                      + " already holds rows: the demo needs an empty journal"});
  std::shared_ptr<journal_store> journal_db = std::move(*writer_store);
  std::shared_ptr<journal_store> journal_reader = std::move(*reader_store);

  kube::kube_connection connection(server->url());
  connection.token = api_token;
  connection.ca_data = pki->ca_cert_pem;
  connection.source = "the simulated cluster";
  auto client = kube::make_kube_client_curl(connection, kube::kube_client_options{});
  if (!client)
    return fail(client.error());
  std::shared_ptr<kube::kube_client> kube_client = std::move(*client);
  auto catalog = agent::xid_catalog::load(agent::xid_catalog::default_dir());
  if (!catalog)
    return fail(catalog.error());

  auto config = ctx.config;
  config.journal.url = journal_url;
  config.control.leader_election = false;
  config.control.dry_run = false;
  config.janitor.in_process = true;

  return run_process(config, [&](process_context& p) -> status {
    auto time = std::make_shared<caf_clock>(p.system.clock(), system_now());
    control_plane_options plane_options;
    plane_options.replica_identity = "vigil-demo";
    auto plane =
      spawn_control_plane(p.system, config, journal_db, kube_client, time, plane_options);
    if (!plane)
      return plane.error();
    for (const auto& [name, actor] : plane->named)
      caf::anon_send(p.root, adopt_atom::value, name, actor);
    auto record = std::make_shared<simulation_record>();
    auto simulator = p.system.spawn(
      cluster_simulator, sim,
      store_access([server](const std::function<void(kube::object_store&)>& f) {
        server->with_store(f);
      }),
      plane->actors.ingest, *catalog, std::shared_ptr<const clock>(time), record);
    auto inspector = p.system.spawn<caf::detached>(
      introspection, server.get(), plane->actors, simulator, journal_reader, sim.spec);
    auto endpoints_actor = p.system.spawn(endpoints, plane->actors);
    auto console = spawn_console(p.system, plane->actors, fleet_at, plane->named);
    control_http_options http_options;
    http_options.console = console.api;
    http_options.console_open = true; // loopback only, like the rest of the demo
    http_options.token = ingest_token;
    http_options.limits.max_body_bytes = config.ingest.max_body_bytes;
    http_options.limits.max_line_bytes = config.ingest.limits.max_event_bytes;
    http_options.limits.event = config.ingest.limits;
    http_options.alertmanager = config.alertmanager;
    auto control_handler =
      make_control_handler(plane->actors, endpoints_actor, http_options);
    http::server_options listen;
    listen.max_body_bytes = config.ingest.max_body_bytes;
    auto http_server = http::server::start(
      listen, [control_handler, inspector](http::request req, http::responder reply) {
        if (req.path.rfind("/api/", 0) == 0 && !is_console_path(req.path))
          caf::anon_send(inspector, std::move(req), std::move(reply));
        else
          control_handler(std::move(req), std::move(reply));
      });
    if (!http_server)
      return http_server.error();
    const auto base = "http://127.0.0.1:" + std::to_string((*http_server)->port());
    ctx.out << "API server:    " << server->url() << "  token " << api_token << "\n"
            << "  kubectl --server " << server->url() << " --certificate-authority "
            << ca_file << " --token " << api_token << " get nodes\n"
            << "ingest:        " << base << "/v1/events  token " << ingest_token << "\n"
            << "console:       " << base << "/console/\n"
            << "introspection: " << base << "/api/nodes\n"
            << "journal:       " << journal_db->describe() << "\n"
            << "simulated cluster: " << sim.spec.nodes
            << " nodes of 8 GPUs; Ctrl-C stops the demo\n";
    ctx.out.flush();
    for (auto [name, actor] : {std::pair<const char*, caf::actor>{"simulator", simulator},
                               {"introspection", inspector},
                               {"console", console.api},
                               {"console_feed", console.feed},
                               {"endpoints", endpoints_actor}})
      caf::anon_send(p.root, adopt_atom::value, std::string(name), actor);
    caf::anon_send(p.root, adopt_atom::value, std::string("http"),
                   spawn_http_host(p.system, std::move(*http_server)));
    return ok(); // `server` outlives run_process: it stops after the actors
  });
}

} // namespace vigil::demo
