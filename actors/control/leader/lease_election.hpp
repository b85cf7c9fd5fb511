// Leader election over a coordination.k8s.io/v1 Lease, as client-go's
// leaderelection does it: only the replica holding the Lease ingests, journals
// and acts on the cluster; the others answer ingest 503 (unavailable) and wait.
// Pure: the elector actor reads the
// Lease, asks next_lease_step what to write, and writes it with the Lease's
// resourceVersion, so two candidates never both win.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "messages/expected.hpp"
#include "messages/wall_time.hpp"
#include "runtime/kube/kube_api.hpp"

namespace vigil::control {

struct lease_config {
  std::string ns = "vigil";
  std::string name = "vigil-control";
  std::string identity; ///< this replica: pod name, else host name
  /// A holder that has not renewed for this long has lost the Lease.
  std::chrono::seconds duration{15};
  /// The holder stops acting when it could not renew for this long (< duration,
  /// so it stops before anyone else may start).
  std::chrono::seconds renew_deadline{10};
  /// How often candidates and the holder look at the Lease.
  std::chrono::seconds retry_period{2};
  /// At shutdown: how long a Lease request already in flight is waited for
  /// before the release is written anyway (from the Lease last seen), and
  /// how long the release may take before the elector quits without its
  /// answer. Both together stay inside the process's shutdown grace
  /// (runtime.shutdown_grace_ms), so the components stopped after the
  /// elector (the journal) are not cut short by it.
  std::chrono::milliseconds exit_wait{2000};
};

/// The Lease as read from the API server.
struct lease_record {
  std::string holder;
  std::chrono::seconds duration{0};
  std::optional<wall_time> acquired;
  std::optional<wall_time> renewed;
  std::int64_t transitions = 0;
  std::string resource_version;
};

/// Reads a Lease object; fails naming what is wrong.
expected<lease_record> read_lease(const std::string& lease_json);

struct lease_step {
  enum class kind {
    create, ///< no Lease yet: POST one holding it
    update, ///< PUT: renew ours, or take over an expired one
    wait,   ///< someone else holds a live Lease
  };
  kind what = kind::wait;
  std::string body;      ///< the Lease to write (create, update)
  bool takeover = false; ///< update of a Lease another replica held
  std::string holder;    ///< who holds it now (wait)
};

/// What to do after reading the Lease (nullopt: it does not exist).
lease_step next_lease_step(const std::optional<lease_record>& observed,
                           const lease_config& config, wall_time now);

/// The Lease as its holder gives it up at shutdown: no holder, so a successor
/// takes it at its next look instead of waiting out the duration (client-go's
/// ReleaseOnCancel). nullopt when `observed` is not ours.
std::optional<lease_step> release_step(const lease_record& observed,
                                       const lease_config& config, wall_time now);

/// client-go's renew deadline, on the leader's own clock: a leader whose
/// last successful write of the Lease (its renewTime, `renewed`) is
/// renew_deadline old stops acting, whether or not a request is still out.
/// A partitioned leader therefore stops before its Lease can expire and a
/// successor start; it never waits for the API server to answer.
bool renew_deadline_passed(const std::optional<wall_time>& renewed,
                           const lease_config& config, wall_time now);

/// GET, POST and PUT of the Lease, each bounded by the renew deadline (an
/// answer later than that is of no use: the leader has stopped by then).
kube::kube_request lease_get_request(const lease_config& config);
kube::kube_request lease_write_request(const lease_config& config,
                                       const lease_step& step);
/// LIST of the Leases in config.ns (the shard elector's one read per look).
kube::kube_request lease_list_request(const lease_config& config);

} // namespace vigil::control
