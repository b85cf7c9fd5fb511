#include "actors/control/leader/shard_elector.hpp"

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/control/leader/shard_assignment.hpp"
#include "actors/protocol/atoms.hpp"
#include "actors/protocol/control_messages.hpp"
#include "runtime/logging.hpp"

namespace vigil {

namespace {

std::shared_ptr<spdlog::logger> logger() {
  return component_logger("shards");
}

control::lease_config shard_config(const shard_elector_state& st, std::uint32_t shard) {
  auto config = st.config;
  config.name = control::shard_lease_name(st.config.name, shard);
  return config;
}

control::lease_config member_config(const shard_elector_state& st) {
  auto config = st.config;
  config.name = control::member_lease_name(st.config.name, st.config.identity);
  return config;
}

std::vector<std::uint32_t> held_shards(const shard_elector_state& st) {
  std::vector<std::uint32_t> out;
  for (const auto& [shard, renewed] : st.held)
    out.push_back(shard);
  return out;
}

void publish(shard_elector_actor* self) {
  auto held = held_shards(self->state);
  for (const auto& s : self->state.subscribers)
    self->send(s, shards_atom::value, held);
}

// Stops acting on `shard` (before anything is written about it).
void drop(shard_elector_actor* self, std::uint32_t shard, const char* why) {
  auto& st = self->state;
  if (st.held.erase(shard) == 0)
    return;
  logger()->warn("{} stops acting on shard {} of {}: {}", st.config.identity, shard,
                 st.shards, why);
  publish(self);
}

// client-go's renew deadline, per shard: a shard whose Lease was not written
// successfully for renew_deadline is given up before it can expire.
void check_deadlines(shard_elector_actor* self) {
  auto& st = self->state;
  const auto now = st.time->wall_now();
  std::vector<std::uint32_t> late;
  for (const auto& [shard, renewed] : st.held)
    if (control::renew_deadline_passed(renewed, st.config, now))
      late.push_back(shard);
  for (auto shard : late) {
    ++st.expiries;
    drop(self, shard, "its Lease was not renewed within the renew deadline");
  }
}

void release_all(shard_elector_actor* self);

// An answer that comes back once the elector is shutting down: what it says
// of the Leases was kept by the caller (a release must carry the newest
// resourceVersion, and a shard just acquired is ours to give up); nothing
// else is done with it, and the last one out writes the releases (unless
// exit_wait ran out first and they are on their way already).
bool answered_while_exiting(shard_elector_actor* self) {
  auto& st = self->state;
  if (!st.exiting)
    return false;
  if (st.in_flight == 0 && !st.releasing)
    release_all(self);
  return true;
}

// A request that got no answer at all (the gateway is gone): nothing is
// learnt of the Lease; like a failed request, it counts towards the renew
// deadlines, and shutting down, its Lease is released as last seen.
void request_lost(shard_elector_actor* self, const std::string& what,
                  const caf::error& err) {
  auto& st = self->state;
  --st.in_flight;
  if (answered_while_exiting(self))
    return;
  logger()->warn("{} got no answer: {}", what, caf::to_string(err));
  check_deadlines(self);
}

void write_shard(shard_elector_actor* self, const control::shard_step& step) {
  auto& st = self->state;
  const auto config = shard_config(st, step.shard);
  const auto sent = st.time->wall_now();
  ++st.in_flight;
  self
    ->request(st.gateway, caf::infinite, control::lease_write_request(config, step.write))
    .then(
      [=](const kube::kube_result& result) {
        auto& st = self->state;
        --st.in_flight;
        if (result.ok())
          if (auto written = control::read_lease(result.response().body))
            st.leases[step.shard] = std::move(*written);
        if (answered_while_exiting(self))
          return;
        if (!result.ok()) {
          logger()->warn("Lease {}/{}: write failed: {}", config.ns, config.name,
                         result.error().to_string());
          return check_deadlines(self);
        }
        if (step.what == control::shard_step::kind::release) {
          ++st.releases;
          logger()->info("shard {} released for its preferred owner", step.shard);
          return;
        }
        if (control::renew_deadline_passed(sent, st.config, st.time->wall_now())) {
          logger()->warn("Lease {}/{}: write answered after the renew deadline; ignored",
                         config.ns, config.name);
          return check_deadlines(self);
        }
        const bool gained = st.held.count(step.shard) == 0;
        st.held[step.shard] = sent;
        if (gained) {
          ++st.acquisitions;
          logger()->warn("{} now acts on shard {} of {} (Lease {}/{})",
                         st.config.identity, step.shard, st.shards, config.ns,
                         config.name);
          publish(self);
        }
      },
      [=](const caf::error& err) {
        request_lost(self, "Lease " + config.ns + "/" + config.name + ": write", err);
      });
}

void write_member(shard_elector_actor* self,
                  const std::optional<control::lease_record>& own) {
  auto& st = self->state;
  const auto config = member_config(st);
  auto step = control::next_lease_step(own, config, st.time->wall_now());
  if (step.what == control::lease_step::kind::wait) {
    logger()->error("member Lease {}/{} is held by '{}': two replicas share the identity "
                    "'{}' (POD_NAME)",
                    config.ns, config.name, step.holder, st.config.identity);
    return;
  }
  ++st.in_flight;
  self->request(st.gateway, caf::infinite, control::lease_write_request(config, step))
    .then(
      [=](const kube::kube_result& result) {
        auto& st = self->state;
        --st.in_flight;
        if (result.ok())
          if (auto written = control::read_lease(result.response().body))
            st.member = std::move(*written);
        if (answered_while_exiting(self))
          return;
        if (!result.ok())
          logger()->warn("Lease {}/{}: write failed: {}", config.ns, config.name,
                         result.error().to_string());
      },
      [=](const caf::error& err) {
        request_lost(self, "Lease " + config.ns + "/" + config.name + ": write", err);
      });
}

void look(shard_elector_actor* self) {
  auto& st = self->state;
  if (st.in_flight > 0 || st.exiting)
    return;
  ++st.in_flight;
  self->request(st.gateway, caf::infinite, control::lease_list_request(st.config))
    .then(
      [=](const kube::kube_result& result) {
        auto& st = self->state;
        --st.in_flight;
        std::optional<lease_listing> listing;
        if (result.ok()) {
          listing = sort_leases(result.response().body, st.config, st.shards);
          for (std::uint32_t i = 0; i < st.shards; ++i)
            if (listing->shards[i])
              st.leases[i] = *listing->shards[i];
          if (listing->own_member)
            st.member = *listing->own_member;
        }
        if (answered_while_exiting(self))
          return;
        if (!listing) {
          logger()->warn("Leases in {}: list failed: {}", st.config.ns,
                         result.error().to_string());
          return check_deadlines(self);
        }
        for (const auto& problem : listing->problems)
          logger()->warn("Leases in {}: {}", st.config.ns, problem);
        const auto now = st.time->wall_now();
        write_member(self, listing->own_member);
        st.members = control::live_members(listing->members, now);
        for (const auto& step :
             control::plan_shards(listing->shards, st.members, st.config, now)) {
          const auto& lease = listing->shards[step.shard];
          switch (step.what) {
            case control::shard_step::kind::release:
              // Stop first: once the release is written, the preferred owner
              // may start at its next look.
              drop(self, step.shard, "another live replica is its preferred owner");
              write_shard(self, step);
              break;
            case control::shard_step::kind::acquire:
            case control::shard_step::kind::renew: write_shard(self, step); break;
            case control::shard_step::kind::wait:
            case control::shard_step::kind::none:
              if (lease && lease->holder != st.config.identity)
                drop(self, step.shard, "another replica holds its Lease");
              break;
          }
        }
      },
      [=](const caf::error& err) {
        request_lost(self, "Leases in " + self->state.config.ns + ": list", err);
      });
}

// Shutdown, once no request of a look is in flight (or exit_wait ran out
// first): every shard Lease this replica holds and its member Lease are
// given up so the others need not wait out the duration; then, once all are
// answered or exit_wait has passed, it quits with the exit reason.
void release_all(shard_elector_actor* self) {
  auto& st = self->state;
  st.releasing = true;
  const auto reason = *st.exiting;
  const auto now = st.time->wall_now();
  std::vector<std::pair<control::lease_config, control::lease_step>> writes;
  for (const auto& [shard, lease] : st.leases)
    if (auto step = control::release_step(lease, shard_config(st, shard), now))
      writes.emplace_back(shard_config(st, shard), std::move(*step));
  if (st.member)
    if (auto step = control::release_step(*st.member, member_config(st), now))
      writes.emplace_back(member_config(st), std::move(*step));
  if (writes.empty())
    return self->quit(reason);
  auto waiting = std::make_shared<std::size_t>(writes.size());
  auto one_done = [=] {
    if (--*waiting == 0)
      self->quit(reason);
  };
  for (const auto& [config, step] : writes)
    self
      ->request(st.gateway, st.config.exit_wait,
                control::lease_write_request(config, step))
      .then([=](const kube::kube_result&) { one_done(); },
            [=, name = config.name](const caf::error& err) {
              logger()->warn("Lease {} not released: {}", name, caf::to_string(err));
              one_done();
            });
}

// The exit message: stop acting on every shard at once (the subscribers are
// told before anything is written), then release. The requests of a look
// in flight are waited for: they may change a Lease's resourceVersion (a
// release beside them would be refused as a conflict), and answered later
// they must not hand a replica that is shutting down a shard again. They
// are waited for exit_wait at most (the shutdown grace is shared with the
// components stopped after this one). A second exit message changes
// nothing.
void begin_exit(shard_elector_actor* self, caf::error reason) {
  auto& st = self->state;
  if (st.exiting)
    return;
  st.exiting = std::move(reason);
  if (!st.held.empty()) {
    st.held.clear();
    publish(self);
  }
  if (st.in_flight == 0)
    return release_all(self);
  self->delayed_send(self, st.config.exit_wait, exit_wait_atom::value);
}

std::optional<std::uint32_t> shard_number(const std::string& name,
                                          const std::string& prefix) {
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0)
    return std::nullopt;
  std::uint64_t n = 0;
  for (auto i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || n > 1'000'000)
      return std::nullopt;
    n = n * 10 + static_cast<std::uint64_t>(name[i] - '0');
  }
  return static_cast<std::uint32_t>(n);
}

} // namespace

lease_listing sort_leases(const std::string& list_json,
                          const control::lease_config& config, std::uint32_t shards) {
  lease_listing out;
  out.shards.resize(shards);
  const auto list = nlohmann::json::parse(list_json, nullptr, false);
  if (!list.is_object() || !list.contains("items") || !list["items"].is_array()) {
    out.problems.push_back("the Lease list is not a list");
    return out;
  }
  const auto member_prefix = config.name + "-member-";
  const auto shard_prefix = config.name + "-shard-";
  const auto own = control::member_lease_name(config.name, config.identity);
  for (const auto& item : list["items"]) {
    const auto name =
      item.is_object() && item.contains("metadata") && item["metadata"].is_object()
          && item["metadata"].contains("name") && item["metadata"]["name"].is_string()
        ? item["metadata"]["name"].get<std::string>()
        : std::string{};
    const bool member = name.compare(0, member_prefix.size(), member_prefix) == 0;
    const auto shard = shard_number(name, shard_prefix);
    if (!member && !shard)
      continue; // the leader's Lease, or another program's
    auto lease = control::read_lease(item.dump());
    if (!lease) {
      out.problems.push_back("Lease " + name + " skipped: " + lease.error().to_string());
      continue;
    }
    if (member) {
      if (name == own)
        out.own_member = *lease;
      out.members.push_back(std::move(*lease));
    } else if (*shard < shards) {
      out.shards[*shard] = std::move(*lease);
    }
  }
  return out;
}

caf::behavior shard_elector(shard_elector_actor* self, control::lease_config config,
                            std::uint32_t shards, kube_gateway_handle gateway,
                            std::vector<caf::actor> subscribers,
                            std::shared_ptr<const clock> time) {
  auto& st = self->state;
  st.config = std::move(config);
  st.shards = std::max<std::uint32_t>(shards, 1);
  st.gateway = std::move(gateway);
  st.subscribers = std::move(subscribers);
  st.time = std::move(time);
  self->set_exit_handler([=](const caf::exit_msg& msg) { begin_exit(self, msg.reason); });
  look(self);
  self->delayed_send(self, st.config.retry_period, reconcile_atom::value);
  return {
    [=](reconcile_atom) {
      if (self->state.exiting)
        return;
      check_deadlines(self);
      look(self);
      self->delayed_send(self, self->state.config.retry_period, reconcile_atom::value);
    },
    [=](exit_wait_atom) {
      auto& st = self->state;
      if (!st.exiting || st.releasing)
        return;
      logger()->warn("{} Lease request(s) still unanswered {} ms into the stop; "
                     "releasing from the Leases last seen",
                     st.in_flight, st.config.exit_wait.count());
      release_all(self);
    },
    [=](summary_atom) {
      auto& st = self->state;
      return nlohmann::json{{"identity", st.config.identity},  {"shards", st.shards},
                            {"held", held_shards(st)},         {"members", st.members},
                            {"acquisitions", st.acquisitions}, {"releases", st.releases},
                            {"expiries", st.expiries}}
        .dump();
    },
  };
}

} // namespace vigil
