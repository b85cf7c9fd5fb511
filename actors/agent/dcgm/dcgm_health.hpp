// The DCGM telemetry check (seed 004's scrape-and-decide path, seed 003's
// DCGM section) as plain code: successive dcgm-exporter pages in, per-GPU
// HealthEvents out. Each finding is level-based with hysteresis and is sent
// only when it changes, so a steady fault is one event, not one per scrape.
// The agent's dcgm_monitor and `vigil parse dcgm` both drive this class.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actors/agent/dcgm/dcgm_thresholds.hpp"
#include "actors/agent/dcgm/prometheus_text.hpp"
#include "messages/health_event.hpp"
#include "messages/wall_time.hpp"

namespace vigil::agent {

class xid_catalog;

inline constexpr std::string_view dcgm_agent_name = "dcgm-health-monitor";

/// The checks, one per fault family, each with its own record per GPU on the
/// control plane (so one clearing never clears another).
inline constexpr std::string_view dcgm_xid_check = "DCGMXidError";
inline constexpr std::string_view dcgm_ecc_check = "DCGMEccDBE";
inline constexpr std::string_view dcgm_row_remap_check = "DCGMRowRemap";
inline constexpr std::string_view dcgm_retired_pages_check = "DCGMRetiredPages";
inline constexpr std::string_view dcgm_nvlink_check = "DCGMNVLinkErrors";
inline constexpr std::string_view dcgm_thermal_check = "DCGMThermal";
inline constexpr std::string_view dcgm_power_check = "DCGMPowerViolation";
/// The exporter itself: reported store-only, never as a GPU fault.
inline constexpr std::string_view dcgm_exporter_check = "DCGMExporterReachable";

/// DCGM's "blank" values (no data, not found, not supported, no permission),
/// which old exporters print: from int32 0x7ffffff0 up for a small gauge
/// (temperature, XID, flags), from int64 0x7ffffffffffffff0 up for a counter;
/// also NaN, infinities and negatives, which no field vigil reads can hold.
bool is_dcgm_blank(double value, bool counter);

/// A check none of whose fields has a usable value on a page, for any GPU:
/// it cannot find a fault. dcgm-exporter's default counters
/// (etc/default-counters.csv) leave the ECC, retired-page, NVLink-error and
/// violation fields commented out, so on a default install four of the
/// checks read nothing.
struct dcgm_blind_check {
  std::string_view check;
  std::vector<std::string_view> fields; ///< what it reads; any one would do
};

/// The checks that read nothing on `page`, in the order of the checks.
std::vector<dcgm_blind_check> dcgm_blind_checks(const metric_page& page);

/// "DCGMEccDBE (DCGM_FI_DEV_ECC_DBE_VOL_TOTAL or DCGM_FI_DEV_ECC_DBE_AGG_TOTAL), …";
/// "" for none.
std::string describe(const std::vector<dcgm_blind_check>& blind);

class dcgm_health {
public:
  /// `catalog` (may be null) gives an XID's recommended action; without it
  /// DCGM XIDs are reported with CONTACT_SUPPORT.
  dcgm_health(std::string node, dcgm_thresholds thresholds,
              const xid_catalog* catalog = nullptr);

  /// One scrape. A check's first verdict on a GPU is sent whatever it is
  /// (the healthy ones grouped into one event per check naming those GPUs, so
  /// records left by an earlier run are cleared); after that only changes.
  /// Counters need two pages: the first is their baseline, and a counter that
  /// went down (the exporter restarted) is a new baseline (the windowed XID
  /// count, XIDs of the last minutes, is reported at the first page too).
  std::vector<health_event> observe(const metric_page& page, wall_time now);

  /// The exporter could not be read (refused, timed out, not a metrics
  /// page): one store-only event per outage, and a store-only healthy one
  /// when a page comes again. GPU findings are left as they were.
  std::vector<health_event> exporter_unreachable(const std::string& why, wall_time now);

  bool exporter_down() const { return exporter_down_; }
  std::size_t gpus() const { return gpus_.size(); }

private:
  /// One check's last sent state for one GPU.
  struct finding {
    bool unhealthy = false;
    std::string signature; ///< code and action: a change is sent again
  };
  struct gpu_state {
    std::string pci;
    std::map<std::string, double> counters; ///< metric (and xid) → last value
    std::optional<wall_time> scraped;
    std::map<std::string_view, finding> findings;
  };

  health_event make_event(std::string_view check, bool healthy, wall_time now) const;

  std::string node_;
  dcgm_thresholds thresholds_;
  const xid_catalog* catalog_;
  std::map<std::string, gpu_state> gpus_; ///< by GPU UUID
  bool exporter_down_ = false;

  friend struct dcgm_scrape;
};

} // namespace vigil::agent
