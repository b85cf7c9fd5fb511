#include "actors/control/drain/drain_actor.hpp"

#include <algorithm>
#include <set>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/control/drain/dra_allocations.hpp"
#include "actors/control/drain/drain_resource.hpp"
#include "actors/gateway/kube_gateway_messages.hpp"
#include "actors/journal/journal_messages.hpp"
#include "actors/protocol/control_messages.hpp"
#include "runtime/backoff.hpp"
#include "runtime/logging.hpp"

namespace vigil {

namespace {

using control::drain_status;

std::shared_ptr<spdlog::logger> logger() {
  return component_logger("drain");
}

journal_record drain_record(const drain_state& st, const nlohmann::json& body) {
  journal_record row;
  row.recorded_at = st.time->wall_now();
  row.node = st.node_name;
  row.kind = control::drain_row;
  row.body = body.dump();
  // One row per phase of one drain run: the run is named by its start time.
  // Without it a second drain of the node with the same key and the same
  // body (nothing to evict, say) was a "duplicate" and never stored: a
  // restart's replay then missed that the node's quarantine was drained.
  row.idempotency_key = st.node_name + "/drain/" + st.key + "/"
                        + std::to_string(st.started.time_since_epoch().count()) + "/"
                        + body.value("phase", std::string{}) + "/"
                        + std::to_string(std::hash<std::string>{}(row.body));
  return row;
}

void list_pods(drain_actor* self);
void read_dra(drain_actor* self, std::vector<control::pod_info> pods, std::size_t version,
              std::vector<std::string> namespaces, std::vector<std::string> claim_lists);
void send_due(drain_actor* self);

// Journals the outcome row, then reports to the node actor and quits. A failed
// journal write is retried on the next tick; nothing else happens meanwhile.
void journal_end(drain_actor* self) {
  auto& st = self->state;
  if (st.end_writing)
    return;
  st.end_writing = true;
  auto row = drain_record(st, nlohmann::json::parse(st.end_body));
  self->request(st.journal, caf::infinite, append_atom::value, std::move(row))
    .then(
      [=](const append_outcome&) {
        auto& st = self->state;
        logger()->info("node {}: drain {} {} ({} evicted, {} deleted)", st.node_name,
                       st.key, st.end_outcome, st.evictions, st.deletions);
        if (auto owner = caf::actor_cast<drain_owner>(st.owner))
          self->send(owner, drained_atom::value, st.key, st.end_outcome,
                     static_cast<std::uint64_t>(st.evictions),
                     static_cast<std::uint64_t>(st.deletions));
        self->quit();
      },
      [=](const caf::error& err) {
        auto& st = self->state;
        logger()->warn("node {}: drain outcome not journaled ({}); retrying",
                       st.node_name, caf::to_string(err));
        st.end_writing = false;
        st.tick_armed = true;
        self->delayed_send(self, st.settings->retry_initial, drain_tick_atom::value);
      });
}

void end(drain_actor* self, std::string outcome, const nlohmann::json& body) {
  auto& st = self->state;
  if (st.ending)
    return;
  st.ending = true;
  st.end_outcome = std::move(outcome);
  st.end_body = body.dump();
  journal_end(self);
}

void end_from_progress(drain_actor* self) {
  auto& st = self->state;
  auto body =
    control::drain_finished_body(*st.progress, st.key, st.evictions, st.deletions);
  end(self, std::string(control::to_string(st.progress->status())), std::move(body));
}

// A failed list or journal write: try again after a doubling delay.
void retry_later(drain_actor* self, const std::string& what) {
  auto& st = self->state;
  const auto delay =
    take_backoff(st.backoff, st.settings->retry_initial, st.settings->retry_max);
  logger()->warn("node {}: drain {}: {}; retrying in {} ms", st.node_name, st.key, what,
                 std::chrono::duration_cast<std::chrono::milliseconds>(delay).count());
  if (!st.tick_armed) {
    st.tick_armed = true;
    self->delayed_send(self, delay, drain_tick_atom::value);
  }
}

// The next wake-up: the earliest retry or deadline, never later than a poll.
void arm_tick(drain_actor* self) {
  auto& st = self->state;
  if (st.tick_armed || st.ending)
    return;
  auto delay = st.settings->poll_interval;
  if (auto at = st.progress->next_wakeup()) {
    auto until = *at - st.time->wall_now();
    delay = std::max(caf::timespan{0}, std::min(delay, caf::timespan{until}));
  }
  st.tick_armed = true;
  self->delayed_send(self, delay, drain_tick_atom::value);
}

void on_step_result(drain_actor* self, const control::drain_step& step,
                    const kube::kube_result& result) {
  auto& st = self->state;
  --st.in_flight;
  auto outcome = control::classify(result);
  const bool evict = step.what == control::drain_step::kind::evict;
  if (outcome == control::step_result::accepted) {
    ++(evict ? st.evictions : st.deletions);
    logger()->info("node {}: {} {}/{}", st.node_name, evict ? "evicted" : "deleted",
                   step.pod.ns, step.pod.name);
  }
  if (outcome == control::step_result::too_many_requests)
    logger()->info(
      "node {}: eviction of {}/{} refused by a PodDisruptionBudget; retrying",
      st.node_name, step.pod.ns, step.pod.name);
  else if (outcome == control::step_result::failed)
    logger()->warn("node {}: {} of {}/{} failed: {}", st.node_name,
                   evict ? "eviction" : "deletion", step.pod.ns, step.pod.name,
                   result.error().to_string());
  st.progress->on_result(step.pod, outcome, st.time->wall_now());
  send_due(self);
}

// Sends every step that is due; ends the drain when every pod is gone.
void send_due(drain_actor* self) {
  auto& st = self->state;
  if (st.ending)
    return;
  if (st.progress->status() != drain_status::in_progress) {
    if (st.in_flight == 0)
      end_from_progress(self);
    return;
  }
  for (const auto& step : st.progress->due(st.time->wall_now())) {
    auto request = step.what == control::drain_step::kind::evict
                     ? control::eviction_request(step.pod)
                     : control::pod_delete_request(step.pod);
    ++st.in_flight;
    self->request(st.gateway, caf::infinite, std::move(request))
      .then([=](const kube::kube_result& result) { on_step_result(self, step, result); });
  }
  arm_tick(self);
}

// The first list plans the drain; the plan is journaled before any eviction.
void start(drain_actor* self, std::vector<control::pod_info> pods) {
  auto& st = self->state;
  auto plan = control::plan_drain(pods, st.request, st.settings->config);
  auto started = control::drain_started_body(plan, st.key, st.settings->dry_run);
  self->request(st.journal, caf::infinite, append_atom::value, drain_record(st, started))
    .then(
      [=](const append_outcome&) {
        auto& st = self->state;
        st.planning = false;
        if (st.ending)
          return; // cancelled while the plan was being journaled: evict nothing
        st.backoff = {};
        logger()->info("node {}: drain {} started: {} ({} pods to evict, {} skipped){}",
                       st.node_name, st.key, plan.why, plan.evict.size(),
                       plan.skipped.size(), st.settings->dry_run ? " (dry run)" : "");
        if (plan.scope == control::drain_scope::none)
          return end(self, "skipped",
                     {{"phase", "skipped"}, {"drain", st.key}, {"why", plan.why}});
        if (st.settings->dry_run)
          return end(self, "dry_run", {{"phase", "dry_run"}, {"drain", st.key}});
        st.progress.emplace(plan, st.time->wall_now(), st.settings->config);
        send_due(self);
      },
      [=](const caf::error& err) {
        self->state.planning = false;
        retry_later(self,
                    "the plan could not be journaled (" + caf::to_string(err) + ")");
      });
}

// A pod tracked by the drain that is no longer listed (or has finished) is gone.
void take_listing(drain_actor* self, const std::vector<control::pod_info>& pods) {
  auto& st = self->state;
  std::set<control::pod_ref> running;
  for (const auto& pod : pods)
    if (!pod.finished)
      running.insert({pod.ns, pod.name});
  for (const auto& target : st.progress->plan().evict)
    if (!running.count(target.pod))
      st.progress->on_pod_gone(target.pod);
  send_due(self);
}

// Plans with the GPU holders from every source there is.
void plan_with_allocations(drain_actor* self, std::vector<control::pod_info> pods) {
  auto& st = self->state;
  if (st.ending) { // cancelled while the GPU holders were being read
    st.planning = false;
    return;
  }
  st.request.gpu_mapping_note =
    control::apply_gpu_allocations(pods, st.allocations, st.dra);
  start(self, std::move(pods));
}

// The namespaces whose ResourceClaims the plan needs: those of the node's
// pods that claim resources (spec.resourceClaims). None: nothing on the node
// holds a device through DRA, and nothing is read.
std::vector<std::string> claiming_namespaces(const std::vector<control::pod_info>& pods) {
  std::set<std::string> namespaces;
  for (const auto& pod : pods)
    if (pod.claims_resources)
      namespaces.insert(pod.ns);
  return {namespaces.begin(), namespaces.end()};
}

// The node's DRA allocations before the plan: the ResourceClaims of each
// namespace in `namespaces` (claim_lists holds those read so far), then this
// node's ResourceSlices, at the newest resource.k8s.io version served. A
// cluster without DRA (404 at every version) or a failed read plans without
// them: pods whose GPUs are then unknown make the drain full.
void read_dra(drain_actor* self, std::vector<control::pod_info> pods, std::size_t version,
              std::vector<std::string> namespaces, std::vector<std::string> claim_lists) {
  auto& st = self->state;
  if (!st.settings->read_dra || namespaces.empty()
      || version >= std::size(control::dra_versions))
    return plan_with_allocations(self, std::move(pods));
  const auto api = control::dra_versions[version];
  if (claim_lists.size() < namespaces.size()) {
    const auto ns = namespaces[claim_lists.size()];
    self->request(st.gateway, caf::infinite, control::resource_claims_request(api, ns))
      .then([=](const kube::kube_result& claims) mutable {
        if (!claims.ok() && claims.error().not_found())
          return read_dra(self, std::move(pods), version + 1, std::move(namespaces), {});
        if (!claims.ok()) {
          logger()->warn("node {}: ResourceClaims of {} not read ({}); planning without "
                         "them",
                         self->state.node_name, ns, claims.error().to_string());
          return plan_with_allocations(self, std::move(pods));
        }
        claim_lists.push_back(claims.response().body);
        read_dra(self, std::move(pods), version, std::move(namespaces),
                 std::move(claim_lists));
      });
    return;
  }
  self
    ->request(st.gateway, caf::infinite,
              control::resource_slices_request(api, st.node_name))
    .then([=](const kube::kube_result& slices) mutable {
      auto& st = self->state;
      auto dra = slices.ok() ? control::dra_gpu_allocations(
                   claim_lists, slices.response().body, st.node_name)
                             : expected<gpu_allocations>(
                               failure{"ResourceSlices", slices.error().to_string()});
      if (dra)
        st.dra = std::move(*dra);
      else
        logger()->warn("node {}: DRA allocations not read ({}); planning without them",
                       st.node_name, dra.error().to_string());
      plan_with_allocations(self, std::move(pods));
    });
}

void list_pods(drain_actor* self) {
  auto& st = self->state;
  if (st.listing || st.planning || st.ending)
    return;
  st.listing = true;
  self->request(st.gateway, caf::infinite, control::node_pods_request(st.node_name))
    .then([=](const kube::kube_result& result) {
      auto& st = self->state;
      st.listing = false;
      if (st.ending)
        return;
      if (!result.ok())
        return retry_later(self, "listing pods failed: " + result.error().to_string());
      auto pods = control::pods_from_list(result.response().body);
      if (!pods)
        return retry_later(self, "unreadable pod list: " + pods.error().to_string());
      st.backoff = {};
      if (!st.progress) {
        st.planning = true; // until the plan is journaled (or fails to be)
        auto namespaces = claiming_namespaces(*pods);
        return read_dra(self, std::move(*pods), 0, std::move(namespaces), {});
      }
      take_listing(self, *pods);
    });
}

// The console's row for this drain: its plan and where each pod stands
// (a pod in retry_wait had its eviction refused, by a PodDisruptionBudget's
// 429 or an error, and is asked again), with the actor's figures.
nlohmann::json drain_summary(drain_actor* self) {
  const auto& st = self->state;
  auto out = self->figures(4);
  out["name"] = "drain/" + st.key;
  out["kind"] = "drain";
  out["evictions"] = st.evictions;
  out["deletions"] = st.deletions;
  if (!st.progress) {
    out["phase"] = st.listing ? "listing pods" : "planning";
    return out;
  }
  const auto& plan = st.progress->plan();
  out["phase"] = std::string{to_string(st.progress->status())};
  out["scope"] = std::string{to_string(plan.scope)};
  out["why"] = plan.why;
  out["skipped"] = plan.skipped.size();
  auto pods = nlohmann::json::array();
  std::size_t refused = 0;
  for (const auto& e : plan.evict) {
    const auto state = st.progress->state_of(e.pod);
    refused += state == control::pod_drain_state::retry_wait ? 1 : 0;
    pods.push_back({{"namespace", e.pod.ns},
                    {"pod", e.pod.name},
                    {"mode", std::string{to_string(e.mode)}},
                    {"pdbProtected", e.pdb_protected},
                    {"state", state ? std::string{to_string(*state)} : "done"}});
  }
  out["pods"] = std::move(pods);
  out["waitingToRetry"] = refused;
  return out;
}

} // namespace

caf::behavior drain(drain_actor* self, std::string node, control::drain_request request,
                    std::optional<gpu_allocations> allocations,
                    std::shared_ptr<const drain_settings> settings,
                    kube_gateway_handle gateway, journal_handle journal,
                    drain_owner owner, std::shared_ptr<const clock> time) {
  auto& st = self->state;
  st.node_name = std::move(node);
  st.key = control::drain_key(request);
  st.request = std::move(request);
  st.allocations = std::move(allocations);
  st.settings = std::move(settings);
  st.gateway = std::move(gateway);
  st.journal = std::move(journal);
  st.owner = owner.address();
  st.time = std::move(time);
  st.started = st.time->wall_now();
  list_pods(self);
  return {
    [=](cancel_atom, const std::string& why) {
      auto& st = self->state;
      if (st.ending)
        return;
      if (!st.progress) {
        // Not planned yet: nothing was evicted.
        return end(self, "cancelled",
                   {{"phase", "cancelled"}, {"drain", st.key}, {"reason", why}});
      }
      st.progress->cancel(why);
      send_due(self);
    },
    [=](drain_tick_atom) {
      auto& st = self->state;
      st.tick_armed = false;
      if (st.ending)
        return journal_end(self);
      if (!st.progress || st.progress->status() == drain_status::in_progress)
        return list_pods(self);
      send_due(self);
    },
    [=](summary_atom) { return drain_summary(self).dump(); },
  };
}

} // namespace vigil
