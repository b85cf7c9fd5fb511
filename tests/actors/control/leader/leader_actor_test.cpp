// The leader elector: only the Lease holder's fleet and ingest act; a
// standby takes over an expired Lease, a partitioned leader stops at its
// renew deadline, and an orderly stop releases the Lease.
#define CAF_SUITE control_leader
#include <caf/test/dsl.hpp>

#include "actors/control/leader/leader_actor.hpp"
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

} // namespace

CAF_TEST_FIXTURE_SCOPE(control_leader_tests, control_fixture)

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

CAF_TEST_FIXTURE_SCOPE_END()
