// The janitor's metrics, declared in one place: seed 001 "Metrics" for the
// GPUReset controller (gpu_reset_*, with the seed's labels and status values)
// and their counterparts for the RebootNode controller (reboot_node_*). The
// janitor actor writes them into a prometheus-cpp registry; /metrics renders
// them on an HTTP thread. Nothing decides on them.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "runtime/http/http_server.hpp"
#include "runtime/metrics/metrics.hpp"

namespace vigil {

/// The labels seed 001 puts on a GPU reset's series.
struct gpu_reset_labels {
  std::string node;
  std::string gpu_type; ///< the node's nvidia.com/gpu.product; "unknown" when empty
  std::string gpu_id;   ///< the GPU's UUID (spec.gpuUUIDs[0])
};

class janitor_metrics {
public:
  janitor_metrics();

  /// gpu_reset_duration_seconds and reboot_node_duration_seconds buckets.
  static constexpr std::array<double, 8> duration_buckets{30,  60,   120,  300,
                                                          600, 1200, 1800, 3600};
  /// gpu_reset_requests_completed_total{status}.
  static constexpr const char* success = "success";
  static constexpr const char* failure = "failure";

  /// A GPUReset was taken up (left Pending). Its GPU's completion, failure
  /// reason and duration series start at 0, so that its first completion is
  /// an increase Prometheus can see (a series born at 1 shows none).
  void reset_started(const gpu_reset_labels& gpu);
  /// A GPUReset reached Succeeded or Failed (`reason`: its failureReason).
  void reset_finished(const gpu_reset_labels& gpu, bool succeeded,
                      const std::string& reason, double duration_seconds);
  /// The GPUResets in progress at the last listing, by (node, gpu_type).
  /// A pair seen before and absent now reads 0 rather than vanishing, so that
  /// min_over_time sees the reset end.
  void set_active_resets(
    const std::map<std::pair<std::string, std::string>, std::int64_t>& active);

  void reboot_started(const std::string& node);
  void reboot_finished(const std::string& node, bool succeeded, const std::string& reason,
                       double duration_seconds);
  void set_active_reboots(const std::map<std::string, std::int64_t>& active);

  std::int64_t active_resets() const;  ///< all nodes together (the summary)
  std::int64_t active_reboots() const; ///< all nodes together

  /// Both families' series, for a scrape that gathers more than these.
  metrics::family_list collect() const;
  /// Prometheus text exposition (format 0.0.4) of both families.
  std::string render() const;

private:
  /// One controller's families (gpu_reset_* or reboot_node_*) in the
  /// registry. prometheus-cpp's instruments are thread-safe, so the scrape
  /// on the HTTP thread reads them while the janitor actor writes; the maps
  /// of what was seen are the janitor actor's alone.
  struct family_set {
    family_set(prometheus::Registry& registry, const std::string& prefix,
               const std::string& what, const std::string& duration_help);

    void start(const prometheus::Labels& request, const prometheus::Labels& group,
               const std::vector<std::string>& reasons);
    void finish(const prometheus::Labels& request, const prometheus::Labels& group,
                bool succeeded, const std::string& reason, double duration_seconds);
    void set_active(const std::map<prometheus::Labels, std::int64_t>& now_active);
    std::int64_t active_total() const;

    prometheus::Family<prometheus::Counter>& requests;
    prometheus::Family<prometheus::Counter>& completed; ///< with status
    prometheus::Family<prometheus::Gauge>& active;
    prometheus::Family<prometheus::Counter>& failures;     ///< with reason
    prometheus::Family<prometheus::Histogram>& durations;  ///< with status
    std::map<prometheus::Labels, std::int64_t> active_now; ///< every group seen
  };

  std::shared_ptr<prometheus::Registry> registry_;
  family_set reset_;
  family_set reboot_;
};

/// Prometheus text of both families (gpu_reset_*, reboot_node_*).
std::string render_janitor_metrics(const janitor_metrics& metrics);

/// The HTTP face of `vigil janitor` run on its own: GET /metrics (the
/// janitor's families, then `more_metrics()` when set, e.g. the gateway's),
/// /healthz and /readyz; 404 elsewhere. Answers on the I/O thread.
http::handler
make_janitor_http_handler(std::shared_ptr<const janitor_metrics> metrics,
                          std::function<metrics::family_list()> more_metrics = {});

} // namespace vigil
