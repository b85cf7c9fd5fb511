#include "actors/janitor/janitor_metrics.hpp"

#include <algorithm>

#include "actors/janitor/gpu_reset_plan.hpp"

namespace vigil {

namespace {

// The reasons every GPU's failure series starts with (seed 001 "Metrics":
// teardown_failed, the reset command, the health check, …).
const std::vector<std::string>& reset_reasons() {
  static const std::vector<std::string> reasons{
    std::string{janitor::failure_reason::teardown_failed},
    std::string{janitor::failure_reason::job_create_failed},
    std::string{janitor::failure_reason::reset_command_failed},
    std::string{janitor::failure_reason::health_check_failed},
    std::string{janitor::failure_reason::gpu_in_use},
    std::string{janitor::failure_reason::job_failed},
    std::string{janitor::failure_reason::timeout},
    std::string{janitor::failure_reason::redeploy_failed},
    std::string{janitor::failure_reason::labels_not_restored}};
  return reasons;
}

const std::vector<std::string>& reboot_reasons() {
  static const std::vector<std::string> reasons{"job_create_failed", "timeout",
                                                "node_not_found"};
  return reasons;
}

prometheus::Labels with(prometheus::Labels labels, const char* name, std::string value) {
  labels.emplace(name, std::move(value));
  return labels;
}

// node, gpu_type (and gpu_id): seed 001's labels of a reset's series.
prometheus::Labels gpu_labels(const gpu_reset_labels& gpu, bool with_id) {
  prometheus::Labels labels{
    {"node", gpu.node}, {"gpu_type", gpu.gpu_type.empty() ? "unknown" : gpu.gpu_type}};
  if (with_id)
    labels.emplace("gpu_id", gpu.gpu_id);
  return labels;
}

prometheus::Histogram::BucketBoundaries duration_boundaries() {
  return {janitor_metrics::duration_buckets.begin(),
          janitor_metrics::duration_buckets.end()};
}

} // namespace

janitor_metrics::family_set::family_set(prometheus::Registry& registry,
                                        const std::string& prefix,
                                        const std::string& what,
                                        const std::string& duration_help)
  : requests(prometheus::BuildCounter()
               .Name(prefix + "_requests_total")
               .Help(what + " requests taken up.")
               .Register(registry)),
    completed(prometheus::BuildCounter()
                .Name(prefix + "_requests_completed_total")
                .Help(what + " requests completed, by final status (success or failure).")
                .Register(registry)),
    active(prometheus::BuildGauge()
             .Name(prefix + "_active_requests")
             .Help(what + " requests in progress.")
             .Register(registry)),
    failures(prometheus::BuildCounter()
               .Name(prefix + "_failure_reasons_total")
               .Help("Failed " + what + " requests, by reason.")
               .Register(registry)),
    durations(prometheus::BuildHistogram()
                .Name(prefix + "_duration_seconds")
                .Help(duration_help)
                .Register(registry)) {}

void janitor_metrics::family_set::start(const prometheus::Labels& request,
                                        const prometheus::Labels& group,
                                        const std::vector<std::string>& reasons) {
  requests.Add(request).Increment();
  for (const char* status : {success, failure}) {
    completed.Add(with(request, "status", status));
    durations.Add(with(group, "status", status), duration_boundaries());
  }
  for (const auto& reason : reasons)
    failures.Add(with(group, "reason", reason));
  if (active_now.emplace(group, 0).second) // its gauge exists from the start
    active.Add(group);
}

void janitor_metrics::family_set::finish(const prometheus::Labels& request,
                                         const prometheus::Labels& group, bool succeeded,
                                         const std::string& reason,
                                         double duration_seconds) {
  const char* status = succeeded ? success : failure;
  completed.Add(with(request, "status", status)).Increment();
  if (!succeeded)
    failures.Add(with(group, "reason", reason.empty() ? "unknown" : reason)).Increment();
  durations.Add(with(group, "status", status), duration_boundaries())
    .Observe(std::max(0.0, duration_seconds));
}

void janitor_metrics::family_set::set_active(
  const std::map<prometheus::Labels, std::int64_t>& now_active) {
  for (auto& [labels, value] : active_now)
    value = 0;
  for (const auto& [labels, value] : now_active)
    active_now[labels] += value;
  for (const auto& [labels, value] : active_now)
    active.Add(labels).Set(static_cast<double>(value));
}

std::int64_t janitor_metrics::family_set::active_total() const {
  std::int64_t n = 0;
  for (const auto& [labels, value] : active_now)
    n += value;
  return n;
}

janitor_metrics::janitor_metrics()
  : registry_(std::make_shared<prometheus::Registry>()),
    reset_(*registry_, "gpu_reset", "GPU reset",
           "The end-to-end duration of the reset workflow, from the GPUReset's "
           "creation to its reset Job's completion."),
    reboot_(*registry_, "reboot_node", "Node reboot",
            "From the RebootNode's creation to its outcome.") {}

void janitor_metrics::reset_started(const gpu_reset_labels& gpu) {
  reset_.start(gpu_labels(gpu, true), gpu_labels(gpu, false), reset_reasons());
}

void janitor_metrics::reset_finished(const gpu_reset_labels& gpu, bool succeeded,
                                     const std::string& reason, double duration_seconds) {
  reset_.finish(gpu_labels(gpu, true), gpu_labels(gpu, false), succeeded, reason,
                duration_seconds);
}

void janitor_metrics::set_active_resets(
  const std::map<std::pair<std::string, std::string>, std::int64_t>& active) {
  std::map<prometheus::Labels, std::int64_t> now_active;
  for (const auto& [key, value] : active)
    now_active[gpu_labels({key.first, key.second, ""}, false)] += value;
  reset_.set_active(now_active);
}

void janitor_metrics::reboot_started(const std::string& node) {
  reboot_.start({{"node", node}}, {{"node", node}}, reboot_reasons());
}

void janitor_metrics::reboot_finished(const std::string& node, bool succeeded,
                                      const std::string& reason,
                                      double duration_seconds) {
  reboot_.finish({{"node", node}}, {{"node", node}}, succeeded, reason, duration_seconds);
}

void janitor_metrics::set_active_reboots(
  const std::map<std::string, std::int64_t>& active) {
  std::map<prometheus::Labels, std::int64_t> now_active;
  for (const auto& [node, value] : active)
    now_active[{{"node", node}}] += value;
  reboot_.set_active(now_active);
}

std::int64_t janitor_metrics::active_resets() const {
  return reset_.active_total();
}

std::int64_t janitor_metrics::active_reboots() const {
  return reboot_.active_total();
}

metrics::family_list janitor_metrics::collect() const {
  return registry_->Collect();
}

std::string janitor_metrics::render() const {
  return metrics::exposition(collect());
}

std::string render_janitor_metrics(const janitor_metrics& metrics) {
  return metrics.render();
}

http::handler
make_janitor_http_handler(std::shared_ptr<const janitor_metrics> metrics,
                          std::function<metrics::family_list()> more_metrics) {
  return [metrics, more_metrics](http::request req, http::responder reply) {
    http::response r;
    r.content_type = "text/plain; charset=utf-8";
    if (req.method != "GET" && req.method != "HEAD") {
      r.status = 405;
      r.headers.emplace_back("Allow", "GET, HEAD");
      r.body = "use GET\n";
    } else if (req.path == "/metrics") {
      r.content_type = metrics::content_type;
      auto families = metrics->collect();
      if (more_metrics)
        metrics::append(families, more_metrics());
      r.body = metrics::exposition(families);
    } else if (req.path == "/healthz" || req.path == "/readyz") {
      r.body = "ok\n";
    } else {
      r.status = 404;
      r.body = "not found\n";
    }
    reply(std::move(r));
  };
}

} // namespace vigil
