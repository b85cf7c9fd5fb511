// The simulator of `vigil demo`: plays everything around vigil that a real
// cluster would — the kubelet (pods in their grace period go), the GPU
// operator (operands follow their deploy labels), the Job controller (the
// janitor's reset and reboot Jobs run for a while, then end with the log
// lines and boot-ID changes the real ones produce), and each node's agent:
// kernel-log lines go through the real XID parser, InfiniBand port states
// through the real NIC monitor, and the HealthEvents through the real ingest
// path (the NDJSON decoder and the ingest actor). Time is the actor clock:
// virtual in `vigil demo`, real under `--serve`.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/atom.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/agent/nic/nic_monitor_core.hpp"
#include "actors/agent/xid/xid_catalog.hpp"
#include "runtime/clock.hpp"
#include "runtime/sim/simulated_cluster.hpp"

namespace vigil::demo {

/// (xid_atom, node, gpu, codes): the driver logs these XIDs on that GPU.
using xid_atom = caf::atom_constant<caf::atom("xid")>;
/// (nic_atom, node, nic, up): port 1 of that NIC goes down or comes back.
using nic_atom = caf::atom_constant<caf::atom("nic")>;
/// (failreset_atom, node, gpu): that GPU's next reset Job fails (exit 2).
using failreset_atom = caf::atom_constant<caf::atom("failreset")>;
/// (failvalid_atom, node): the node's next validation Job fails.
using failvalid_atom = caf::atom_constant<caf::atom("failvalid")>;
/// (simtick_atom): the simulated controllers' periodic pass.
using simtick_atom = caf::atom_constant<caf::atom("simtick")>;

/// Runs `f` on the cluster's object store and wakes watches: the in-process
/// API of the virtual-time demo, or the API test server under --serve.
using store_access = std::function<void(const std::function<void(kube::object_store&)>&)>;

struct simulator_settings {
  cluster_spec spec;
  std::uint64_t seed = 1;
  std::chrono::seconds tick{5};                       ///< how often the controllers look
  std::chrono::seconds reset_min{60}, reset_max{300}; ///< a GPU reset Job runs 1–5 min
  /// A validation Job (`dcgmi diag -r 2` and its scheduling) runs 2–3 min.
  std::chrono::seconds validation_min{120}, validation_max{180};
  /// nvidia-bug-report.sh, before a reboot that follows a failed reset: 1–2 min.
  std::chrono::seconds bug_report_min{60}, bug_report_max{120};
  std::chrono::seconds reboot_min{600}, reboot_max{1800}; ///< a reboot takes 10–30 min
};

/// What the simulator saw, for the demo's summary.
struct eviction_record {
  std::string ns, pod, node;
};
struct simulation_record {
  std::vector<eviction_record> evictions; ///< workload pods that were evicted
  std::uint64_t events_sent = 0;          ///< HealthEvents posted to ingest
  std::uint64_t events_acknowledged = 0;  ///< answered 200 (stored or duplicate)
  std::uint64_t reset_jobs = 0, reboot_jobs = 0;
  /// Why the simulator could not start (its hosts' sysfs trees could not be
  /// written: a full or unwritable TMPDIR); "" while it runs.
  std::string failure;
};

/// One running Job of the janitor, as the simulated Job controller tracks it.
struct simulated_job {
  std::string name;
  int node = 0;
  bool reboot = false;
  bool validation = false; ///< a validation Job of the control plane (seed 003)
  bool bug_report = false; ///< the janitor's nvidia-bug-report.sh before a reboot
  std::string gpu_uuid;    ///< reset Jobs
  steady_time due{};
  bool fails = false;
  bool finished = false; ///< ended; kept until the janitor deletes the Job
};

struct node_agent {
  agent::gpu_metadata metadata;
  std::unique_ptr<fake_sysfs> host; ///< the host's sysfs, as the NIC monitor reads it
  std::optional<agent::nic_poller> nic;
  std::vector<int> down_ports;
  std::vector<std::uint64_t> link_downed;
  int boots = 1;
  wall_time boot_time{};
};

struct cluster_simulator_state {
  simulator_settings settings;
  store_access access;
  caf::actor ingest;
  std::shared_ptr<const clock> time;
  std::shared_ptr<simulation_record> record;
  agent::xid_catalog catalog;
  std::map<int, node_agent> agents;
  std::map<std::string, simulated_job> jobs; ///< by Job name
  std::set<std::pair<int, std::string>> failing_resets;
  std::set<int> failing_validations; ///< nodes whose next validation Job fails
  std::mt19937_64 dice;
  static inline const char* name = "cluster_simulator";
};

using cluster_simulator_actor = caf::stateful_actor<cluster_simulator_state>;

/// Populates nothing (the caller did); starts each node's NIC monitor with a
/// baseline poll and the controllers' periodic pass. Also answers
/// (summary_atom, node) → JSON: the node's NIC ports as its agent sees them.
caf::behavior cluster_simulator(cluster_simulator_actor* self,
                                simulator_settings settings, store_access access,
                                caf::actor ingest, agent::xid_catalog catalog,
                                std::shared_ptr<const clock> time,
                                std::shared_ptr<simulation_record> record);

/// A duration drawn uniformly from [low, high] with the simulator's dice,
/// independent of the standard library's distributions (same seed, same run).
std::chrono::seconds draw_duration(std::mt19937_64& dice, std::chrono::seconds low,
                                   std::chrono::seconds high);

} // namespace vigil::demo
