// The fleet simulation's trace: faults with their ground truth (the least
// action that fixes each) and noise, drawn from the fault model with seeded
// randomness that is the same on every platform. Model: FLEET_MODEL.md.
#pragma once

#include <array>
#include <bitset>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "messages/wall_time.hpp"
#include "runtime/sim/fleet_simulation.hpp"

namespace vigil::demo::fleet_sim {

using std::chrono::nanoseconds;

using std::chrono::nanoseconds;

constexpr int gpus_per_node = 8;
constexpr int nics_per_node = 8;
constexpr std::uint8_t whole_node = 0xFF;
constexpr int max_nodes = 100000;
constexpr int max_days = 3650;
/// Time zero of every run: the manual clock's default start.
inline const wall_time epoch = from_unix(1'700'000'000, 0);

/// HGX H100 bus addresses of GPUs 0..7.
constexpr std::array<const char*, gpus_per_node> gpu_pci = {
  "0000:18:00", "0000:2a:00", "0000:3a:00", "0000:5d:00",
  "0000:9a:00", "0000:ab:00", "0000:ba:00", "0000:db:00"};

inline int gpus_in(std::uint8_t mask) {
  return static_cast<int>(std::bitset<8>(mask).count());
}

inline std::uint8_t gpu_bit(int gpu) {
  return static_cast<std::uint8_t>(1u << gpu);
}

/// Whole milliseconds, so that every time in a run is exact.
inline nanoseconds to_ns(double seconds) {
  return std::chrono::milliseconds{std::llround(seconds * 1000.0)};
}

// Randomness: mt19937_64's output is fixed by the standard; the std
// distributions are not, so these few are written out.

inline std::uint64_t mix(std::uint64_t x) { // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

class random_stream {
public:
  explicit random_stream(std::uint64_t seed) : engine_(seed) {}

  /// [0, 1) from the top 53 bits.
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  bool chance(double p) { return uniform() < p; }
  int below(int n) { return std::min(n - 1, static_cast<int>(uniform() * n)); }
  /// By inversion.
  double exponential(double mean) { return -mean * std::log1p(-uniform()); }
  nanoseconds between(std::chrono::seconds lo, std::chrono::seconds hi) {
    return to_ns(static_cast<double>(lo.count())
                 + static_cast<double>((hi - lo).count()) * uniform());
  }
  template <std::size_t N>
  std::size_t weighted(const std::array<double, N>& weights) {
    double total = 0;
    for (double w : weights)
      total += w;
    double pick = uniform() * total;
    for (std::size_t i = 0; i < N; ++i) {
      if (pick < weights[i])
        return i;
      pick -= weights[i];
    }
    return N - 1;
  }

private:
  std::mt19937_64 engine_;
};

// The trace: faults with their ground truth, and noise.

enum class category {
  faulty_gpu,
  hbm,
  software,
  network,
  host_maintenance,
  sram,
  gsp,
  nic,
  other_host
};
constexpr std::size_t category_count = 9;
constexpr std::array<const char*, category_count> category_keys = {
  "faultyGpu", "hbm", "software", "network",  "hostMaintenance",
  "sram",      "gsp", "nic",      "otherHost"};
constexpr std::array<const char*, category_count> category_labels = {
  "faulty GPU", "HBM", "software", "network",   "host maintenance",
  "SRAM",       "GSP", "NIC",      "other host"};

std::array<double, category_count> category_weights(const fleet_model& m);

/// The least action that fixes a fault; none: nothing is faulty; external:
/// not the node's fault (a leaf switch), repaired by others.
enum class fix_level { none, reset, reboot, replace, external };

enum class signal_kind { xid, port_flapping, port_down, nic_gone, switch_outage, silent };

struct fault {
  category what = category::software;
  signal_kind signal = signal_kind::xid;
  fix_level needs = fix_level::none;
  int node = 0;
  wall_time onset{};
  int xid = 0;
  int gpu = -1;
  int nic = -1;
  std::uint64_t stream_seed = 0; ///< its recurrences and flaps
  int first_node = 0;            ///< switch outage: nodes [first_node, end_node)
  int end_node = 0;
  wall_time repaired{};

  /// A node-local hardware fault: some action on the node fixes it.
  bool hardware() const {
    return needs == fix_level::reset || needs == fix_level::reboot
           || needs == fix_level::replace;
  }
};

struct noise_signal {
  wall_time at{};
  int node = 0;
  bool flap = false; ///< a NIC flap, else an application XID
  int xid = 0;
  int gpu = 0;
  int nic = 0;
  nanoseconds down{};
};

struct fleet_trace {
  std::vector<fault> faults;
  std::vector<noise_signal> noise;
  std::vector<bool> whole_node_jobs;
  std::vector<int> outages; ///< indexes of switch-outage faults
};

constexpr std::array<int, 3> app_xid_codes = {13, 31, 43};
constexpr std::array<double, 3> app_xid_weights = {50, 30, 20};
/// Every XID the model emits; the catalog must have each.
constexpr std::array<int, 10> model_xids = {13, 31, 43, 48, 79, 94, 95, 119, 120, 154};

/// The trace of `o`'s seed: every fault and noise signal, by onset.
fleet_trace make_trace(const fleet_options& o);
/// Every option within its range, every XID the model emits in the catalog
/// (fleet_model_file.cpp).
status validate(const fleet_options& o, const agent::xid_catalog& catalog);
/// What the trace holds, for the report (fleet_report.cpp).
trace_summary summarise(const fleet_options& o, const fleet_trace& t,
                        const agent::xid_catalog& catalog);

/// A kernel-log line an NVIDIA driver writes for XID `code` on GPU `gpu`.
std::string xid_line(int code, int gpu);
/// The UUID of GPU `gpu` of `node` in its `incarnation` (a replaced node's
/// GPUs are new).
std::string gpu_uuid(int node, int incarnation, int gpu);

} // namespace vigil::demo::fleet_sim
