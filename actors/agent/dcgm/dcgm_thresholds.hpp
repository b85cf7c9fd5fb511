// What the DCGM telemetry check treats as a fault, with the hysteresis that
// keeps a node from flapping: a finding is raised at `raise` and cleared only
// below `clear`. Plain data, read from the `dcgm:` section of vigil.yaml.
#pragma once

namespace vigil::agent {

/// Raised when a value reaches `raise`; cleared when it falls below `clear`
/// (clear <= raise, so values between the two keep the last state).
struct dcgm_band {
  double raise = 0;
  double clear = 0;
};

struct dcgm_thresholds {
  /// DCGM_FI_DEV_GPU_TEMP, °C. H100/H200 SXM list a maximum operating
  /// temperature of 87 °C (`nvidia-smi -q`, "GPU Max Operating Temp").
  dcgm_band gpu_temp_c{87, 82};
  /// DCGM_FI_DEV_MEMORY_TEMP (HBM), °C; 95 °C is their "Memory Max
  /// Operating Temp".
  dcgm_band memory_temp_c{95, 90};
  /// DCGM_FI_DEV_POWER_VIOLATION / DCGM_FI_DEV_THERMAL_VIOLATION count the
  /// microseconds a GPU was held back; the share of the last scrape interval
  /// spent throttled (0–1).
  dcgm_band power_violation_share{0.5, 0.2};
  dcgm_band thermal_violation_share{0.2, 0.05};
  /// The violation counters' unit in seconds: dcgm_fields.h says µs (1e-6);
  /// some newer DCGM releases document ns (1e-9).
  double violation_counter_seconds = 1e-6;
  /// NVLink CRC (flit + data), replay and recovery errors per second, summed
  /// over the GPU's links, between two scrapes.
  dcgm_band nvlink_crc_per_second{100, 10};
  dcgm_band nvlink_replay_per_second{100, 10};
  dcgm_band nvlink_recovery_per_second{1, 0.1};
  /// Retired pages (single- plus double-bit) at which the GPU is replaced
  /// rather than reset: the page-retirement table holds 64.
  double retired_pages_replace = 60;
};

} // namespace vigil::agent
