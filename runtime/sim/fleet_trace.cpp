#include "runtime/sim/fleet_trace.hpp"

#include <algorithm>
#include <cstdio>

namespace vigil::demo::fleet_sim {

std::array<double, category_count> category_weights(const fleet_model& m) {
  return {
    m.faulty_gpu_percent,       m.hbm_percent,  m.software_percent, m.network_percent,
    m.host_maintenance_percent, m.sram_percent, m.gsp_percent,      m.nic_percent,
    m.other_host_percent};
}

namespace {

fix_level draw_fix(random_stream& r, const fix_odds& odds) {
  const double u = r.uniform();
  if (u < odds.reset)
    return fix_level::reset;
  if (u < odds.reset + odds.reboot)
    return fix_level::reboot;
  return fix_level::replace;
}

/// Poisson arrivals over the horizon.
std::vector<wall_time> arrivals(random_stream& r, double per_1000_node_days, int nodes,
                                int days) {
  std::vector<wall_time> out;
  if (!(per_1000_node_days > 0))
    return out;
  const double mean_gap = 86400.0 * 1000.0 / (per_1000_node_days * nodes);
  const double horizon = 86400.0 * days;
  for (double t = r.exponential(mean_gap); t < horizon; t += r.exponential(mean_gap))
    out.push_back(epoch + to_ns(t));
  return out;
}

void describe(fault& f, const fleet_model& m, random_stream& r, int nodes) {
  f.gpu = r.below(gpus_per_node);
  f.nic = r.below(nics_per_node);
  switch (f.what) {
    case category::faulty_gpu:
      f.xid = 79;
      f.needs = draw_fix(r, m.faulty_gpu_fix);
      break;
    case category::hbm:
      f.xid = 48;
      f.needs = draw_fix(r, m.hbm_fix);
      break;
    case category::software: f.xid = app_xid_codes[r.weighted(app_xid_weights)]; break;
    case category::network:
      if (r.chance(m.network_switch_fraction)) {
        f.signal = signal_kind::switch_outage;
        f.needs = fix_level::external;
        f.first_node = f.node / m.nodes_per_leaf * m.nodes_per_leaf;
        f.end_node = std::min(nodes, f.first_node + m.nodes_per_leaf);
        f.repaired =
          f.onset
          + to_ns(r.exponential(static_cast<double>(m.switch_repair_mean.count())));
      } else {
        f.signal = r.chance(m.cable_flapping_fraction) ? signal_kind::port_flapping
                                                       : signal_kind::port_down;
        f.needs = fix_level::replace;
      }
      break;
    case category::host_maintenance:
      f.xid = 154;
      f.needs = draw_fix(r, m.host_maintenance_fix);
      break;
    case category::sram:
      if (r.chance(m.sram_uncontained_fraction)) {
        f.xid = 95;
        f.needs = draw_fix(r, m.sram_fix);
      } else {
        f.xid = 94; // contained: the application restarts, nothing to repair
      }
      break;
    case category::gsp:
      f.xid = r.chance(0.5) ? 119 : 120;
      f.needs = draw_fix(r, m.gsp_fix);
      break;
    case category::nic:
      f.signal = signal_kind::nic_gone;
      f.needs = fix_level::replace;
      break;
    case category::other_host:
      f.xid = 79;
      f.signal =
        r.chance(m.other_host_silent_fraction) ? signal_kind::silent : signal_kind::xid;
      f.needs = draw_fix(r, m.other_host_fix);
      break;
  }
}

} // namespace

fleet_trace make_trace(const fleet_options& o) {
  const auto& m = o.model;
  fleet_trace t;
  // One stream per part, so that changing one rate leaves the others' draws.
  random_stream jobs(mix(o.seed ^ 0x6a6f6273ull));
  for (int n = 0; n < o.nodes; ++n)
    t.whole_node_jobs.push_back(jobs.chance(m.whole_node_job_fraction));
  random_stream faults(mix(o.seed ^ 0x6661756c7473ull));
  const auto weights = category_weights(m);
  for (auto at : arrivals(faults, m.interruptions_per_1000_node_days, o.nodes, o.days)) {
    fault f;
    f.onset = at;
    f.node = faults.below(o.nodes);
    f.what = static_cast<category>(faults.weighted(weights));
    f.stream_seed = mix(o.seed ^ mix(t.faults.size() + 1));
    describe(f, m, faults, o.nodes);
    if (f.signal == signal_kind::switch_outage)
      t.outages.push_back(static_cast<int>(t.faults.size()));
    t.faults.push_back(f);
  }
  random_stream xids(mix(o.seed ^ 0x78696473ull));
  for (auto at : arrivals(xids, m.app_xids_per_1000_node_days, o.nodes, o.days)) {
    noise_signal n;
    n.at = at;
    n.node = xids.below(o.nodes);
    n.xid = app_xid_codes[xids.weighted(app_xid_weights)];
    n.gpu = xids.below(gpus_per_node);
    t.noise.push_back(n);
  }
  random_stream flaps(mix(o.seed ^ 0x666c617073ull));
  for (auto at : arrivals(flaps, m.nic_flaps_per_1000_node_days, o.nodes, o.days)) {
    noise_signal n;
    n.at = at;
    n.node = flaps.below(o.nodes);
    n.flap = true;
    n.nic = flaps.below(nics_per_node);
    n.down = flaps.between(m.flap_down_min, m.flap_down_max);
    t.noise.push_back(n);
  }
  return t;
}

/// The kernel log line of one XID, as the driver writes it.
std::string xid_line(int code, int gpu) {
  const std::string head =
    std::string("NVRM: Xid (PCI:") + gpu_pci[gpu] + "): " + std::to_string(code) + ", ";
  const std::string app = head + "pid=4242, name=python3, ";
  switch (code) {
    case 13: return app + "Graphics Exception: ESR 0x514730=0x201f0000 0x514734=0x0";
    case 31:
      return app
             + "Ch 00000008, intr 10000000. MMU Fault: ENGINE GRAPHICS "
               "GPCCLIENT_T1_0 faulted @ 0x7f3a_00000000. Fault is of type "
               "FAULT_PDE ACCESS_TYPE_READ";
    case 43: return app + "Ch 00000010";
    case 48:
      return app
             + "An uncorrectable double bit error (DBE) has been detected on GPU "
               "in the framebuffer at partition 6, subpartition 0.";
    case 79: return head + "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.";
    case 94: return app + "Contained: SM (0x1). RST: No, D-RST: No";
    case 95: return app + "Uncontained: FBHUB. RST: Yes, D-RST: No";
    case 119:
      return app
             + "Timeout after 6s of waiting for RPC response from GPU0 GSP! "
               "Expected function 76 (GSP_RM_CONTROL) (0x20800a4c 0x4).";
    case 120: return app + "GSP task timeout @ pc:0x4bd36ec, task: 1";
    case 154:
      return head
             + "pid='<unknown>', name=<unknown>, GPU recovery action changed "
               "from 0x0 (None) to 0x2 (Node Reboot Required)";
    default: return app + "XID " + std::to_string(code);
  }
}

std::string gpu_uuid(int node, int incarnation, int gpu) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "GPU-%08x-%04x-4000-8000-%012x",
                static_cast<unsigned>(node), static_cast<unsigned>(incarnation & 0xffff),
                static_cast<unsigned>(gpu));
  return buf;
}

} // namespace vigil::demo::fleet_sim
