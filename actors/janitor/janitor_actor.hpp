// The janitor: the GPUReset and RebootNode controllers. It lists the CRs
// every poll interval (level-based: everything it needs is in the CR's status
// and the cluster) and takes each unfinished one a step further, oldest
// first. A node with a CR past Pending is locked: another CR of that node
// waits until it ends (seed 000 §4.3, "serial node-level operations in
// Janitor"). One node's CRs are worked on one at a time, in a lane of their
// own; up to max_concurrent_nodes lanes run at once, so a pass over
// hundreds of open CRs is not one long line of API round trips. A GPUReset
// that still holds the janitor's finalizer (being deleted, or finished with
// the removal lost) is taken up too, whatever its phase.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/gateway/kube_gateway_messages.hpp"
#include "actors/janitor/janitor_metrics.hpp"
#include "actors/janitor/janitor_resource.hpp"
#include "actors/supervisor/message_stats.hpp"
#include "runtime/clock.hpp"

namespace vigil {

struct janitor_settings {
  janitor::gpu_reset_options gpu_reset;
  janitor::reboot_options reboot;
  caf::timespan poll = std::chrono::seconds{5}; ///< how often the CRs are listed
  /// Nodes whose CRs one pass works on at once (config
  /// janitor.max_concurrent_nodes); each node's own CRs stay one at a time.
  std::size_t max_concurrent_nodes = 16;
  std::shared_ptr<janitor_metrics> metrics = std::make_shared<janitor_metrics>();
  /// Beside leader election: idle until (leader_atom, true).
  bool await_leadership = false;
};

/// One unfinished CR of the current pass.
struct janitor_work {
  std::string kind; ///< "GPUReset" or "RebootNode"
  std::string json; ///< the CR as listed
};

/// One node's CRs of the current pass, taken a step further one after
/// another (the node lock).
struct janitor_lane {
  std::vector<janitor_work> work;
  std::size_t next = 0;
};
using janitor_lane_ptr = std::shared_ptr<janitor_lane>;

struct janitor_state {
  janitor_settings settings;
  kube_gateway_handle gateway;
  std::shared_ptr<const clock> time;
  bool passing = false;                 ///< a pass is running
  bool standby = false;                 ///< another replica leads: no passes
  std::deque<janitor_lane_ptr> waiting; ///< this pass's lanes not yet started
  std::size_t lanes_running = 0;
  std::uint64_t passes = 0;
  static inline const char* name = "janitor";
};

using janitor_actor =
  caf::stateful_actor<janitor_state, observed<caf::event_based_actor>>;

/// (janitor_tick_atom) its own timer: one pass. (leader_atom, bool): lead or stand
/// by. (summary_atom) → JSON.
caf::behavior janitor_controllers(janitor_actor* self, janitor_settings settings,
                                  kube_gateway_handle gateway,
                                  std::shared_ptr<const clock> time);

} // namespace vigil
