#include "actors/agent/podresources/allocation_monitor.hpp"

#include <caf/all.hpp>

#include "runtime/logging.hpp"

namespace vigil {

namespace {

// The report as compared between polls: everything but when it was taken.
std::string comparable(gpu_allocations report) {
  report.observed = wall_time{};
  return encode_gpu_allocations(report);
}

gpu_allocations read_kubelet(allocation_monitor_actor* self) {
  auto& st = self->state;
  auto log = component_logger("allocation_monitor");
  gpu_allocations report;
  auto list = st.kubelet->list();
  if (!list) {
    report.node = st.config.node;
    report.available = false;
    report.error = list.error().to_string();
    if (report.error != st.last_problem)
      log->error("cannot read the kubelet's GPU allocations (partial drains fall back "
                 "to full until it can): {}",
                 report.error);
    st.last_problem = report.error;
    return report;
  }
  if (!st.last_problem.empty())
    log->info("the kubelet's PodResources API answers again");
  st.last_problem.clear();
  agent::allocation_read_notes notes;
  report = agent::gpu_allocations_from(*list, st.config.node, wall_time{}, st.metadata,
                                       st.config.resources, notes);
  std::string unresolved;
  for (const auto& id : notes.unresolved)
    unresolved += (unresolved.empty() ? "" : ", ") + id;
  if (unresolved != st.last_unresolved && !unresolved.empty())
    log->warn("device ids that name no GPU in gpu_metadata (those pods count as holding "
              "unknown GPUs): {}",
              unresolved);
  st.last_unresolved = unresolved;
  return report;
}

void report(allocation_monitor_actor* self, bool now) {
  auto& st = self->state;
  ++st.figures.polls;
  auto allocations = read_kubelet(self);
  allocations.observed = st.wall->wall_now();
  st.figures.last_poll = allocations.observed;
  auto key = comparable(allocations);
  const bool due =
    now || key != st.last_sent || !st.last_sent_at
    || allocations.observed - *st.last_sent_at >= st.config.refresh_interval;
  if (!due)
    return;
  auto result = st.poster->post_allocations(encode_gpu_allocations(allocations));
  if (result.outcome != agent::post_outcome::accepted) {
    // Not sent: the next poll tries again, as last_sent is unchanged.
    component_logger("allocation_monitor")
      ->warn("GPU allocations not delivered: {}",
             result.explanation.empty() ? result.detail : result.explanation);
    return;
  }
  ++st.figures.events;
  st.last_sent = std::move(key);
  st.last_sent_at = allocations.observed;
}

// Once at start: the devices the kubelet can hand out, against gpu_metadata.
void check_allocatable(allocation_monitor_actor* self) {
  auto& st = self->state;
  auto log = component_logger("allocation_monitor");
  auto answer = st.kubelet->allocatable();
  if (!answer)
    return; // the first poll says it plainly
  auto gpus = agent::allocatable_gpus(*answer, st.metadata, st.config.resources);
  if (gpus.size() != st.metadata.gpus.size())
    log->warn("the kubelet can allocate {} GPU(s) that gpu_metadata knows, of {} on the "
              "node: check the device plugin and --gpu-resources",
              gpus.size(), st.metadata.gpus.size());
}

} // namespace

caf::behavior allocation_monitor(allocation_monitor_actor* self,
                                 allocation_monitor_config config,
                                 std::shared_ptr<agent::pod_resources_client> kubelet,
                                 agent::gpu_metadata metadata,
                                 std::shared_ptr<agent::http_event_poster> poster,
                                 std::shared_ptr<const clock> wall) {
  auto& st = self->state;
  st.config = std::move(config);
  st.kubelet = std::move(kubelet);
  st.metadata = std::move(metadata);
  st.poster = std::move(poster);
  st.wall = std::move(wall);
  check_allocatable(self);
  self->send(self, poll_atom::value);
  return {
    [=](poll_atom) {
      report(self, false);
      self->delayed_send(self, self->state.config.poll_interval, poll_atom::value);
    },
    [=](report_now_atom) { report(self, true); },
    [=](figures_atom) { return self->state.figures; },
  };
}

} // namespace vigil
