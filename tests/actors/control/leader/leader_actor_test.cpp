// The leader elector: only the Lease holder's fleet and ingest act; a
// standby takes over an expired Lease, a partitioned leader stops at its
// renew deadline, and an orderly stop releases the Lease.
#define CAF_SUITE control_leader
#include <caf/test/dsl.hpp>

#include "actors/control/leader/leader_actor.hpp"
#include "actors/control/leader/shard_assignment.hpp"
#include "actors/control/leader/shard_elector.hpp"
#include "tests/actors/control/control_fixture.hpp"

using namespace caf;
using namespace vigil;
using namespace vigil::test;
using nlohmann::json;

namespace {

// The path to the API server, which can be cut: while cut, requests are
// held unanswered (a partition); on healing they fail as the client's
// timeout would fail them.
struct partition_state {
  bool cut = false;
  std::vector<response_promise> held;
  static inline const char* name = "partition";
};

/// The gateway's protocol and (bool cut): cut or heal the path.
using partitionable_gateway = kube_gateway_handle::extend<reacts_to<bool>>;
/// The gateway's protocol and (int n): hold the next n writes back; 0: let
/// the held ones go.
using write_holding_gateway = kube_gateway_handle::extend<reacts_to<int>>;

partitionable_gateway::behavior_type
partitionable(stateful_actor<partition_state, partitionable_gateway::base>* self,
              kube_gateway_handle gateway) {
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
    [=](watch_atom atom, kube_watch_spec& spec) -> delegated<std::uint64_t> {
      return self->delegate(gateway, atom, std::move(spec));
    },
    [=](unwatch_atom atom, std::uint64_t id) { self->send(gateway, atom, id); },
  };
}

// The path to the API server with the next N Lease writes held back: reads
// pass, each held write (PUT, POST) waits until it is told 0, then they go on
// in order. So a test decides which answer comes back first.
struct write_hold_state {
  int to_hold = 0;
  std::vector<std::pair<kube::kube_request, response_promise>> held;
  static inline const char* name = "write_hold";
};

write_holding_gateway::behavior_type
write_holding(stateful_actor<write_hold_state, write_holding_gateway::base>* self,
              kube_gateway_handle gateway) {
  auto forward = [=](kube::kube_request request, response_promise rp) {
    self->request(gateway, infinite, std::move(request))
      .then([rp](kube::kube_result& r) mutable { rp.deliver(std::move(r)); });
  };
  return {
    [=](kube::kube_request& request) -> result<kube::kube_result> {
      auto rp = self->make_response_promise();
      if (self->state.to_hold > 0 && request.verb != "GET") {
        --self->state.to_hold;
        self->state.held.emplace_back(std::move(request), rp);
      } else {
        forward(std::move(request), rp);
      }
      return rp;
    },
    [=](int to_hold) {
      self->state.to_hold = to_hold;
      if (to_hold > 0)
        return;
      for (auto& [request, rp] : self->state.held)
        forward(std::move(request), rp);
      self->state.held.clear();
    },
    [=](watch_atom atom, kube_watch_spec& spec) -> delegated<std::uint64_t> {
      return self->delegate(gateway, atom, std::move(spec));
    },
    [=](unwatch_atom atom, std::uint64_t id) { self->send(gateway, atom, id); },
  };
}

// Keeps what a shard elector last told its subscribers.
struct shard_record_state {
  std::set<std::uint32_t> shards;
  std::size_t messages = 0;
  static inline const char* name = "shard_record";
};

// (The replica's name as an argument: CAF 0.17 binds a null reference for
// the arguments of a function-based actor spawned with none, which UBSan
// reports.)
behavior shard_record(stateful_actor<shard_record_state>* self, std::string) {
  return {
    [=](shards_atom, const std::vector<std::uint32_t>& shards) {
      self->state.shards = std::set<std::uint32_t>(shards.begin(), shards.end());
      ++self->state.messages;
    },
  };
}

// Set when `whom` has quit (the flag must outlive the actor).
std::shared_ptr<bool> quit_flag(const actor& whom) {
  auto quit = std::make_shared<bool>(false);
  whom->attach_functor([quit](const error&) { *quit = true; });
  return quit;
}

// The Lease settings of replica `identity`, the defaults otherwise.
control::lease_config replica(const std::string& identity) {
  control::lease_config config;
  config.identity = identity;
  return config;
}

struct leader_fixture : control_fixture {
  control::lease_config lease = replica("replica-a");
  // replica-a's leader elector, on `path` to the API server (the gateway, or
  // a wrapper that holds or cuts its requests), started with the control
  // plane; it has taken the Lease when this returns.
  actor spawn_leader(const kube_gateway_handle& path) {
    elected = true;
    start();
    auto elector =
      sys.spawn(leader_elector, lease, path, std::vector<actor>{fleet, ingest}, time);
    sched.run();
    list_nodes();
    return elector;
  }
  // The holderIdentity of Lease `name` as the API server has it.
  std::string lease_holder(const std::string& name = "vigil-control") {
    const auto* leases = store->find_type("coordination.k8s.io", "v1", "leases");
    auto lease = store->get(*leases, "vigil", name);
    CAF_REQUIRE(lease.ok());
    return (*lease.value)["spec"]["holderIdentity"].get<std::string>();
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(control_leader_tests, leader_fixture)

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
  auto path = sys.spawn(partitionable, gateway);
  auto elector = spawn_leader(path);
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
  auto elector = spawn_leader(gateway);
  CAF_CHECK_EQUAL(lease_holder(), "replica-a");
  post({xid("node-1", "GPU-a")});
  CAF_CHECK(cordoned("node-1"));
  // An orderly shutdown gives the Lease up: a successor takes it at once.
  anon_send_exit(elector, exit_reason::user_shutdown);
  sched.run();
  const auto* leases = store->find_type("coordination.k8s.io", "v1", "leases");
  auto released = *store->get(*leases, "vigil", "vigil-control").value;
  CAF_CHECK_EQUAL(released["spec"]["holderIdentity"], "");
  auto step = control::next_lease_step(*control::read_lease(released.dump()),
                                       control::lease_config{}, time->wall_now());
  CAF_CHECK(step.what == control::lease_step::kind::update);
}

// A leader told to stop stops acting at once, and while its release is on
// its way it neither looks at nor renews the Lease: before, a look on the
// next tick found the Lease still its own, renewed it and led again, its
// fleet acting while the process shut down and the successor left waiting.
CAF_TEST(a_stopping_leader_does_not_lead_again_while_its_release_is_answered) {
  auto path = sys.spawn(write_holding, gateway);
  lease.exit_wait = std::chrono::seconds{10}; // three ticks with the release out
  auto elector = spawn_leader(path);
  // (Named values: CAF's checks keep references to their operands.)
  auto leading = [&] {
    return json::parse(ask(elector, summary_atom::value))["leading"].get<bool>();
  };
  auto standby = [&] {
    return json::parse(ask(fleet, summary_atom::value))["standby"].get<bool>();
  };
  CAF_REQUIRE_EQUAL(leading(), true);
  anon_send(path, 1); // the release
  anon_send_exit(elector, exit_reason::user_shutdown);
  sched.run();
  for (int tick = 0; tick < 3; ++tick) {
    advance(std::chrono::seconds{2});
    CAF_CHECK_EQUAL(leading(), false);
    CAF_CHECK_EQUAL(standby(), true);
  }
  post({xid("node-1", "GPU-a")});
  CAF_CHECK_EQUAL(replies.back().http_status, 503);
  anon_send(path, 0); // the release goes through; the elector quits
  sched.run();
  CAF_CHECK_EQUAL(lease_holder(), "");
  CAF_CHECK(!cordoned("node-1"));
  anon_send_exit(path, exit_reason::user_shutdown);
  sched.run();
}

// A renewal in flight when the stop comes is waited for, and the release
// carries the Lease it wrote: written beside it, the release was refused as
// a conflict (the renewal had moved the resourceVersion) and the successor
// waited out the whole duration.
CAF_TEST(a_renewal_in_flight_at_the_stop_is_waited_for_and_then_released) {
  auto path = sys.spawn(write_holding, gateway);
  auto elector = spawn_leader(path);
  anon_send(path, 100);
  advance(std::chrono::seconds{2}); // the next look: its renewal is held
  anon_send_exit(elector, exit_reason::user_shutdown);
  sched.run();
  anon_send(path, 0);
  sched.run();
  CAF_CHECK_EQUAL(lease_holder(), "");
  anon_send_exit(path, exit_reason::user_shutdown);
  sched.run();
}

// A renewal that never comes back is waited for exit_wait, not for the
// client's timeout: the shutdown grace is shared with the components
// stopped after the elector. The release is then written from the Lease
// last seen, and the renewal's late answer (a conflict now) changes nothing.
CAF_TEST(a_renewal_unanswered_at_the_stop_is_waited_for_only_exit_wait) {
  auto path = sys.spawn(write_holding, gateway);
  auto elector = spawn_leader(path);
  auto quit = quit_flag(elector);
  anon_send(path, 1);
  advance(std::chrono::seconds{2}); // the next look: its renewal is held
  anon_send_exit(elector, exit_reason::user_shutdown);
  sched.run();
  CAF_CHECK_EQUAL(lease_holder(), "replica-a");
  CAF_CHECK(!*quit);
  advance(lease.exit_wait);
  CAF_CHECK_EQUAL(lease_holder(), "");
  CAF_CHECK(*quit);
  anon_send(path, 0); // the renewal arrives late, on the old resourceVersion
  sched.run();
  CAF_CHECK_EQUAL(lease_holder(), "");
  anon_send_exit(path, exit_reason::user_shutdown);
  sched.run();
}

// A release that is never answered holds the stop up for exit_wait only.
CAF_TEST(an_unanswered_release_holds_the_stop_up_for_exit_wait_only) {
  auto path = sys.spawn(write_holding, gateway);
  auto elector = spawn_leader(path);
  auto quit = quit_flag(elector);
  anon_send(path, 1); // the release
  anon_send_exit(elector, exit_reason::user_shutdown);
  sched.run();
  CAF_CHECK(!*quit);
  advance(lease.exit_wait);
  CAF_CHECK(*quit);
  anon_send_exit(path, exit_reason::user_shutdown);
  sched.run();
}

// A Lease request that gets no answer at all (the gateway is gone) counts
// as a failed one: the leader stops at its renew deadline and stays up.
// Before, the request had no error handler, and the elector quit with the
// error, without a word in its log about the Lease.
CAF_TEST(a_leader_whose_gateway_is_gone_stops_at_its_renew_deadline) {
  auto path = sys.spawn(write_holding, gateway);
  auto elector = spawn_leader(path);
  auto quit = quit_flag(elector);
  auto leading = [&] {
    return json::parse(ask(elector, summary_atom::value))["leading"].get<bool>();
  };
  CAF_REQUIRE_EQUAL(leading(), true);
  anon_send_exit(path, exit_reason::user_shutdown);
  sched.run();
  for (int second = 1; second <= 12; ++second) {
    advance(std::chrono::seconds{1});
    CAF_REQUIRE(!*quit);
  }
  CAF_CHECK_EQUAL(leading(), false);
  auto fleet_summary = json::parse(ask(fleet, summary_atom::value)); // a named copy
  CAF_CHECK_EQUAL(fleet_summary["standby"], true);
  anon_send_exit(elector, exit_reason::user_shutdown);
  sched.run();
  CAF_CHECK(*quit);
}

// The same for the shard elector: stopping, it acts on no shard again while
// its releases are on their way, and every shard Lease ends released.
CAF_TEST(a_stopping_shard_elector_takes_no_shard_again_while_it_releases) {
  const std::uint32_t k = 4;
  auto record = sys.spawn(shard_record, "replica-a");
  auto held = [&] {
    return deref<stateful_actor<shard_record_state>>(record).state.shards;
  };
  auto path = sys.spawn(write_holding, gateway);
  auto a = sys.spawn(shard_elector, replica("replica-a"), k, path,
                     std::vector<actor>{record}, time);
  sched.run();
  CAF_REQUIRE_EQUAL(held().size(), k);
  anon_send(path, 100);
  advance(std::chrono::seconds{2}); // a look whose renewals are held
  anon_send_exit(a, exit_reason::user_shutdown);
  sched.run();
  CAF_CHECK(held().empty());
  anon_send(path, 0); // the renewals, then the releases
  sched.run();
  for (int tick = 0; tick < 3; ++tick) {
    advance(std::chrono::seconds{2});
    CAF_CHECK(held().empty());
  }
  for (std::uint32_t i = 0; i < k; ++i)
    CAF_CHECK_EQUAL(lease_holder(control::shard_lease_name("vigil-control", i)), "");
  anon_send_exit(record, exit_reason::user_shutdown);
  anon_send_exit(path, exit_reason::user_shutdown);
  sched.run();
}

// The shard elector's look held unanswered at the stop: after exit_wait
// every shard Lease and the member Lease are released from the Leases last
// seen, and the elector quits; the look's late renewals change nothing. A
// gateway gone meanwhile leaves it up, stopping at its renew deadlines.
CAF_TEST(a_shard_elector_waits_exit_wait_for_its_look_and_survives_a_lost_gateway) {
  const std::uint32_t k = 3;
  auto record = sys.spawn(shard_record, "replica-a");
  auto held = [&] {
    return deref<stateful_actor<shard_record_state>>(record).state.shards;
  };
  auto path = sys.spawn(write_holding, gateway);
  auto config = replica("replica-a");
  auto a = sys.spawn(shard_elector, config, k, path, std::vector<actor>{record}, time);
  auto quit = quit_flag(a);
  sched.run();
  CAF_REQUIRE_EQUAL(held().size(), k);
  anon_send(path, static_cast<int>(k) + 1); // the look's member and shard renewals
  advance(std::chrono::seconds{2});
  anon_send_exit(a, exit_reason::user_shutdown);
  sched.run();
  CAF_CHECK(held().empty());
  CAF_CHECK(!*quit);
  advance(config.exit_wait);
  CAF_CHECK(*quit);
  anon_send(path, 0); // the renewals arrive late, on old resourceVersions
  sched.run();
  for (std::uint32_t i = 0; i < k; ++i)
    CAF_CHECK_EQUAL(lease_holder(control::shard_lease_name("vigil-control", i)), "");
  CAF_CHECK_EQUAL(lease_holder(control::member_lease_name("vigil-control", "replica-a")),
                  "");
  // Another elector whose gateway goes away: its requests fail, it stays
  // up and drops every shard at the renew deadline.
  auto lost = sys.spawn(write_holding, gateway);
  auto b = sys.spawn(shard_elector, replica("replica-b"), k, lost,
                     std::vector<actor>{record}, time);
  auto b_quit = quit_flag(b);
  sched.run();
  CAF_REQUIRE_EQUAL(held().size(), k);
  anon_send_exit(lost, exit_reason::user_shutdown);
  sched.run();
  for (int second = 1; second <= 12; ++second) {
    advance(std::chrono::seconds{1});
    CAF_REQUIRE(!*b_quit);
  }
  CAF_CHECK(held().empty());
  anon_send_exit(b, exit_reason::user_shutdown);
  sched.run();
  CAF_CHECK(*b_quit);
  anon_send_exit(record, exit_reason::user_shutdown);
  anon_send_exit(path, exit_reason::user_shutdown);
  sched.run();
}

// Shards (issue 22): every replica computes the same preferred owner from
// the live members; a joining replica gets its shards by release and
// acquire; a partitioned one stops at its renew deadline and its shards are
// taken only once their Leases expired; never do two replicas hold a shard.
CAF_TEST(shards_spread_over_replicas_and_move_only_by_release_or_expiry) {
  const std::uint32_t k = 8;
  auto record_a = sys.spawn(shard_record, "replica-a");
  auto record_b = sys.spawn(shard_record, "replica-b");
  auto held = [&](const actor& record) {
    return deref<stateful_actor<shard_record_state>>(record).state.shards;
  };
  auto disjoint = [&] {
    for (auto shard : held(record_a))
      if (held(record_b).count(shard) != 0)
        return false;
    return true;
  };
  const auto a_config = replica("replica-a"), b_config = replica("replica-b");
  auto a =
    sys.spawn(shard_elector, a_config, k, gateway, std::vector<actor>{record_a}, time);
  sched.run();
  CAF_CHECK_EQUAL(held(record_a).size(), k); // alone: every shard
  auto path_b = sys.spawn(partitionable, gateway);
  auto b =
    sys.spawn(shard_elector, b_config, k, path_b, std::vector<actor>{record_b}, time);
  sched.run();
  std::set<std::uint32_t> b_preferred, a_preferred;
  for (std::uint32_t i = 0; i < k; ++i)
    (control::preferred_owner(i, {"replica-a", "replica-b"}) == "replica-b" ? b_preferred
                                                                            : a_preferred)
      .insert(i);
  CAF_REQUIRE(!b_preferred.empty() && !a_preferred.empty());
  for (int i = 0; i < 3; ++i) {
    advance(std::chrono::seconds{2});
    CAF_CHECK(disjoint());
  }
  CAF_CHECK_EQUAL(held(record_a), a_preferred);
  CAF_CHECK_EQUAL(held(record_b), b_preferred);
  // replica-b is cut off: it stops at its renew deadline; replica-a takes
  // its shards once their Leases have expired, never before.
  anon_send(path_b, true);
  for (int second = 1; second <= 20; ++second) {
    advance(std::chrono::seconds{1});
    CAF_CHECK(disjoint());
    if (second >= 10)
      CAF_CHECK(held(record_b).empty());
  }
  CAF_CHECK_EQUAL(held(record_a).size(), k);
  // Healed, replica-b is a member again and gets its shards back.
  anon_send(path_b, false);
  for (int i = 0; i < 4; ++i) {
    advance(std::chrono::seconds{2});
    CAF_CHECK(disjoint());
  }
  CAF_CHECK_EQUAL(held(record_b), b_preferred);
  auto summary = json::parse(ask(a, summary_atom::value));
  CAF_CHECK_EQUAL(summary["members"], json::array({"replica-a", "replica-b"}));
  CAF_CHECK_EQUAL(summary["shards"], k);
  // An orderly stop releases every shard Lease and the member Lease.
  anon_send_exit(a, exit_reason::user_shutdown);
  anon_send_exit(b, exit_reason::user_shutdown);
  sched.run();
  for (std::uint32_t i = 0; i < k; ++i)
    CAF_CHECK_EQUAL(lease_holder(control::shard_lease_name("vigil-control", i)), "");
  CAF_CHECK(held(record_a).empty());
  anon_send_exit(record_a, exit_reason::user_shutdown);
  anon_send_exit(record_b, exit_reason::user_shutdown);
  anon_send_exit(path_b, exit_reason::user_shutdown);
  sched.run();
}

// A sharded fleet acts only on the nodes of the shards it holds, and takes
// their events from the journal's tail, whichever replica journaled them: a
// shard handed to another replica stops its node actors; the shard given
// back is rebuilt from the journal, with what was journaled meanwhile.
CAF_TEST(a_sharded_fleet_acts_on_its_shards_and_rebuilds_a_shard_it_gains) {
  const std::uint32_t k = 2;
  settings->shards = k;
  elected = true;
  start();
  anon_send(ingest, leader_atom::value, true); // sharded, every replica ingests
  std::string mine, theirs;                    // nodes a keeps and b will take
  for (int i = 1; i <= 4; ++i) {
    const auto name = "node-" + std::to_string(i);
    const auto owner =
      control::preferred_owner(control::shard_of(name, k), {"replica-a", "replica-b"});
    (owner == "replica-a" ? mine : theirs) = name;
  }
  CAF_REQUIRE(!mine.empty() && !theirs.empty());
  const auto a_config = replica("replica-a"), b_config = replica("replica-b");
  auto a =
    sys.spawn(shard_elector, a_config, k, gateway, std::vector<actor>{fleet}, time);
  sched.run();
  list_nodes();
  auto tailed = [&] {
    return json::parse(ask(fleet, summary_atom::value))["tailed"].get<int>();
  };
  post({xid(theirs, "GPU-a")});
  advance(fleet_tail_interval);
  CAF_CHECK(cordoned(theirs)); // replica-a holds both shards
  CAF_CHECK_EQUAL(tailed(), 1);
  // An event another replica journaled reaches the owner through the tail.
  auto other = xid(mine, "GPU-c");
  journal_record row;
  row.node = mine;
  row.kind = "event";
  row.idempotency_key = other.id;
  row.body = encode_health_event(other);
  CAF_REQUIRE(journal_db->append({row}).has_value());
  advance(fleet_tail_interval);
  CAF_CHECK(cordoned(mine));
  CAF_CHECK_EQUAL(tailed(), 2);
  auto record_b = sys.spawn(shard_record, "replica-b");
  auto b =
    sys.spawn(shard_elector, b_config, k, gateway, std::vector<actor>{record_b}, time);
  sched.run();
  advance(std::chrono::seconds{2});
  advance(std::chrono::seconds{2});
  auto summary = json::parse(ask(fleet, summary_atom::value));
  CAF_CHECK_EQUAL(summary["shardsOwned"].size(), 1u);
  // The breaker holds the limits for replica-a's share: its GPU nodes.
  std::size_t a_nodes = 0;
  for (int i = 1; i <= 4; ++i)
    a_nodes += control::preferred_owner(control::shard_of("node-" + std::to_string(i), k),
                                        {"replica-a", "replica-b"})
                   == "replica-a"
                 ? 1
                 : 0;
  auto breaker_summary = json::parse(ask(breaker, summary_atom::value)); // a named copy
  CAF_CHECK_EQUAL(breaker_summary["gpuNodes"].get<std::size_t>(), a_nodes);
  post({xid(theirs, "GPU-b")});
  CAF_CHECK_EQUAL(replies.back().http_status, 200); // journaled all the same
  advance(fleet_tail_interval);
  CAF_CHECK_EQUAL(tailed(), 2); // replica-b's node: not replica-a's to act on
  // replica-b stops: replica-a takes the shard back and rebuilds its nodes,
  // GPU-b's event (journaled while replica-b owned it) included.
  anon_send_exit(b, exit_reason::user_shutdown);
  sched.run();
  advance(std::chrono::seconds{2});
  list_nodes();
  summary = json::parse(ask(fleet, summary_atom::value));
  CAF_CHECK_EQUAL(summary["shardsOwned"].size(), 2u);
  auto node = json::parse(ask(fleet, summary_atom::value, theirs));
  CAF_CHECK_EQUAL(node["active"].size(), 2u);
  // And the tail goes on for both shards.
  post({xid(theirs, "GPU-d")});
  advance(fleet_tail_interval);
  CAF_CHECK_EQUAL(tailed(), 3);
  // Another replica's cordon counts in this breaker's window: the window is
  // the fleet's (vigil_breaker_utilisation).
  auto in_window = [&] {
    auto summary = json::parse(ask(breaker, summary_atom::value));
    return summary["cordonsInWindow"].get<int>();
  };
  const auto counted = in_window();
  journal_record cordon;
  cordon.recorded_at = time->wall_now();
  cordon.node = "node-9";
  cordon.kind = quarantine_row;
  cordon.idempotency_key = "quarantine/node-9/replica-b";
  cordon.body = R"({"cordon":true})";
  CAF_REQUIRE(journal_db->append({cordon}).has_value());
  advance(fleet_tail_interval);
  CAF_CHECK_EQUAL(in_window(), counted + 1);
  // A trip on another replica stops this one's breaker too.
  journal_record trip;
  trip.kind = breaker_row::tripped;
  trip.idempotency_key = "breaker/tripped/replica-b";
  trip.body = R"({"reason":"3 nodes cordoned within the window, limit 2"})";
  CAF_REQUIRE(journal_db->append({trip}).has_value());
  advance(fleet_tail_interval);
  breaker_summary = json::parse(ask(breaker, summary_atom::value));
  CAF_CHECK_EQUAL(breaker_summary["tripped"].get<bool>(), true);
  anon_send_exit(a, exit_reason::user_shutdown);
  anon_send_exit(record_b, exit_reason::user_shutdown);
  sched.run();
}

// Issue 22: the fabric window is fleet-wide. Port-downs another replica
// journaled for its own nodes count in this replica's window too, so the
// third node down is one incident, found here, and this replica's node is
// not quarantined for it.
CAF_TEST(a_fabric_incident_spans_the_shards_of_several_replicas) {
  const std::uint32_t k = 2;
  settings->shards = k;
  elected = true;
  start();
  anon_send(ingest, leader_atom::value, true);
  std::vector<std::string> mine, theirs;
  for (int i = 1; i <= 4; ++i) {
    const auto name = "node-" + std::to_string(i);
    const auto owner =
      control::preferred_owner(control::shard_of(name, k), {"replica-a", "replica-b"});
    (owner == "replica-a" ? mine : theirs).push_back(name);
  }
  CAF_REQUIRE(mine.size() >= 1 && theirs.size() >= 2);
  auto a = sys.spawn(shard_elector, replica("replica-a"), k, gateway,
                     std::vector<actor>{fleet}, time);
  auto record_b = sys.spawn(shard_record, "replica-b");
  auto b = sys.spawn(shard_elector, replica("replica-b"), k, gateway,
                     std::vector<actor>{record_b}, time);
  sched.run();
  advance(std::chrono::seconds{2});
  advance(std::chrono::seconds{2});
  list_nodes();
  auto summary = json::parse(ask(fleet, summary_atom::value));
  CAF_REQUIRE_EQUAL(summary["shardsOwned"].size(), 1u);
  // replica-b journals its two nodes' port-downs (its ingest, its rows).
  for (int i = 0; i < 2; ++i) {
    auto down = port_state(theirs[i], false, 0);
    journal_record row;
    row.recorded_at = time->wall_now();
    row.node = theirs[i];
    row.kind = "event";
    row.idempotency_key = down.id;
    row.body = encode_health_event(down);
    CAF_REQUIRE(journal_db->append({row}).has_value());
  }
  advance(fleet_tail_interval);
  CAF_CHECK_EQUAL(journal_rows(fabric_row), 0u); // two nodes: not yet
  post({port_state(mine[0], false, 0)});
  advance(fleet_tail_interval);
  CAF_CHECK_EQUAL(journal_rows(fabric_row), 1u);
  auto rows = journal_db->read({});
  CAF_REQUIRE(rows.has_value());
  for (const auto& row : *rows)
    if (row.kind == fabric_row) {
      auto body = json::parse(row.body);
      CAF_CHECK_EQUAL(body["nodes"].size(), 3u);
    }
  CAF_CHECK(!cordoned(mine[0]));
  for (auto* elector : {&a, &b})
    anon_send_exit(*elector, exit_reason::user_shutdown);
  anon_send_exit(record_b, exit_reason::user_shutdown);
  sched.run();
}

// Issue 22: a replica that died between claiming a remediation slot and
// creating its CR left the slot in the journal's database, named by no
// history. After the next owner's rebuild the node, with no remediation in
// flight once its history is replayed, gives it back; a node whose CR has
// no outcome in the journal keeps its slot (its successor follows the CR).
CAF_TEST(a_slot_no_history_names_is_given_back_after_the_rebuild) {
  const std::uint32_t k = 2;
  settings->shards = k;
  elected = true;
  auto granted = [](std::size_t, bool) { return true; };
  for (const char* node : {"node-1", "node-3"})
    CAF_REQUIRE(journal_db->claim_slot("", node, time->wall_now(), granted).has_value());
  journal_record created;
  created.recorded_at = time->wall_now();
  created.node = "node-3";
  created.kind = control::remediation_row;
  created.idempotency_key = "remediation/node-3/created";
  created.body =
    json{{"phase", "created"}, {"action", "RESTART_VM"}, {"cr", "reboot-node-3"}}.dump();
  CAF_REQUIRE(journal_db->append({created}).has_value());
  control::breaker_config config;
  config.in_journal = true;
  start(config);
  anon_send(ingest, leader_atom::value, true);
  auto a = sys.spawn(shard_elector, replica("replica-a"), k, gateway,
                     std::vector<actor>{fleet}, time);
  sched.run();
  list_nodes();
  advance(fleet_tail_interval);
  auto holders = journal_db->slot_holders();
  CAF_REQUIRE(holders.has_value());
  CAF_CHECK_EQUAL(*holders, std::vector<std::string>{"node-3"});
  anon_send_exit(a, exit_reason::user_shutdown);
  sched.run();
}

CAF_TEST_FIXTURE_SCOPE_END()
