// The console's actors (actors/control/console): the feed writes committed
// journal rows to open streams by their filters, skips for a slow stream
// and says how many, forgets a closed one; the API answers the fleet, a
// node, the journal and the stream from the actors' own answers.
#define CAF_SUITE control_console
#include <caf/test/dsl.hpp>

#include <map>
#include <set>

#include "actors/control/console/console_api.hpp"
#include "actors/control/console/console_feed.hpp"
#include "runtime/replay/replay_analysis.hpp"
#include "tests/actors/control/control_fixture.hpp"

using namespace caf;
using namespace vigil;
using namespace vigil::test;
using nlohmann::json;

namespace {

// A client's stream as the feed sees it: what was sent, and a pending
// figure the test sets to play a slow client.
struct recording_stream : http::body_stream {
  std::vector<std::string> chunks;
  std::size_t pending = 0;
  bool is_closed = false;
  std::function<void()> closer;

  bool send(std::string chunk) override {
    if (is_closed)
      return false;
    chunks.push_back(std::move(chunk));
    return true;
  }
  std::size_t pending_bytes() const override { return pending; }
  bool closed() const override { return is_closed; }
  void end() override { close(); }
  void on_close(std::function<void()> callback) override { closer = std::move(callback); }
  void close() {
    is_closed = true;
    if (closer)
      closer();
  }
  std::string all() const {
    std::string out;
    for (const auto& c : chunks)
      out += c;
    return out;
  }
};

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + 1))
    ++n;
  return n;
}

struct console_fixture : control_fixture {
  actor feed;
  actor api;

  void start_console(console_feed_config config = {}) {
    start();
    config.keepalive = std::chrono::seconds(0); // no timer left for the shutdown
    feed = sys.spawn(console_feed, config, journal);
    api = sys.spawn(console_api,
                    console_actors{fleet, journal, feed, breaker, ingest, fleet_at, {}});
    run();
  }

  ~console_fixture() {
    for (auto* a : {&feed, &api})
      if (*a)
        anon_send_exit(*a, exit_reason::user_shutdown);
    run();
  }

  int open_streams() {
    auto figures = json::parse(ask(feed, summary_atom::value));
    return figures["streams"].get<int>();
  }

  std::shared_ptr<recording_stream> open(console::row_filter filter = {}) {
    auto s = std::make_shared<recording_stream>();
    self->send(feed, feed_open_atom::value, std::shared_ptr<http::body_stream>(s),
               filter);
    run();
    return s;
  }

  http::response get(const std::string& target, const std::string& method = "GET") {
    http::request req;
    req.method = method;
    req.target = target;
    const auto mark = target.find('?');
    req.path = target.substr(0, mark);
    req.query = mark == std::string::npos ? "" : target.substr(mark + 1);
    http::response got;
    got.status = 0;
    http::responder reply = [&got](http::response r) { got = std::move(r); };
    self->send(api, console_request_atom::value, req, reply);
    run();
    return got;
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(control_console_tests, console_fixture)

CAF_TEST(each_stream_gets_the_committed_rows_its_filter_wants) {
  start_console();
  auto all = open();
  auto node2 = open({"node-2", "", ""});
  auto xids = open({"", "event", "SysLogsXIDError"});
  post({reset_needed("node-1", "GPU-a"), reset_needed("node-2", "GPU-b")});
  const auto everything = all->all();
  CAF_CHECK(count_of(everything, "event: row") >= 4); // events, quarantines, drains
  CAF_CHECK(everything.find("\"node\":\"node-1\"") != std::string::npos);
  CAF_CHECK(node2->all().find("\"node\":\"node-1\"") == std::string::npos);
  CAF_CHECK(node2->all().find("\"node\":\"node-2\"") != std::string::npos);
  CAF_CHECK_EQUAL(count_of(xids->all(), "event: row"), 2u);
  CAF_CHECK(xids->all().find("\"kind\":\"quarantine\"") == std::string::npos);
  // Rows carry their seq as the SSE id, so a client can tell what it has.
  CAF_CHECK(everything.rfind("id: ", 0) == 0);
}

CAF_TEST(a_slow_stream_skips_rows_and_then_says_how_many) {
  start_console();
  auto slow = open({"", "event", ""});
  slow->pending = 2 << 20; // the client reads nothing
  post({reset_needed("node-1", "GPU-a")});
  CAF_CHECK(slow->chunks.empty());
  slow->pending = 0; // it caught up
  post({reset_needed("node-2", "GPU-b")});
  CAF_REQUIRE_EQUAL(slow->chunks.size(), 1u);
  CAF_CHECK_EQUAL(slow->chunks[0].rfind("event: skipped\ndata: {\"skipped\":1}", 0), 0u);
  CAF_CHECK_EQUAL(count_of(slow->chunks[0], "event: row"), 1u);
  auto figures = json::parse(ask(feed, summary_atom::value));
  CAF_CHECK_EQUAL(figures["skipped"], 1);
}

// A burst past a stream's rows per second: it is sent what its budget
// allows (of a batch, the newest rows), and after the next second's refill it is told how
// many it missed.
CAF_TEST(a_stream_over_its_rows_per_second_skips_and_then_says_how_many) {
  console_feed_config config;
  config.max_rows_per_second = 1;
  start_console(config);
  auto events = open({"", "event", ""});
  post({reset_needed("node-1", "GPU-a"), reset_needed("node-2", "GPU-b")});
  CAF_CHECK_EQUAL(count_of(events->all(), "event: row"), 1u);
  post({reset_needed("node-3", "GPU-c")}); // its budget is spent
  CAF_CHECK_EQUAL(count_of(events->all(), "event: row"), 1u);
  advance(std::chrono::seconds(1));
  post({reset_needed("node-4", "GPU-d")});
  CAF_CHECK_EQUAL(count_of(events->all(), "event: row"), 2u);
  CAF_CHECK(events->chunks.back().rfind(console::sse_skipped(2), 0) == 0);
  auto figures = json::parse(ask(feed, summary_atom::value));
  CAF_CHECK_EQUAL(figures["skipped"], 2);
  CAF_CHECK_EQUAL(figures["maxRowsPerSecond"], 1);
  CAF_CHECK(figures["messages"].value("handled", 0) > 0); // its own mailbox figures
}

CAF_TEST(a_closed_stream_is_forgotten) {
  start_console();
  auto gone = open();
  open();
  gone->close();
  run();
  CAF_CHECK_EQUAL(open_streams(), 1);
  post({reset_needed("node-1", "GPU-a")});
  CAF_CHECK(gone->chunks.empty());
}

CAF_TEST(the_api_answers_from_the_actors) {
  start_console();
  post({reset_needed("node-1", "GPU-a")});
  auto fleet_page = get("/api/v1/fleet");
  CAF_REQUIRE_EQUAL(fleet_page.status, 200);
  auto page = json::parse(fleet_page.body);
  CAF_REQUIRE_EQUAL(page["nodes"].size(), 4u);
  CAF_CHECK_EQUAL(page["nodes"][0]["name"], "node-1");
  CAF_CHECK_NOT_EQUAL(page["nodes"][0]["state"], "healthy");
  CAF_CHECK_EQUAL(page["nodes"][1]["state"], "healthy");
  CAF_CHECK_EQUAL(page["counts"]["healthy"], 3);
  CAF_CHECK(page["breaker"].contains("tripped"));
  CAF_CHECK(page["journal"]["committed"].get<int>() > 0);

  auto node_page = json::parse(get("/api/v1/nodes/node-1").body);
  CAF_CHECK_EQUAL(node_page["node"]["node"], "node-1");
  bool saw_event = false;
  bool saw_quarantine = false;
  for (const auto& row : node_page["timeline"]) {
    saw_event |= row["kind"] == "event" && row["check"] == "SysLogsXIDError";
    saw_quarantine |= row["kind"] == "quarantine";
  }
  CAF_CHECK(saw_event);
  CAF_CHECK(saw_quarantine);
  // Its GPUs: the one with the fault has an actor and an active event.
  auto gpus = node_page["node"]["gpus"];
  CAF_REQUIRE_EQUAL(gpus.size(), 1u);
  CAF_CHECK_EQUAL(gpus[0]["uuid"], "GPU-a");
  CAF_CHECK_EQUAL(gpus[0]["activeEvents"], 1);
  CAF_CHECK_EQUAL(gpus[0]["gpuActor"], true);
  CAF_CHECK(node_page["node"]["nicPorts"].is_array());
  CAF_CHECK_EQUAL(get("/api/v1/nodes/node-9").status, 404);

  auto events = json::parse(get("/api/v1/journal?kind=event&limit=10").body);
  CAF_CHECK_EQUAL(events["rows"].size(), 1u);
  auto after = json::parse(get("/api/v1/journal?since=" + events["next"].dump()).body);
  CAF_CHECK(after["rows"].empty());
  auto bad = get("/api/v1/journal?nodes=x");
  CAF_CHECK_EQUAL(bad.status, 400);
  CAF_CHECK(bad.body.find("nodes") != std::string::npos);
  CAF_CHECK_EQUAL(get("/api/v1/journal?limit=lots").status, 400);

  auto actors = json::parse(get("/api/v1/actors").body)["actors"];
  CAF_CHECK_EQUAL(actors.size(), 5u + 4u); // fleet, breaker, ingest, feed, journal; nodes
  std::set<std::string> names;
  for (const auto& a : actors)
    names.insert(a["name"].get<std::string>());
  for (const char* name : {"fleet", "breaker", "ingest", "console_feed", "journal",
                           "node/node-1", "node/node-4"})
    CAF_CHECK(names.count(name) == 1);
  // Each observed actor's mailbox figures (issue 18): node-1 handled the
  // event routed to it, and the fleet its routes and the summaries asked.
  for (const auto& a : actors) {
    const auto name = a["name"].get<std::string>();
    if (name == "node/node-1" || name == "fleet" || name == "ingest") {
      CAF_CHECK(a.value("handled", 0) > 0);
      CAF_CHECK(!a["messageTypes"].empty());
      CAF_CHECK(a["slowest"].contains("type"));
    }
    if (name.rfind("node/", 0) == 0)
      CAF_CHECK_EQUAL(a["restarts"], 0);
  }

  // The fleet then, rebuilt as `vigil replay --at` does.
  auto then = json::parse(get("/api/v1/history?at=2200-01-01T00:00:00Z").body);
  CAF_REQUIRE_EQUAL(then["nodes"].size(), 1u); // nodes with rows
  CAF_CHECK_EQUAL(then["nodes"][0]["name"], "node-1");
  CAF_CHECK_EQUAL(then["nodes"][0]["activeEvents"].size(), 1u);
  CAF_CHECK_EQUAL(then["complete"], true);
  auto before = json::parse(get("/api/v1/history?at=2000-01-01T00:00:00Z").body);
  CAF_CHECK(before["nodes"].empty());
  CAF_CHECK_EQUAL(get("/api/v1/history").status, 400);
  CAF_CHECK_EQUAL(get("/api/v1/history?at=yesterday").status, 400);
  CAF_CHECK_EQUAL(get("/api/v1/history?at=2999-01-01T00:00:00Z").status, 400);

  CAF_CHECK_EQUAL(get("/api/v1/fleet", "POST").status, 405);
  CAF_CHECK_EQUAL(get("/api/v1/nowhere").status, 404);
  auto html = get("/console/");
  CAF_CHECK_EQUAL(html.status, 200);
  CAF_CHECK_EQUAL(html.content_type, "text/html; charset=utf-8");
  CAF_CHECK(html.body.find("console.js") != std::string::npos);
  CAF_CHECK_EQUAL(get("/console/console.js").content_type,
                  "text/javascript; charset=utf-8");
  CAF_CHECK_EQUAL(get("/console").status, 301);
  CAF_CHECK_EQUAL(get("/console/secrets.txt").status, 404);

  auto stream = get("/api/v1/stream?node=node-1");
  CAF_CHECK_EQUAL(stream.status, 200);
  CAF_CHECK_EQUAL(stream.content_type, "text/event-stream");
  CAF_REQUIRE(static_cast<bool>(stream.stream));
  auto client = std::make_shared<recording_stream>();
  stream.stream(client); // what the server does once the header is out
  run();
  CAF_CHECK_EQUAL(open_streams(), 1);
  CAF_CHECK_EQUAL(get("/api/v1/stream?since=x").status, 400);
}

// The agent's heartbeat names each GPU's index and PCI address: the node page
// lists every GPU in nvidia-smi's order, the healthy ones too.
CAF_TEST(the_node_page_lists_the_gpus_the_agent_reports) {
  start_console();
  post({reset_needed("node-1", "GPU-a")});
  agent_gpu_facts facts;
  facts.product = "NVIDIA H100 80GB HBM3";
  facts.gpu_count = 2;
  facts.devices = {{1, "GPU-b", "0000:2a:00.0"}, {0, "GPU-a", "0000:18:00.0"}};
  self->send(fleet, gpu_facts_atom::value, std::string{"node-1"}, facts);
  run();
  auto gpus = json::parse(get("/api/v1/nodes/node-1").body)["node"]["gpus"];
  CAF_REQUIRE_EQUAL(gpus.size(), 2u);
  CAF_CHECK_EQUAL(gpus[0].value("uuid", ""), "GPU-a");
  CAF_CHECK_EQUAL(gpus[0].value("pci", ""), "0000:18:00.0");
  CAF_CHECK_EQUAL(gpus[0].value("activeEvents", -1), 1);
  CAF_CHECK_EQUAL(gpus[1].value("index", -1), 1);
  CAF_CHECK_EQUAL(gpus[1].value("activeEvents", -1), 0);
}

// A node with a long history shows its newest rows, not its first ones.
CAF_TEST(the_node_timeline_shows_the_newest_rows) {
  start_console();
  post({reset_needed("node-1", "GPU-a")});
  std::vector<journal_record> notes;
  for (int i = 0; i < 250; ++i)
    notes.push_back({0, time->wall_now(), "node-1", "note", "note-" + std::to_string(i),
                     R"({"n":)" + std::to_string(i) + "}"});
  CAF_REQUIRE(journal_db->append(notes).has_value());
  auto timeline = json::parse(get("/api/v1/nodes/node-1").body)["timeline"];
  CAF_REQUIRE_EQUAL(timeline.size(), 200u);
  CAF_CHECK_EQUAL(timeline[0]["body"].value("n", -1), 50);
  CAF_CHECK_EQUAL(timeline[199]["body"].value("n", -1), 249);
}

// Issue 18's supervision tree below the node: each gpu and nic_port actor
// answers for itself (mailbox depth, messages, state), listed under its
// node on request; the node page shows each NIC port's state and role from
// its nic_port actor.
CAF_TEST(a_nodes_own_actors_answer_for_themselves) {
  start_console();
  post({reset_needed("node-1", "GPU-a"), port_state("node-1", false, 0)});
  auto actors = json::parse(get("/api/v1/actors?node=node-1").body)["actors"];
  std::map<std::string, json> by_name;
  for (const auto& a : actors)
    by_name[a["name"].get<std::string>()] = a;
  CAF_REQUIRE(by_name.count("gpu/GPU-a") == 1);
  const auto gpu = by_name["gpu/GPU-a"];
  CAF_CHECK_EQUAL(gpu["kind"], "gpu");
  CAF_CHECK_EQUAL(gpu["parent"], "node/node-1");
  CAF_CHECK_EQUAL(gpu["mailboxDepth"], 0);
  CAF_CHECK(gpu.value("handled", 0) >= 1); // the event's correlation
  CAF_REQUIRE(by_name.count("nic_port/mlx5_0/1") == 1);
  const auto port = by_name["nic_port/mlx5_0/1"];
  CAF_CHECK_EQUAL(port["detail"]["state"], "DOWN");
  CAF_CHECK_EQUAL(port["detail"]["role"], "compute");
  CAF_CHECK_EQUAL(port["detail"]["linkDowned"], 1);
  // The journal and the feed answer actor_stats_atom too.
  for (const char* name : {"journal", "console_feed"}) {
    CAF_REQUIRE(by_name.count(name) == 1);
    CAF_CHECK(by_name[name].contains("handled"));
  }
  // Without `node`, no node's own actors; a wrong key is named.
  const auto plain = json::parse(get("/api/v1/actors").body);
  for (const auto& a : plain["actors"])
    CAF_CHECK(a["parent"] != "node/node-1");
  auto bad = get("/api/v1/actors?nod=node-1");
  CAF_CHECK_EQUAL(bad.status, 400);
  CAF_CHECK(bad.body.find("nod") != std::string::npos);

  auto page = json::parse(get("/api/v1/nodes/node-1").body);
  bool seen = false;
  for (const auto& a : page["actors"])
    if (a["kind"] == "nic_port") {
      seen = true;
      CAF_CHECK_EQUAL(a["port"], "mlx5_0/1");
      CAF_CHECK_EQUAL(a["state"], "DOWN");
      CAF_CHECK_EQUAL(a["physState"], "Disabled");
      CAF_CHECK_EQUAL(a["role"], "compute");
      CAF_CHECK(a.contains("downSince"));
    }
  CAF_CHECK(seen);
}

// "the drain (plan, evicted, waiting on a PDB)" and "the remediation
// workflow (attempt, cooldown, next rung)" of issue 18's node page: the drain
// actor answers pod by pod, a pod whose eviction a budget refused among them;
// the reboot that follows says its attempt and the ladder's next rung.
CAF_TEST(the_node_page_shows_a_drain_waiting_on_a_budget_and_the_next_rung) {
  add_pod("train", pod_object("w0", "node-1", {"GPU-a"}, {{"app", "train"}}));
  add_pod("train", pod_object("w1", "node-2", {"GPU-a"}, {{"app", "train"}}));
  add_pod("serve", pod_object("api", "node-1"));
  add_budget("train", "train", 2);
  settings->remediation.enabled = true;
  start_console();
  post({reboot_needed("node-1", "GPU-a")});
  auto page = json::parse(get("/api/v1/nodes/node-1").body);
  json drain;
  for (const auto& a : page["actors"])
    if (a["kind"] == "drain")
      drain = a;
  CAF_REQUIRE(drain.is_object());
  CAF_CHECK_EQUAL(drain["name"], "drain/full");
  CAF_CHECK_EQUAL(drain["phase"], "in_progress");
  CAF_CHECK_EQUAL(drain["evictions"], 1); // serve/api
  CAF_CHECK_EQUAL(drain["waitingToRetry"], 1);
  std::size_t refused = 0;
  for (const auto& pod : drain["pods"])
    refused += pod["pod"] == "w0" && pod["state"] == "retry_wait" ? 1 : 0;
  CAF_CHECK_EQUAL(refused, 1u);
  // The budget allows it once the owner scales up elsewhere; the drained node
  // is rebooted: attempt 1 of RESTART_VM, REPLACE_VM next.
  add_pod("train", pod_object("w2", "node-3", {"GPU-a"}, {{"app", "train"}}));
  advance(std::chrono::seconds{5});
  kubelet_finishes();
  advance(std::chrono::seconds{5});
  const auto after = json::parse(get("/api/v1/nodes/node-1").body);
  const auto& rem = after["node"]["remediation"];
  CAF_CHECK_EQUAL(rem.value("inFlight", ""), "restart");
  CAF_CHECK_EQUAL(rem.value("action", ""), "RESTART_VM");
  CAF_CHECK_EQUAL(rem.value("attempts", -1), 1);
  CAF_CHECK_EQUAL(rem.value("nextRung", ""), "REPLACE_VM");
}

// The fleet page is drawn from each node's tile (tile_atom), which carries
// only what a tile shows and agrees with the node's full summary.
CAF_TEST(a_tile_is_the_summary_cut_to_what_the_tile_shows) {
  start_console();
  post({reset_needed("node-1", "GPU-a")});
  self->send(fleet, tile_atom::value);
  run();
  std::vector<std::string> tiles;
  self->receive([&](std::vector<std::string>& t) { tiles = std::move(t); },
                [](const error& err) { CAF_FAIL("no tiles: " << to_string(err)); });
  CAF_REQUIRE_EQUAL(tiles.size(), 4u);
  json tile;
  for (const auto& t : tiles)
    if (json::parse(t)["node"] == "node-1")
      tile = json::parse(t);
  auto full = node_summary("node-1");
  CAF_CHECK(!tile.contains("gpus") && !tile.contains("messages"));
  for (const auto& [key, value] : tile.items())
    if (key != "remediation")
      CAF_CHECK_EQUAL(value, full[key]);
  CAF_CHECK_EQUAL(console::to_string(console::tile_of(tile).state),
                  console::to_string(console::tile_of(full).state));
}

CAF_TEST_FIXTURE_SCOPE_END()
