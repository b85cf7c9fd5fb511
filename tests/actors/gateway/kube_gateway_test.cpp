// The gateway over a real client and the API test server: replies as
// messages, and a watch that survives a dropped connection (resume from the
// last resourceVersion) and an expired one (410 → relist). Real sockets and
// threads, so a real actor system; every wait has a timeout instead of a sleep.
#include "actors/gateway/kube_gateway.hpp"

#include <set>
#include <string>

#include <caf/all.hpp>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/sim/kube/kube_test_server.hpp"

namespace vigil {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

const kube::api_resource nodes{"", "v1", "nodes", false};

json node(const std::string& name) {
  return {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", name}}}};
}

class gateway_test : public testing::Test {
protected:
  void SetUp() override {
    auto server = kube::kube_test_server::start({});
    ASSERT_TRUE(server.has_value()) << server.error().to_string();
    server_ = std::move(*server);
    add_node("gpu-1");
    kube::kube_client_options options;
    options.qps = 0;
    auto client =
      kube::make_kube_client_curl(kube::kube_connection{server_->url()}, options);
    ASSERT_TRUE(client.has_value()) << client.error().to_string();
    gateway_ =
      system_.spawn(kube_gateway, std::shared_ptr<kube::kube_client>(std::move(*client)),
                    std::make_shared<kube_gateway_stats>());
  }

  void TearDown() override {
    caf::anon_send_exit(gateway_, caf::exit_reason::user_shutdown);
  }

  void add_node(const std::string& name) {
    server_->with_store([&](kube::object_store& store) {
      auto created = store.create(*store.find_type("", "v1", "nodes"), "", node(name));
      ASSERT_TRUE(created.ok()) << created.error.message;
    });
  }

  // Watches every Node from `self`; returns the watch's id.
  std::uint64_t watch_all_nodes(caf::scoped_actor& self) {
    kube_watch_spec all_nodes;
    all_nodes.resource = nodes;
    std::uint64_t id = 0;
    self->request(gateway_, 10s, watch_atom::value, all_nodes)
      .receive([&](std::uint64_t watch) { id = watch; },
               [](const caf::error& e) { ADD_FAILURE() << caf::to_string(e); });
    return id;
  }

  // The next watch event, skipping bookmarks unless asked for.
  kube_watch_event next_event(caf::scoped_actor& self, bool bookmarks = false) {
    kube_watch_event out;
    for (int i = 0; i < 10; ++i) {
      bool got = false;
      self->receive([&](kube_watch_event& e) { out = std::move(e), got = true; },
                    caf::after(10s) >> [&] { ADD_FAILURE() << "no watch event"; });
      if (!got || bookmarks || out.type != "BOOKMARK")
        return out;
    }
    return out;
  }

  // Actors end asynchronously: looks again every 10 ms, for 10 s at most
  // (CAF's await_running_count_equal waits only for 0 or 1).
  std::size_t running_becomes(caf::scoped_actor& self, std::size_t expected) {
    auto& registry = system_.registry();
    for (int i = 0; i < 1000 && registry.running() != expected; ++i)
      self->receive(caf::after(10ms) >> [] {});
    return registry.running();
  }

  caf::actor_system_config config_;
  caf::actor_system system_{config_};
  std::unique_ptr<kube::kube_test_server> server_;
  kube_gateway_handle gateway_;
};

TEST_F(gateway_test, requests_come_back_as_replies) {
  caf::scoped_actor self{system_};
  kube::kube_request get;
  get.path = kube::resource_path(nodes, "", "gpu-1");
  self->request(gateway_, 10s, get)
    .receive(
      [](const kube::kube_result& r) {
        ASSERT_TRUE(r.ok());
        EXPECT_EQ(json::parse(r.response().body)["metadata"]["name"], "gpu-1");
      },
      [](const caf::error& e) { FAIL() << caf::to_string(e); });
  get.path = kube::resource_path(nodes, "", "absent");
  self->request(gateway_, 10s, get)
    .receive([](const kube::kube_result& r) { EXPECT_TRUE(r.error().not_found()); },
             [](const caf::error& e) { FAIL() << caf::to_string(e); });
}

TEST_F(gateway_test, watch_lists_then_streams_resumes_and_relists) {
  caf::scoped_actor self{system_};
  const std::uint64_t id = watch_all_nodes(self);

  auto listed = next_event(self);
  EXPECT_EQ(listed.watch_id, id);
  ASSERT_EQ(listed.type, "LISTED");
  EXPECT_EQ((*listed.object)["items"].size(), 1u);

  add_node("gpu-2");
  auto added = next_event(self);
  EXPECT_EQ(added.type, "ADDED");
  EXPECT_EQ((*added.object)["metadata"]["name"], "gpu-2");

  // A dropped connection: the gateway resumes from gpu-2's version, so gpu-3
  // arrives once and nothing is listed again.
  server_->drop_watches();
  add_node("gpu-3");
  auto resumed = next_event(self);
  EXPECT_EQ(resumed.type, "ADDED");
  EXPECT_EQ((*resumed.object)["metadata"]["name"], "gpu-3");

  // The resumed stream registers with the server a moment after its first
  // event went out (seen under ASan on a loaded machine): ask until one comes.
  kube_watch_event bookmark;
  for (int i = 0; i < 40 && bookmark.type != "BOOKMARK"; ++i) {
    server_->send_bookmarks();
    self->receive([&](kube_watch_event& e) { bookmark = std::move(e); },
                  caf::after(500ms) >> [] {});
  }
  EXPECT_EQ(bookmark.type, "BOOKMARK");

  // History compacted while the stream was down: the resume gets 410 and
  // the gateway lists again, with everything that is there now.
  server_->expire_history();
  server_->drop_watches();
  auto relisted = next_event(self);
  ASSERT_EQ(relisted.type, "LISTED");
  EXPECT_EQ((*relisted.object)["items"].size(), 3u);
  add_node("gpu-4");
  EXPECT_EQ(next_event(self).type, "ADDED");
  self->send(gateway_, unwatch_atom::value, id);
}

// A list past one page (500) reaches the subscriber page by page, as the
// API server gives them: numbered, the last marked, and the stream after.
TEST_F(gateway_test, a_long_list_arrives_page_by_page) {
  for (int i = 2; i <= 1201; ++i)
    add_node("gpu-" + std::to_string(i));
  caf::scoped_actor self{system_};
  watch_all_nodes(self);

  std::set<std::string> names;
  for (std::size_t page = 0; page < 3; ++page) {
    auto listed = next_event(self);
    ASSERT_EQ(listed.type, "LISTED");
    EXPECT_EQ(listed.list_page, page);
    EXPECT_EQ(listed.last_page, page == 2);
    EXPECT_EQ((*listed.object)["items"].size(), page < 2 ? 500u : 201u);
    for (const auto& item : (*listed.object)["items"])
      names.insert(item["metadata"]["name"].get<std::string>());
  }
  EXPECT_EQ(names.size(), 1201u);
  add_node("gpu-1202");
  auto added = next_event(self);
  EXPECT_EQ(added.type, "ADDED");
  EXPECT_EQ((*added.object)["metadata"]["name"], "gpu-1202");
}

// The gateway reads one page ahead and no further: a subscriber still busy
// with page 0 holds the list at page 1, read and waiting (a fleet that
// spawns an actor per Node is not handed 100,000 of them at once, and the
// server prepares a page while the one before is taken).
TEST_F(gateway_test, the_list_is_read_one_page_ahead_of_the_subscriber_and_no_further) {
  for (int i = 2; i <= 1001; ++i)
    add_node("gpu-" + std::to_string(i));
  caf::scoped_actor self{system_};
  watch_all_nodes(self);

  // Take page 0 without answering it yet (the promise is held).
  caf::response_promise busy;
  self->receive(
    [&](kube_watch_event& e) {
      EXPECT_EQ(e.list_page, 0u);
      busy = self->make_response_promise();
    },
    caf::after(10s) >> [] { ADD_FAILURE() << "no first page"; });
  ASSERT_FALSE(busy.async()) << "page 0 came as a plain message, not a request";

  // Page 1 is read while page 0 is held (the server serves its LIST).
  for (int i = 0; i < 1000 && server_->requests_served("GET") < 2; ++i)
    self->receive(caf::after(10ms) >> [] {});
  ASSERT_EQ(server_->requests_served("GET"), 2u);
  // One more request through the gateway: the server has served pages 0
  // and 1 and this GET, and no page 2 (read only once page 1 is handed).
  kube::kube_request get;
  get.path = kube::resource_path(nodes, "", "gpu-1");
  self->request(gateway_, 10s, get)
    .receive([](const kube::kube_result& r) { EXPECT_TRUE(r.ok()); },
             [](const caf::error& e) { FAIL() << caf::to_string(e); });
  EXPECT_EQ(server_->requests_served("GET"), 3u);

  busy.deliver(caf::unit);
  for (std::size_t page = 1; page < 3; ++page) {
    auto listed = next_event(self);
    ASSERT_EQ(listed.type, "LISTED");
    EXPECT_EQ(listed.list_page, page);
  }
}

// A watch's decoder hands the gateway the line decoded, its object shared
// for the subscriber, or why it is not a watch event.
TEST(watch_decoder, a_line_is_decoded_for_the_gateway_or_named_for_what_it_is_not) {
  auto modified = decode_for_gateway(
    R"({"type":"MODIFIED","object":{"kind":"Node","metadata":{"name":"gpu-1",)"
    R"("resourceVersion":"42"}}})");
  EXPECT_EQ(modified.type, "MODIFIED");
  ASSERT_TRUE(modified.object);
  EXPECT_EQ((*modified.object)["metadata"]["name"], "gpu-1");
  EXPECT_EQ(modified.resource_version, "42");
  EXPECT_TRUE(modified.problem.empty());

  auto gone = decode_for_gateway(
    R"({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired"}})");
  EXPECT_EQ(gone.type, "ERROR");
  EXPECT_EQ(gone.status_code, 410);

  auto garbage = decode_for_gateway("{\"type\": \"MODIFIED\", \"obj");
  EXPECT_TRUE(garbage.type.empty());
  EXPECT_FALSE(garbage.object);
  EXPECT_NE(garbage.problem.find("not JSON"), std::string::npos) << garbage.problem;
  EXPECT_EQ(garbage.bytes, 25u);

  auto unknown = decode_for_gateway(R"({"type":"RENAMED","object":{}})");
  EXPECT_TRUE(unknown.type.empty());
  EXPECT_NE(unknown.problem.find("RENAMED"), std::string::npos) << unknown.problem;
}

// Each watch has a decoder actor beside the gateway; it ends with its watch
// (unwatch), and the rest end with the gateway.
TEST_F(gateway_test, a_watchs_decoder_ends_with_its_watch_and_with_the_gateway) {
  auto& registry = system_.registry();
  caf::scoped_actor self{system_};
  const auto before = registry.running();
  const std::uint64_t first = watch_all_nodes(self);
  EXPECT_EQ(next_event(self).type, "LISTED");
  watch_all_nodes(self);
  EXPECT_EQ(next_event(self).type, "LISTED");
  EXPECT_EQ(registry.running(), before + 2);
  // The stream still delivers through the decoder.
  add_node("gpu-2");
  for (int seen = 0; seen < 2; ++seen)
    EXPECT_EQ(next_event(self).type, "ADDED");

  self->send(gateway_, unwatch_atom::value, first);
  EXPECT_EQ(running_becomes(self, before + 1), before + 1);
  caf::anon_send_exit(gateway_, caf::exit_reason::user_shutdown);
  // The gateway and its last decoder.
  EXPECT_EQ(running_becomes(self, before - 1), before - 1);
}

// A subscriber that quits without unwatching takes its watch with it: the
// watch's decoder ends, and its stream is stopped with it (end_watch).
// Before, both stayed for as long as the gateway lived, and a subscriber
// restarted in a loop piled up connections to the API server.
TEST_F(gateway_test, a_watch_ends_with_its_subscriber) {
  auto& registry = system_.registry();
  caf::scoped_actor self{system_};
  const auto before = registry.running();
  auto watcher = [](caf::event_based_actor* sub, kube_gateway_handle gateway,
                    caf::actor told) -> caf::behavior {
    kube_watch_spec all_nodes;
    all_nodes.resource = nodes;
    sub->request(gateway, 10s, watch_atom::value, all_nodes).then([](std::uint64_t) {});
    return {
      [=](const kube_watch_event& event) {
        if (event.type != "LISTED")
          return;
        sub->send(told, event.type);
        sub->quit();
      },
    };
  };
  auto subscriber = system_.spawn(watcher, gateway_, caf::actor{self});
  self->monitor(subscriber);
  std::string listed;
  self->receive([&](const std::string& type) { listed = type; },
                caf::after(10s) >> [] { ADD_FAILURE() << "nothing listed"; });
  EXPECT_EQ(listed, "LISTED");
  self->receive([](const caf::down_msg&) {},
                caf::after(10s) >>
                  [] { ADD_FAILURE() << "the subscriber did not quit"; });
  // Neither the subscriber nor the watch's decoder (ended with its stream).
  EXPECT_EQ(running_becomes(self, before), before);
  // The gateway goes on serving the others.
  watch_all_nodes(self);
  EXPECT_EQ(next_event(self).type, "LISTED");
}

} // namespace
} // namespace vigil
