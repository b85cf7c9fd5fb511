// The fleet fault simulation of `vigil demo --fleet`: one trace of faults and
// noise on a simulated GPU fleet, run once under vigil's own rules and once
// under a reboot-every-fault baseline. Pure: no CAF, no I/O (the caller loads
// the XID catalog); deterministic for a given seed.
//
// THE MODEL (every number below is a field of fleet_model, with its default)
//
// Fleet. `nodes` HGX H100 nodes: 8 GPUs on NVSwitch (so a single GPU can be
// reset, seed 001 "Scope of Support"), 8 InfiniBand NICs mlx5_0..7 with one
// port each, rail-optimised: the leaf switch of one rail serves 32 consecutive
// nodes. 100 % of the nodes run one 8-GPU pod (training, as in Llama 3); the
// rest, when whole_node_job_fraction < 1, run single-GPU pods.
//
// Interruptions. A Poisson process of 3.8 per 1,000 node-days on uniformly
// chosen nodes: Llama 3 405B pre-training saw 419 unexpected interruptions in
// 54 days on 16,384 H100s (2,048 nodes), "The Llama 3 Herd of Models" §3.3.4,
// Table 5, whose breakdown (rounded) picks the category. Each category is
// mapped to what vigil's agents report and to a ground truth, the least action
// that fixes it, drawn per fault:
//
//   category        %  signal → RecommendedAction           least fix
//   faulty GPU     30  XID 79 (off the bus) → RESTART_BM     reboot 50 %, replace 50 %
//   HBM            17  XID 48 (DBE) → COMPONENT_RESET        reset 85 %, replace 15 %
//   software       13  XID 13/31/43 (50/30/20 %) → NONE      nothing is faulty
//   network         8  half a leaf switch: port DOWN on one  not the nodes' fault
//                      rail of its 32 nodes within 10 s, UP
//                      after repair (exponential, mean 45 min);
//                      half a cable: port flapping (DOWN     replace (another host,
//                      5-30 s every 1-4 min) or DOWN for     another cable); a reboot
//                      good, half each → REPLACE_VM          does not
//   host maint.     8  XID 154 "to 0x2 (Node Reboot          reboot 90 %, replace 10 %
//                      Required)" → RESTART_BM
//   SRAM            5  half XID 95 (uncontained) →           reset 80, reboot 10,
//                      COMPONENT_RESET; half XID 94          replace 10 %; XID 94:
//                      (contained) → NONE                    nothing left to fix
//   GSP             4  XID 119/120 → COMPONENT_RESET         reset 80, reboot 15,
//                                                            replace 5 %
//   NIC             2  NIC gone from sysfs → REPLACE_VM      replace
//   other host     13  XID 79 (70 %) or nothing vigil sees   reboot 40 %, replace 60 %
//                      (30 %: DIMM, disk, power supply)
//
// Signals are built by the agents' own code: XID lines go through the kernel
// log parser and xid_event_builder with the loaded catalog (so the action is
// the one config/xid_catalog.csv and its workflows give), NIC events through
// make_port_state_event / make_disappeared_event (InfiniBandStateCheck,
// entities NIC + NICPort, seed 002 §11.2, §13). A GPU reset ends with the
// reset Job's "GPU reset occurred" line (seed 000 §1.2).
//
// Noise, with nothing faulty: application XIDs 13/31/43 at 20 per 1,000
// node-days; NIC flaps (one port DOWN for 5-30 s) at 5 per 1,000 node-days.
// link_downed_counter_events (default false) adds the InfiniBandDegradationCheck
// "link_downed increased" event that the NIC agent also sends for every DOWN.
//
// Faults over time. An action that does not fix a fault leaves it in place:
// once its GPU is back at work the fault shows again 5 min + exponential
// (mean 25 min) later (the job hits it), as a fresh signal; that is how a
// verification fails and the policy escalates. A port or NIC condition shows
// again when the node boots. A node-local hardware fault that no policy
// action (or person it asked) has fixed 6 h after its onset is found by
// people because jobs keep crashing: a missed fault, fixed by hand (a replace).
//
// Durations. Drain: 1 min for single-GPU pods, 5 min for a whole-node job.
// GPU reset: uniform 1-5 min (seed 001: under 2 min typical). Reboot: uniform
// 10-30 min (seed 001: "up to 20 minutes"). Replace: 4 h until a new node
// joins. CONTACT_SUPPORT: a person repairs within 8 h. A tripped breaker is
// reset by an operator after 30 min.
//
// vigil. Each node's events go through what the control plane runs: the fleet
// actor's fabric_correlator (ports down on 3+ nodes in 5 min: one incident,
// not quarantined), the node's node_correlator (dedup, repeated XIDs →
// CONTACT_SUPPORT, NIC flaps/drops → REPLACE_VM), active_events with the
// default "fatal" quarantine rule, the circuit_breaker (cordon budget 50 % in
// 5 min), desired_drain (partial for COMPONENT_RESET, seed 000 §3.1), then
// plan_remediation, the remediation_queue (seed 000 §4.3) and the
// escalation_tracker (caps, cooldown/backoff, reset → reboot → replace →
// support, repeated-remediation rule), all with config/vigil.yaml's defaults.
// A reset is verified by its healthy event, a reboot clears every record
// (the boot ID changed), CONTACT_SUPPORT keeps the node quarantined until
// the person is done.
//
// Baseline, "reboot every fault": every unhealthy signal that reaches the
// control plane (application XIDs and NIC flaps included) drains the whole
// node and reboots it, unless it is already in maintenance; the 4th reboot of
// a node within 24 h is a replace. It has no breaker.
//
// THE FIGURES (per policy)
//   gpuHoursLost          gpuHoursOutOfService + gpuHoursFaultyInService.
//   gpuHoursOutOfService  GPUs taken away from work × time until given back:
//                         from the start of a drain (the GPUs its evictions
//                         free: 1 per single-GPU pod, 8 for a whole-node pod or
//                         full drain) until the node is released; 8 while a
//                         node reboots or waits for its replacement; plus 8 × 4 h
//                         for each missed fault repaired by hand. A cordon by
//                         itself costs nothing here.
//   gpuHoursFaultyInService  GPUs a node-local hardware fault keeps failing
//                         while they are at work, from its onset until it is
//                         fixed or drained away (its GPU's pod; the whole node
//                         for whole-node jobs and NIC, cable and host faults).
//   remediations          actions taken: reset, reboot, replace, contactSupport.
//   falseRemediations     actions on hardware that was not faulty: a reset of a
//                         GPU with no fault, a reboot, replace or support call
//                         on a node with no node-local hardware fault (noise,
//                         software XIDs, a switch outage).
//   missedFaults          node-local hardware faults neither fixed by the
//                         policy nor handed to a person before people found
//                         them (6 h after onset, unless a remediation of the
//                         node is under way then); by category in
//                         missedByCategory. Every hardware fault ends fixed by
//                         the policy, fixed by the person it asked, or missed.
//   breakerTrips          vigil: times its breaker tripped. Baseline (no
//                         breaker): times its cordons would have tripped the same
//                         breaker, its budget counted afresh after each trip.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "actors/control/remediation/escalation.hpp"
#include "actors/control/rules/circuit_breaker.hpp"
#include "actors/control/rules/correlation_rules.hpp"
#include "messages/expected.hpp"

namespace vigil::agent {
class xid_catalog;
} // namespace vigil::agent

namespace vigil::demo {

/// The least action that fixes one fault of a category, as shares of that
/// category's faults; the three add up to 1.
struct fix_odds {
  double reset = 0;   ///< a reset of the faulty GPU fixes it
  double reboot = 0;  ///< a reboot fixes it, a reset does not
  double replace = 0; ///< only new hardware does
};

/// Every rate, share and duration of the simulation, with the reason for its
/// default. Durations in seconds.
struct fleet_model {
  // The fleet.
  std::string gpu_product = "NVIDIA H100 80GB HBM3"; ///< nvidia.com/gpu.product
  bool nvswitch_fabric = true; ///< HGX baseboard; Hopper resets one GPU anyway
  int nodes_per_leaf = 32;     ///< nodes behind one leaf switch of one rail
  /// Nodes running one 8-GPU pod; the rest run single-GPU pods. 1.0: Llama 3
  /// trained with whole-node jobs.
  double whole_node_job_fraction = 1.0;

  // Interruptions: 419 in 54 days on 2,048 nodes (Llama 3 §3.3.4).
  double interruptions_per_1000_node_days = 3.8;
  // Their breakdown in percent (Llama 3 Table 5, rounded; "other host" is the
  // rest: thermal, SSD, power supply, chassis, PCIe, dependencies).
  double faulty_gpu_percent = 30;
  double hbm_percent = 17;
  double software_percent = 13;
  double network_percent = 8; ///< "network switch/cable"
  double host_maintenance_percent = 8;
  double sram_percent = 5;
  double gsp_percent = 4; ///< GPU System Processor
  double nic_percent = 2;
  double other_host_percent = 13;

  // Noise: signals with nothing faulty behind them.
  double app_xids_per_1000_node_days = 20; ///< XIDs 13/31/43 from user code
  double nic_flaps_per_1000_node_days = 5; ///< one port DOWN for seconds

  // Ground truth, in one place.
  /// XID 79: a GPU off the bus often comes back with the PCIe link retrained
  /// by a reboot; the rest are dead GPUs.
  fix_odds faulty_gpu_fix{0, 0.5, 0.5};
  /// XID 48: a reset remaps the failing rows; spare rows run out in some
  /// (repeated DBEs), and only a new GPU helps, which a reboot is not.
  fix_odds hbm_fix{0.85, 0, 0.15};
  /// XID 95: the reset NVIDIA prescribes clears an uncontained SRAM error;
  /// a few need the node's full power cycle or a new GPU.
  fix_odds sram_fix{0.8, 0.1, 0.1};
  /// XIDs 119/120: a hung GSP firmware restarts with the GPU; a few need the
  /// driver reloaded (reboot), a few are failing parts.
  fix_odds gsp_fix{0.8, 0.15, 0.05};
  /// XID 154 "Node Reboot Required": the driver says a reboot does it.
  fix_odds host_maintenance_fix{0, 0.9, 0.1};
  /// Host hardware (DIMM, PSU, PCIe switch): a reboot clears transient ones.
  fix_odds other_host_fix{0, 0.4, 0.6};
  double sram_uncontained_fraction = 0.5;  ///< XID 95, the rest XID 94
  double network_switch_fraction = 0.5;    ///< leaf switch, the rest a cable
  double cable_flapping_fraction = 0.5;    ///< flapping, the rest DOWN for good
  double other_host_silent_fraction = 0.3; ///< no XID: vigil's agents see nothing
  /// Share of unfixed GPU faults the validation finds (a level-2 DCGM
  /// diagnostic catches most, not all, of what a workload would hit).
  double validation_detects = 0.9;
  /// The NIC agent's degradation check also reports every link_downed
  /// increase (fatal, REPLACE_VM, never cleared until a reboot). Default off:
  /// the model follows seed 002 §6, where flaps are port-state events.
  bool link_downed_counter_events = false;

  // Durations (seconds).
  std::chrono::seconds drain_single_gpu_pod{60}; ///< evict one GPU's pod
  std::chrono::seconds drain_whole_node{300};    ///< evict an 8-GPU job's pod
  std::chrono::seconds reset_min{60};            ///< GPUReset Job, seed 001
  std::chrono::seconds reset_max{300};
  std::chrono::seconds reboot_min{600}; ///< RebootNode until Ready, seed 001
  std::chrono::seconds reboot_max{1800};
  std::chrono::seconds replace{4 * 3600};            ///< until a new node joins
  std::chrono::seconds support_turnaround{8 * 3600}; ///< a person repairs
  /// The validation Job after a reset or reboot (seed 003): scheduling plus
  /// `dcgmi diag -r 2`, a few minutes.
  std::chrono::seconds validation{300};
  std::chrono::seconds recurrence_min{300};             ///< unfixed fault shows again
  std::chrono::seconds recurrence_mean_extra{1500};     ///< plus exponential, this mean
  std::chrono::seconds found_otherwise_after{6 * 3600}; ///< people notice a fault
  std::chrono::seconds switch_repair_mean{2700};        ///< exponential, leaf switch back
  std::chrono::seconds switch_down_spread{10};          ///< its ports go down within this
  std::chrono::seconds flap_down_min{5};                ///< a flap's DOWN lasts this long
  std::chrono::seconds flap_down_max{30};
  std::chrono::seconds cable_flap_gap_min{60}; ///< between a bad cable's flaps
  std::chrono::seconds cable_flap_gap_max{240};
  std::chrono::seconds agent_start{60};              ///< boot → agents' first report
  std::chrono::seconds breaker_operator_reset{1800}; ///< a tripped breaker waits

  // The baseline's reboot cap: this many reboots of a node within the window,
  // then a replace (vigil's default max_reboots_per_node, for a fair match).
  int baseline_max_reboots = 3;
  std::chrono::seconds baseline_reboot_window{24 * 3600};

  // vigil's configuration: config/vigil.yaml's defaults.
  control::correlation_config correlation;
  control::escalation_policy escalation;
  control::breaker_config breaker;
};

/// `vigil demo --fleet --model FILE`: YAML whose keys are fleet_model's field
/// names (`interruptions_per_1000_node_days: 5`, `hbm_percent: 20`,
/// `hbm_fix: {reset: 0.9, reboot: 0, replace: 0.1}`, durations in seconds:
/// `replace: 7200`), each replacing `base`'s value. Unknown keys and values of
/// the wrong type are errors naming the key (`model.hbm_percent`); ranges are
/// checked when the simulation starts. vigil's own thresholds come from
/// --config, not from here.
expected<fleet_model> read_fleet_model(const std::string& yaml_text,
                                       fleet_model base = {});

struct fleet_options {
  int nodes = 2048;       ///< --nodes, 1..100000
  int days = 54;          ///< --days, 1..3650
  std::uint64_t seed = 1; ///< --seed
  fleet_model model;
};

struct remediation_counts {
  int reset = 0;
  int reboot = 0;
  int replace = 0;
  int contact_support = 0;

  int total() const { return reset + reboot + replace + contact_support; }
};

/// What one policy made of the trace; the header comment defines each figure.
struct policy_outcome {
  double gpu_hours_lost = 0;
  double gpu_hours_out_of_service = 0;
  double gpu_hours_faulty_in_service = 0;
  remediation_counts remediations;
  int false_remediations = 0;
  int missed_faults = 0;
  int breaker_trips = 0;
  int faults_fixed = 0;            ///< hardware faults its own actions fixed
  int faults_fixed_by_support = 0; ///< by the person it asked
  int signals = 0;                 ///< HealthEvents the control plane received
  int cordons = 0;                 ///< nodes newly cordoned
  int drains = 0;                  ///< drains started (cancelled ones included)
  int escalations = 0;             ///< vigil: escalation_tracker steps up the ladder
  int rule_firings = 0;            ///< vigil: correlation rule verdicts (XID, flap, drop)
  int fabric_incidents = 0;        ///< vigil: fabric incidents opened
  /// missed_faults by category (the trace's keys; categories with none left out).
  std::map<std::string, int> missed_by_category;
};

/// The trace both policies ran, counted.
struct trace_summary {
  int nodes = 0;
  int days = 0;
  std::uint64_t seed = 0;
  int faults = 0;
  /// By category: faultyGpu, hbm, software, network, hostMaintenance, sram,
  /// gsp, nic, otherHost (all present, zero included).
  std::map<std::string, int> faults_by_category;
  int hardware_faults = 0; ///< node-local faults some action fixes
  int switch_outages = 0;
  int app_xids = 0;
  int nic_flaps = 0;
  /// The action the agent's catalog gives each XID the model uses.
  std::map<int, std::string> xid_actions;
};

struct fleet_result {
  trace_summary trace;
  policy_outcome vigil;
  policy_outcome baseline;
};

/// Runs the trace of `options.seed` under both policies. Fails naming the
/// option ("--nodes", "--days", "model.<field>") when one is out of range, or
/// the catalog when it lacks an XID the model uses.
expected<fleet_result> simulate_fleet(const fleet_options& options,
                                      const agent::xid_catalog& catalog);

/// {"vigil": {gpuHoursLost, gpuHoursOutOfService, gpuHoursFaultyInService,
/// remediations{reset, reboot, replace, contactSupport}, falseRemediations,
/// missedFaults, breakerTrips, …}, "baseline": {…}, "trace": {…}}.
nlohmann::json to_json(const fleet_result& result);

/// The comparison as a short table for a terminal.
std::string to_table(const fleet_result& result);

} // namespace vigil::demo
